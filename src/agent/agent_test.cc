#include "agent/agent.h"

#include <gtest/gtest.h>

#include "agent/agent_internal.h"

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

// A node's cgroup holds the limits of every task of the job it runs there.
TEST(AgentTest, LimitsCountTheTasksOnTheNode) {
  const Json a = Json::parse(R"({"spec": {"gpusPerTask": 2,
      "limits": {"milliCpu": 1500, "memoryBytes": 1024, "pids": 0}},
      "tasks": [{"node": "n0", "gpus": [0, 1]}, {"node": "n1", "gpus": [0, 1]},
                {"node": "n0", "gpus": [2, 3]}]})");
  EXPECT_EQ(TasksOn(a, "n0"), 2);
  EXPECT_EQ(TasksOn(a, "n1"), 1);
  EXPECT_EQ(LimitsOf(a["spec"]), (io::TaskLimits{1500, 1024, 0}));
  Json whole = a;
  whole["spec"]["gpusPerTask"] = 0;  // a node's share is one task
  EXPECT_EQ(TasksOn(whole, "n0"), 1);
  EXPECT_FALSE(LimitsOf(Json::object()).any());
}

// The clock offset from one heartbeat, as NTP takes it: the server's time
// against the middle of the round trip; a slow round trip says nothing.
TEST(ClockOffsetTest, TheMiddleOfTheRoundTripAgainstTheServersClock) {
  EXPECT_EQ(ClockOffsetMs(1000, 1010, 1005), 0.0);
  EXPECT_EQ(ClockOffsetMs(1000, 1010, 3005), -2000.0);  // the node is 2 s behind
  EXPECT_EQ(ClockOffsetMs(5000, 5020, 1010), 4000.0);   // 4 s ahead
  EXPECT_EQ(ClockOffsetMs(1000, 4000, 2500), std::nullopt);
  EXPECT_EQ(ClockOffsetMs(1000, 900, 950), std::nullopt);  // the clock stepped back
}

}  // namespace

}  // namespace unipool::agent
