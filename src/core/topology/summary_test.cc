#include "core/topology/summary.h"

#include <gtest/gtest.h>

#include "core/topology/test_clusters.h"

namespace unipool {
namespace {

TEST(SummaryTest, FiguresOfThreeTierCluster) {
  ClusterSpec spec = testing::ThreeTier(192);
  spec.tiers[3].oversubscription_milli = 4000;
  Result<Topology> t = Topology::Build(spec);
  ASSERT_TRUE(t.ok());
  const ClusterSummary s = Summarize(*t);
  EXPECT_EQ(s.gpus, Gpus(192));
  EXPECT_EQ(s.nodes, 24);
  ASSERT_EQ(s.tiers.size(), 4u);
  // Bisection = floor(largest group / 2) x effective bandwidth per GPU.
  EXPECT_EQ(s.tiers[0].bisection, Gbps(3600) * 4);
  EXPECT_EQ(s.tiers[1].bisection, Gbps(400) * 8);
  EXPECT_EQ(s.tiers[2].bisection, Gbps(400) * 32);
  EXPECT_EQ(s.tiers[3].bisection, Gbps(100) * 96);
  EXPECT_EQ(s.power, Watts(192 * 700));
  EXPECT_EQ(s.peak_bf16, FlopRate(192 * 989400));
  ASSERT_EQ(s.partitions.size(), 3u);
  EXPECT_EQ(s.partitions[2].name, "pod-2");
  EXPECT_EQ(s.partitions[2].gpus, Gpus(64));
  EXPECT_EQ(s.nodes_by_state[0], 24);
}

TEST(SummaryTest, MixedModelsAndStates) {
  Result<Topology> t = Topology::Build(testing::ExplicitTwoRacks());
  ASSERT_TRUE(t.ok());
  const ClusterSummary s = Summarize(*t);
  EXPECT_EQ(s.tiers[0].min_group_gpus, Gpus(4));
  EXPECT_EQ(s.tiers[0].max_group_gpus, Gpus(8));
  EXPECT_EQ(s.nodes_by_state[static_cast<int>(NodeState::kDown)], 1);
  EXPECT_EQ(s.power, Watts(24 * 400));
}

}  // namespace
}  // namespace unipool
