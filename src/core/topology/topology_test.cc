#include "core/topology/topology.h"

#include <gtest/gtest.h>

#include "core/topology/test_clusters.h"

namespace unipool {
namespace {

TEST(TopologyTest, GeneratorBuildsRegularTree) {
  // 2 nodes per rack, 4 racks per pod, 3 pods (the top tier is derived).
  Result<Topology> t = Topology::Build(testing::ThreeTier(/*gpus=*/192));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_gpus(), Gpus(192));
  EXPECT_EQ(t->num_nodes(), 24);
  ASSERT_EQ(t->num_tiers(), 4);
  EXPECT_EQ(t->num_groups(0), 24);  // each node is its own NVLink domain
  EXPECT_EQ(t->num_groups(1), 12);
  EXPECT_EQ(t->num_groups(2), 3);
  EXPECT_EQ(t->num_groups(3), 1);
  EXPECT_EQ(t->group_gpus(2, GroupId(1)), Gpus(64));
  EXPECT_EQ(t->group_first_node(2, GroupId(1)), NodeId(8));
  EXPECT_EQ(t->group_num_children(2, GroupId(1)), 4);
  EXPECT_EQ(t->group_first_child(2, GroupId(1)), 4);
  EXPECT_EQ(t->parent(1, GroupId(5)), GroupId(1));
  EXPECT_FALSE(t->parent(3, GroupId(0)).valid());
  EXPECT_EQ(t->node_name(NodeId(3)), "n03");
  EXPECT_EQ(t->group_name(1, GroupId(11)), "rack-11");
}

TEST(TopologyTest, PartialTopGroupIsAllowed) {
  Result<Topology> t = Topology::Build(testing::ThreeTier(/*gpus=*/80));  // 10 nodes
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_groups(2), 2);
  EXPECT_EQ(t->group_gpus(2, GroupId(1)), Gpus(16));
  EXPECT_EQ(t->group_num_children(2, GroupId(1)), 1);
}

TEST(TopologyTest, LowestCommonTier) {
  Result<Topology> t = Topology::Build(testing::ThreeTier(192));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(7)), -1);  // same node
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(8)), 1);   // same rack
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(63)), 2);  // same pod
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(64)), 3);  // across pods
  EXPECT_EQ(t->node_of(GpuId(191)), NodeId(23));
  EXPECT_EQ(t->first_gpu(NodeId(23)), GpuId(184));
}

TEST(TopologyTest, EffectiveBandwidthIsNarrowestScaleOutTier) {
  ClusterSpec spec = testing::ThreeTier(192);
  spec.tiers[2].oversubscription_milli = 2000;  // pod 2:1
  spec.tiers[3].oversubscription_milli = 8000;  // top 8:1
  Result<Topology> t = Topology::Build(spec);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tier(0).effective_per_gpu, Gbps(3600));
  EXPECT_EQ(t->tier(1).effective_per_gpu, Gbps(400));
  EXPECT_EQ(t->tier(2).effective_per_gpu, Gbps(200));
  EXPECT_EQ(t->tier(3).effective_per_gpu, Gbps(50));
}

TEST(TopologyTest, ScaleUpDomainsSpanNodes) {
  ClusterSpec spec = testing::ThreeTier(288);
  spec.generator->gpus_per_node = 4;
  spec.tiers[0].fanout = 18;  // NVL72: 18 trays of 4 GPUs
  spec.tiers[1].fanout = 2;
  spec.tiers[2].fanout = 0;
  spec.tiers.pop_back();
  Result<Topology> t = Topology::Build(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_groups(0), 4);
  EXPECT_EQ(t->group_gpus(0, GroupId(0)), Gpus(72));
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(71)), 0);
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId(72)), 1);
}

TEST(TopologyTest, ExplicitNodesAreRegroupedDepthFirst) {
  ClusterSpec spec = testing::ExplicitTwoRacks();
  Result<Topology> t = Topology::Build(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->num_nodes(), 4);
  // File order a0, b0, a1, b1; racks r-a, r-b; nodes regrouped by rack.
  EXPECT_EQ(t->node_name(NodeId(0)), "a0");
  EXPECT_EQ(t->node_name(NodeId(1)), "a1");
  EXPECT_EQ(t->node_name(NodeId(2)), "b0");
  EXPECT_EQ(t->group_name(1, t->group_of(NodeId(2), 1)), "r-b");
  EXPECT_EQ(t->group_num_nodes(1, GroupId(0)), 2);
  EXPECT_EQ(t->FindNode("b1"), NodeId(3));
  EXPECT_FALSE(t->FindNode("zz").has_value());
  EXPECT_EQ(t->node_state(NodeId(3)), NodeState::kDown);
  EXPECT_EQ(t->node_gpus(NodeId(2)), Gpus(4));
  EXPECT_EQ(t->num_gpus(), Gpus(24));
}

TEST(TopologyTest, ExplicitGroupWithTwoParentsIsRejected) {
  ClusterSpec spec = testing::ExplicitTwoRacks();
  spec.tiers.insert(spec.tiers.begin() + 2, TierSpec{"pod", Gbps(400), Microseconds(3)});
  for (auto& n : spec.nodes) n.groups.resize(4);
  spec.nodes[0].groups[2] = "p0";
  spec.nodes[2].groups[2] = "p1";  // a1 is in rack r-a like a0, but pod p1
  Result<Topology> t = Topology::Build(spec);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("rack 'r-a' is under pod"), std::string::npos)
      << t.status().message();
}

TEST(TopologyTest, RejectsBadGeneratorInput) {
  ClusterSpec spec = testing::ThreeTier(100);  // not a multiple of 8
  EXPECT_NE(Topology::Build(spec).status().message().find("not a multiple"), std::string::npos);
  spec = testing::ThreeTier(192);
  spec.tiers[3].fanout = 2;  // top holds 2 pods = 16 nodes < 24
  EXPECT_NE(Topology::Build(spec).status().message().find("top tier"), std::string::npos);
  spec = testing::ThreeTier(192);
  spec.generator->gpu_model = "Z9000";
  EXPECT_NE(Topology::Build(spec).status().message().find("unknown GPU model"),
            std::string::npos);
}

TEST(TopologyTest, MillionGpuClusterIsCompact) {
  ClusterSpec spec = testing::ThreeTier(1 << 20);
  spec.tiers[2].fanout = 1024;
  Result<Topology> t = Topology::Build(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->num_nodes(), 131072);
  EXPECT_EQ(t->num_groups(2), 64);
  EXPECT_EQ(t->LowestCommonTier(GpuId(0), GpuId((1 << 20) - 1)), 3);
}

}  // namespace
}  // namespace unipool
