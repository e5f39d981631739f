#include "core/sched/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/base/rng.h"
#include "core/topology/test_clusters.h"

namespace unipool::sched {
namespace {

// The definition, spelled out: distinct groups per tier, and the slowest
// hop of the ring in rank order.
PlacementScore Reference(const Topology& topo, const std::vector<Task>& tasks) {
  PlacementScore s;
  s.groups_used.assign(topo.num_tiers(), 0);
  for (int t = 0; t < topo.num_tiers(); ++t) {
    std::set<int32_t> groups;
    for (const Task& task : tasks) groups.insert(topo.group_of(task.node, t).value());
    s.groups_used[t] = static_cast<int32_t>(groups.size());
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    s.span_tier = std::max(
        s.span_tier, topo.LowestCommonTier(tasks[i].node, tasks[(i + 1) % tasks.size()].node));
  }
  return s;
}

// Random node-ordered placements on 96 nodes in racks of 2 and pods of 8.
std::vector<Task> RandomTasks(Rng& rng, int32_t nodes) {
  std::vector<Task> tasks;
  const uint64_t keep = 1 + rng.Below(6);  // denser and sparser gangs
  for (int32_t n = 0; n < nodes; ++n) {
    if (rng.Below(keep) == 0) tasks.push_back(Task{NodeId(n), 1ULL + rng.Below(255)});
  }
  return tasks;
}

TEST(ScorePlacementTest, NodeOrderedTasksScoreAsTheDefinitionSays) {
  const Topology topo = Topology::Build(unipool::testing::ThreeTier(768)).value();
  Rng rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    Placement p;
    p.tasks = RandomTasks(rng, topo.num_nodes());
    if (p.tasks.empty()) continue;
    ScorePlacement(topo, p);
    const PlacementScore want = Reference(topo, p.tasks);
    ASSERT_EQ(p.score.groups_used, want.groups_used) << "trial " << trial;
    ASSERT_EQ(p.score.span_tier, want.span_tier) << "trial " << trial;
  }
}

TEST(ScorePlacementTest, TasksOutOfNodeOrderCountRunsAndTheRing) {
  const Topology topo = Topology::Build(unipool::testing::ThreeTier(192)).value();
  Placement p;
  // Racks of 2 nodes: nodes 0 and 4 share pod 0 but not a rack; in rank
  // order the ring goes rack 0, rack 2, rack 0 again.
  p.tasks = {Task{NodeId(0), 0xff}, Task{NodeId(4), 0xff}, Task{NodeId(1), 0xff}};
  ScorePlacement(topo, p);
  EXPECT_EQ(p.score.groups_used[1], 3);  // three runs of racks
  EXPECT_EQ(p.score.span_tier, 2);       // the pod
  EXPECT_EQ(p.gpus(), Gpus(24));
}

TEST(MergeInNodeOrderTest, KeepsNodeOrderAndOneTaskPerNode) {
  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Task> tasks = RandomTasks(rng, 64);
    std::vector<Task> more;  // a few or many, in any order, some on nodes already there
    const uint64_t count = rng.Below(2) == 0 ? rng.Below(4) : rng.Below(40);
    for (uint64_t i = 0; i < count; ++i) {
      more.push_back(Task{NodeId(static_cast<int32_t>(rng.Below(64))), 1ULL << rng.Below(8)});
    }
    std::map<int32_t, GpuMask> want;
    for (const Task& t : tasks) want[t.node.value()] |= t.gpus;
    for (const Task& t : more) want[t.node.value()] |= t.gpus;
    MergeInNodeOrder(tasks, more);
    ASSERT_EQ(tasks.size(), want.size()) << "trial " << trial;
    size_t i = 0;
    for (const auto& [node, mask] : want) {
      ASSERT_EQ(tasks[i].node, NodeId(node)) << "trial " << trial;
      ASSERT_EQ(tasks[i].gpus, mask) << "trial " << trial;
      ++i;
    }
  }
}

}  // namespace
}  // namespace unipool::sched
