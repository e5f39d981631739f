#include "agent/gpu_metrics.h"

#include <gtest/gtest.h>

namespace unipool::agent {
namespace {

TEST(GpuMetricsTest, ReadsNvidiaSmiRows) {
  // As nvidia-smi prints them on an H100 node (two GPUs) and on a model
  // without ECC or power readings.
  const std::vector<GpuSample> s = ParseGpuSamples(
      "0, 97, 71234, 81559, 64, 612.35, 0\n"
      "1, 3, 4, 81559, 31, [N/A], [N/A]\n"
      "garbage line\n"
      "2, x, 1, 2, 3, 4, 5\n");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].index, 0);
  EXPECT_DOUBLE_EQ(s[0].utilization, 97);
  EXPECT_DOUBLE_EQ(s[0].memory_used_mib, 71234);
  EXPECT_DOUBLE_EQ(s[0].memory_total_mib, 81559);
  EXPECT_DOUBLE_EQ(s[0].temperature_c, 64);
  EXPECT_DOUBLE_EQ(s[0].power_w, 612.35);
  EXPECT_EQ(s[0].ecc_uncorrected, 0);
  EXPECT_DOUBLE_EQ(s[1].power_w, -1);
  EXPECT_EQ(s[1].ecc_uncorrected, -1);
  EXPECT_TRUE(ParseGpuSamples("").empty());
}

}  // namespace
}  // namespace unipool::agent
