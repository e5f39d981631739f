#include "agent/agent.h"

#include <gtest/gtest.h>

namespace unipool::agent {
namespace {

TEST(AgentTest, GpuHealthReadsNvidiaSmi) {
  EXPECT_EQ(GpuHealthFrom(0, "0, 0, No\n1, 0, No\n"), "ok");
  EXPECT_EQ(GpuHealthFrom(0, "0, [N/A], [N/A]\n"), "ok");  // no ECC on this model
  EXPECT_EQ(GpuHealthFrom(0, "0, 0, No\n1, 3, No\n"), "GPU 1: 3 uncorrected ECC errors");
  EXPECT_EQ(GpuHealthFrom(0, "0, 0, Yes\n"), "GPU 0: page retirement pending (reset the GPU)");
  EXPECT_EQ(
      GpuHealthFrom(9, "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"),
      "nvidia-smi failed: Unable to determine the device handle for GPU0000:3B:00.0: Unknown "
      "Error");
}

}  // namespace
}  // namespace unipool::agent
