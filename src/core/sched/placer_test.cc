#include "core/sched/placer.h"

#include <gtest/gtest.h>

#include <set>

#include "core/topology/test_clusters.h"

namespace unipool::sched {
namespace {

// 24 nodes x 8 GPUs; racks of 2 nodes; pods of 4 racks (64 GPUs); 3 pods.
class PlacerTest : public ::testing::Test {
 protected:
  PlacerTest() : topo_(Topology::Build(unipool::testing::ThreeTier(192)).value()), pool_(topo_) {}

  Placement PlaceOk(int64_t tasks, int32_t task_gpus, int max_level = 1 << 20,
                    int32_t per_node = 0) {
    PlaceRequest req;
    req.tasks = tasks;
    req.task_gpus = task_gpus;
    req.max_level = max_level;
    req.max_tasks_per_node = per_node;
    PlaceOutcome out = TopologyPlacer().Place(pool_, req);
    EXPECT_TRUE(std::holds_alternative<Placed>(out));
    return std::holds_alternative<Placed>(out) ? std::get<Placed>(out).placement : Placement{};
  }
  void Take(int32_t node, GpuMask mask) {
    pool_.Take(NodeId(node), mask);
    pool_.Flush();
  }
  void Commit(const Placement& p) {
    for (const Task& t : p.tasks) pool_.Take(t.node, t.gpus);
    pool_.Flush();
  }
  std::vector<int32_t> Nodes(const Placement& p) {
    std::vector<int32_t> out;
    for (const Task& t : p.tasks) out.push_back(t.node.value());
    return out;
  }

