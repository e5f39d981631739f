// Power domains as a schedulable limit (PowerBudget and the scheduler): a
// capped domain never draws more than its cap, work waits with the reason
// Power, and freed power goes to the waiting job.
#include "core/sched/power.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/sched/scheduler.h"
#include "core/topology/test_clusters.h"

namespace unipool::sched {
namespace {

// 64 H100s: 8 nodes, racks of 2 nodes, two pods of 4 racks, one partition.
ClusterSpec Spec() {
  ClusterSpec spec = unipool::testing::ThreeTier(64);
  spec.generator->partition_tier.clear();
  return spec;
}

// W one H100 adds when busy, and what a node draws idle (the model's
// defaults: 70 W idle, 600 W training, 375 W host per GPU).
constexpr int64_t kDelta = 600 - 70;
constexpr int64_t kNodeIdle = 8 * (70 + 375);

// A cap on `tier` (group: all of them when empty) that leaves room for
// `busy` GPUs in a domain of `nodes` nodes.
ClusterSpec Capped(const std::string& tier, const std::string& group, int nodes, int busy) {
  ClusterSpec spec = Spec();
  spec.power.caps.push_back(
      PowerCapSpec{tier, group, Watts(nodes * kNodeIdle + busy * kDelta + kDelta / 2), {}});
  return spec;
}

JobSpec Job(int64_t id, QueueId q, int64_t gpus) {
  JobSpec j;
  j.id = JobId(id);
  j.queue = q;
  j.gpus = Gpus(gpus);
  return j;
}

std::vector<int64_t> Started(const std::vector<Decision>& ds) {
  std::vector<int64_t> out;
  for (const Decision& d : ds) {
    if (const auto* s = std::get_if<StartJob>(&d)) out.push_back(s->job.value());
  }
  return out;
}

class PowerTest : public ::testing::Test {
 protected:
  void Init(const ClusterSpec& spec) {
    Result<Topology> topo = Topology::Build(spec);
    ASSERT_TRUE(topo.ok()) << topo.status().ToString();
    topo_ = std::make_unique<Topology>(std::move(*topo));
    sched_ = std::make_unique<Scheduler>(*topo_);
    QueueSpec q;
    q.name = "q";
    q_ = sched_->queues().Add(q).value();
  }
  std::vector<int64_t> Cycle() {
    std::vector<Decision> ds = sched_->Schedule(now_);
    EXPECT_TRUE(sched_->CheckInvariants().ok()) << sched_->CheckInvariants().message();
    for (const PowerBudget::Domain& d : sched_->power().Domains()) {
      EXPECT_LE(d.draw.value(), d.cap.value()) << topo_->group_name(d.tier, d.group);
    }
    now_ += Seconds(60);
    return Started(ds);
  }