  Topology topo_;
  Pool pool_;
};

TEST_F(PlacerTest, WholeNodeJobFillsOneNode) {
  Placement p = PlaceOk(1, 8);
  EXPECT_EQ(Nodes(p), std::vector<int32_t>{0});
  EXPECT_EQ(p.tasks[0].gpus, GpuMask{0xFF});
  EXPECT_EQ(p.score.span_tier, -1);
}

TEST_F(PlacerTest, TwoNodeJobStaysInOneRack) {
  Take(0, 0xFF);  // rack-0 now has one free node
  Placement p = PlaceOk(2, 8);
  EXPECT_EQ(Nodes(p), (std::vector<int32_t>{2, 3}));  // rack-1, not nodes 1+2
  EXPECT_EQ(p.score.span_tier, 1);
  EXPECT_EQ(p.score.groups_used[1], 1);
}

TEST_F(PlacerTest, SmallJobGoesToTheFullestNodeThatFits) {
  Take(5, 0b00011111);  // 3 free
  Take(7, 0b00111111);  // 2 free
  Take(9, 0b01111111);  // 1 free
  Placement p = PlaceOk(1, 2);
  EXPECT_EQ(Nodes(p), std::vector<int32_t>{7});
  EXPECT_EQ(p.tasks[0].gpus, GpuMask{0xC0});
}

TEST_F(PlacerTest, ThreeNodesUseFewestRacksAndBestFit) {
  // Pod 0: rack-0 full-free, rack-1 has one free node (node 2 used).
  Take(2, 0xFF);
  Placement p = PlaceOk(3, 8);
  // A whole rack plus the lone free node of rack-1: two racks, pod-0 packed.
  EXPECT_EQ(Nodes(p), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(p.score.span_tier, 2);
  EXPECT_EQ(p.score.groups_used[1], 2);
}

TEST_F(PlacerTest, PodBestFitPacksThePartlyUsedPod) {
  // Pod 1 (nodes 8..15) has 6 free nodes; pods 0 and 2 have 8.
  Take(8, 0xFF);
  Take(9, 0xFF);
  Placement p = PlaceOk(4, 8);  // 4 nodes fit in pod 1 exactly: racks 5 and 6
  EXPECT_EQ(Nodes(p), (std::vector<int32_t>{10, 11, 12, 13}));
}

// Among pods that fit, the one the gang fills with the fewest racks wins
// before the fullest: two whole racks beat three partial ones.
TEST_F(PlacerTest, PodWithWholeRacksBeatsAFullerScatteredOne) {
  for (int32_t n : {0, 2, 4}) Take(n, 0xff);      // pod 0: one node free in 3 racks, 1 whole rack
  for (int32_t n : {8, 9, 10}) Take(n, 0xff);     // pod 1: two whole racks, one half
  const Placement p = PlaceOk(4, 8);
  EXPECT_EQ(Nodes(p), (std::vector<int32_t>{12, 13, 14, 15}));
  EXPECT_EQ(p.score.groups_used[1], 2);
}

TEST_F(PlacerTest, RequiredTierLimitsTheSpan) {
  PlaceRequest req;
  req.tasks = 9;  // 72 GPUs > one pod
  req.task_gpus = 8;
  req.max_level = 3;  // within a pod (tier 2)
  PlaceOutcome out = TopologyPlacer().Place(pool_, req);
  ASSERT_TRUE(std::holds_alternative<NoRoom>(out));
  EXPECT_EQ(std::get<NoRoom>(out).level, 4);  // only the top tier holds 9 nodes
}

TEST_F(PlacerTest, ExcludedGroupIsLeftAlone) {
  PlaceRequest req;
  req.tasks = 2;
  req.task_gpus = 8;
  req.exclude = {2, GroupId(0)};  // keep pod-0 free
  PlaceOutcome out = TopologyPlacer().Place(pool_, req);
  ASSERT_TRUE(std::holds_alternative<Placed>(out));
  EXPECT_EQ(Nodes(std::get<Placed>(out).placement), (std::vector<int32_t>{8, 9}));
}

TEST_F(PlacerTest, ManySmallTasksShareNodes) {
  Placement p = PlaceOk(6, 2);  // 12 GPUs as 2-GPU tasks
  EXPECT_EQ(p.gpus(), Gpus(12));
  EXPECT_EQ(p.tasks.size(), 2u);
  EXPECT_EQ(p.score.span_tier, 1);
}

TEST_F(PlacerTest, NoRoomWhenPoolIsShort) {
  for (int32_t n = 0; n < 23; ++n) pool_.Take(NodeId(n), 0xFF);
  pool_.Flush();
  PlaceRequest req;
  req.tasks = 2;
  PlaceOutcome out = TopologyPlacer().Place(pool_, req);
  ASSERT_TRUE(std::holds_alternative<NoRoom>(out));
  EXPECT_EQ(std::get<NoRoom>(out).free_tasks, 1);
  EXPECT_EQ(std::get<NoRoom>(out).level, -1);
}

TEST_F(PlacerTest, FirstFitCrossesRacksWhereTopologyPlacerDoesNot) {
  Take(0, 0xFF);
  PlaceRequest req;
  req.tasks = 2;
  PlaceOutcome naive = FirstFitPlacer().Place(pool_, req);
  ASSERT_TRUE(std::holds_alternative<Placed>(naive));
  EXPECT_EQ(Nodes(std::get<Placed>(naive).placement), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(std::get<Placed>(naive).placement.score.span_tier, 2);
  EXPECT_EQ(PlaceOk(2, 8).score.span_tier, 1);
}

TEST_F(PlacerTest, FirstFitStaysWithinTheGroupAsked) {
  PlaceRequest req;
  req.tasks = 2;
  req.within = std::make_pair(2, GroupId(1));  // pod-1: nodes 8..15
  PlaceOutcome out = FirstFitPlacer().Place(pool_, req);
  ASSERT_TRUE(std::holds_alternative<Placed>(out));
  EXPECT_EQ(Nodes(std::get<Placed>(out).placement), (std::vector<int32_t>{8, 9}));
}

TEST_F(PlacerTest, AllReduceEstimateFollowsTheSlowestHop) {
  // 16 GPUs in one rack: 2*(15/16)*8 Gib over 400 Gb/s + 30 x 2 us.
  Placement p = PlaceOk(2, 8);
  const double expect_s = 2.0 * 15 / 16 * (1LL << 30) * 8 / 400e9 + 30 * 2e-6;
  EXPECT_NEAR(ToSeconds(p.score.allreduce_1gib), expect_s, 1e-9);
  EXPECT_EQ(DescribePlacement(topo_, p),
            "2 nodes within rack rack-00; ring all-reduce of 1 GiB ~ 40.3 ms");
}

// Spread: with one task per node, four 2-GPU tasks take four nodes (in
// one rack where it can), where packing puts them on one.
TEST_F(PlacerTest, OneTaskPerNodeSpreadsTheGang) {
  Placement packed = PlaceOk(4, 2);
  EXPECT_EQ(packed.tasks.size(), 1u);
  Placement spread = PlaceOk(4, 2, 1 << 20, /*per_node=*/1);
  ASSERT_EQ(spread.tasks.size(), 4u);
  for (const Task& t : spread.tasks) EXPECT_EQ(CountGpus(t.gpus), 2);
  std::vector<int32_t> nodes = Nodes(spread);
  EXPECT_EQ(std::set<int32_t>(nodes.begin(), nodes.end()).size(), 4u);
  EXPECT_EQ(spread.score.span_tier, 2) << "racks hold 2 nodes: a pod holds the 4";
  // No room for more tasks than nodes with the GPUs free.
  PlaceRequest req;
  req.tasks = static_cast<int64_t>(topo_.num_nodes()) + 1;
  req.task_gpus = 1;
  req.max_tasks_per_node = 1;
  EXPECT_TRUE(std::holds_alternative<NoRoom>(TopologyPlacer().Place(pool_, req)));
  EXPECT_TRUE(std::holds_alternative<NoRoom>(FirstFitPlacer().Place(pool_, req)));
  req.tasks = topo_.num_nodes();
  EXPECT_TRUE(std::holds_alternative<Placed>(FirstFitPlacer().Place(pool_, req)));
}

TEST(PoolTest, UnusableNodesHideTheirGpus) {
  Topology topo = Topology::Build(unipool::testing::ThreeTier(64)).value();
  Pool pool(topo);
  EXPECT_EQ(pool.Free(3, GroupId(0)), 64);
  EXPECT_EQ(pool.MaxWhole(3, GroupId(0), 2), 2);  // a whole rack = 2 nodes
  pool.Take(NodeId(1), 0x0F);
  pool.SetUsable(NodeId(1), false);
  pool.Release(NodeId(1), 0x0F);  // released while down: stays hidden
  pool.Flush();
  EXPECT_EQ(pool.Free(3, GroupId(0)), 56);
  EXPECT_EQ(pool.MaxWhole(3, GroupId(0), 2), 2);  // rack-1 still whole
  EXPECT_EQ(pool.MaxWhole(1, GroupId(0), 1), 1);  // rack-0: node 0 only
  pool.SetUsable(NodeId(1), true);
  pool.Flush();
  EXPECT_EQ(pool.Free(3, GroupId(0)), 64);
  EXPECT_EQ(pool.Hist(3, GroupId(0), 8), 8);
  EXPECT_EQ(pool.TasksIn(1, GroupId(0), 4), 4);
}

TEST(PoolTest, DownNodesStartHidden) {
  Topology topo = Topology::Build(unipool::testing::ExplicitTwoRacks()).value();
  Pool pool(topo);
  EXPECT_FALSE(pool.usable(NodeId(3)));  // b1 is down
  EXPECT_EQ(pool.Free(2, GroupId(0)), 20);
  EXPECT_FALSE(pool.uniform_nodes());
}

}  // namespace
}  // namespace unipool::sched