  std::unique_ptr<Topology> topo_;
  std::unique_ptr<Scheduler> sched_;
  QueueId q_;
  Time now_ = Seconds(0);
};

TEST(PowerBudgetTest, DrawIsIdlePlusTrainingAboveIdlePerBusyGpu) {
  const Topology topo = Topology::Build(Spec()).value();
  PowerBudget power(topo);
  EXPECT_EQ(power.draw().value(), 8 * kNodeIdle);
  power.Busy(NodeId(3), 8);
  power.Busy(NodeId(5), 2);
  EXPECT_EQ(power.draw().value(), 8 * kNodeIdle + 10 * kDelta);
  power.Busy(NodeId(3), -8);
  EXPECT_EQ(power.draw().value(), 8 * kNodeIdle + 2 * kDelta);
  EXPECT_TRUE(power.Domains().empty());
}

TEST_F(PowerTest, AClusterCapHoldsBackTheJobThatWouldExceedIt) {
  Init(Capped("top", "", 8, 24));  // room for 24 busy GPUs of 64
  for (int64_t id = 1; id <= 4; ++id) ASSERT_TRUE(sched_->Submit(Job(id, q_, 8), now_).ok());
  EXPECT_EQ(Cycle(), (std::vector<int64_t>{1, 2, 3}));
  const JobInfo* waiting = sched_->Find(JobId(4));
  ASSERT_EQ(waiting->phase, JobPhase::kPending);
  EXPECT_STREQ(Scheduler::ReasonCode(waiting->reason), "Power");
  EXPECT_EQ(sched_->Explain(JobId(4)).rfind("pending: waiting for power: top top-0 draws ", 0), 0)
      << sched_->Explain(JobId(4));
  EXPECT_EQ(sched_->free_gpus(), Gpus(0)) << "every idle node is hidden by power";

  ASSERT_TRUE(sched_->Finish(JobId(2), now_).ok());
  EXPECT_EQ(Cycle(), (std::vector<int64_t>{4}));
}

TEST_F(PowerTest, ARackCapKeepsWorkOffThatRackOnly) {
  Init(Capped("rack", "rack-0", 2, 0));  // rack-0 may not run anything
  ASSERT_TRUE(sched_->Submit(Job(1, q_, 48), now_).ok());
  ASSERT_TRUE(sched_->Submit(Job(2, q_, 8), now_).ok());
  EXPECT_EQ(Cycle(), (std::vector<int64_t>{1}));
  for (const Task& t : sched_->Find(JobId(1))->placement.tasks) {
    EXPECT_NE(topo_->group_name(1, topo_->group_of(t.node, 1)), "rack-0");
  }
  EXPECT_STREQ(Scheduler::ReasonCode(sched_->Find(JobId(2))->reason), "Power");
}

TEST_F(PowerTest, NestedCapsBothHold) {
  ClusterSpec spec = Capped("top", "", 8, 24);
  spec.power.caps.push_back(PowerCapSpec{"rack", "rack-1", Watts(2 * kNodeIdle + 4 * kDelta), {}});
  Init(spec);
  for (int64_t id = 1; id <= 8; ++id) ASSERT_TRUE(sched_->Submit(Job(id, q_, 4), now_).ok());
  EXPECT_EQ(Cycle().size(), 6u);  // 24 GPUs
  int64_t rack1 = 0;
  for (int64_t id = 1; id <= 8; ++id) {
    const JobInfo* job = sched_->Find(JobId(id));
    if (job->phase != JobPhase::kRunning) continue;
    for (const Task& t : job->placement.tasks) {
      if (topo_->group_name(1, topo_->group_of(t.node, 1)) == "rack-1") rack1 += CountGpus(t.gpus);
    }
  }
  EXPECT_LE(rack1, 4);
}

TEST_F(PowerTest, ANodeBackFromRepairDoesNotBreakTheCap) {
  Init(Capped("top", "", 8, 16));
  ASSERT_TRUE(sched_->SetNodeState(NodeId(0), NodeState::kDown, now_).ok());
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(sched_->Submit(Job(id, q_, 8), now_).ok());
  EXPECT_EQ(Cycle().size(), 2u);
  ASSERT_TRUE(sched_->SetNodeState(NodeId(0), NodeState::kUp, now_).ok());
  EXPECT_TRUE(Cycle().empty());
  EXPECT_STREQ(Scheduler::ReasonCode(sched_->Find(JobId(3))->reason), "Power");
}

TEST_F(PowerTest, EnergyIsTrainingPlusHostPowerOverTheRun) {
  Init(Spec());
  ASSERT_TRUE(sched_->Submit(Job(1, q_, 16), now_).ok());
  EXPECT_EQ(Cycle().size(), 1u);  // starts at t=0
  const JobInfo* job = sched_->Find(JobId(1));
  EXPECT_DOUBLE_EQ(sched_->EnergyJoules(*job, Seconds(3600)), 16 * (600.0 + 375) * 3600);
  EXPECT_EQ(sched_->power().draw().value(), 8 * kNodeIdle + 16 * kDelta);
}

}  // namespace
}  // namespace unipool::sched
