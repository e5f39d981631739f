// Scheduler stories: each test reads as a short scenario on a small cluster.
#include "core/sched/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/sched/scheduler_test_util.h"

namespace unipool::sched {
namespace {

TEST_F(SchedulerTest, GangStartsWholeOnTheClosestTier) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 16));
  auto d = Cycle();
  auto starts = Of<StartJob>(d);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].placement.gpus(), Gpus(16));
  EXPECT_EQ(starts[0].placement.score.span_tier, 1);  // one rack
  EXPECT_EQ(sched_->Explain(JobId(1)),
            "running on 2 nodes within rack rack-00; ring all-reduce of 1 GiB ~ "
            "40.3 ms; the lowest tier with room, best-fit at each tier");
}

// GPUs per node: each task on a node of its own, and the rest of each node
// stays free for other jobs.
TEST_F(SchedulerTest, ANodePerTaskSpreadsTheGang) {
  QueueId q = AddQueue("q");
  JobSpec j = Job(1, q, 8);
  j.task_gpus = 2;
  j.max_tasks_per_node = 1;
  Submit(j);
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(starts[0].placement.tasks.size(), 4u);
  for (const Task& t : starts[0].placement.tasks) EXPECT_EQ(CountGpus(t.gpus), 2);
  // 192 GPUs on 24 nodes: at most 24 tasks of a node each.
  JobSpec wide = Job(2, q, 25);
  wide.task_gpus = 1;
  wide.max_tasks_per_node = 1;
  Submit(wide);
  Cycle();
  ASSERT_TRUE(std::holds_alternative<reason::Infeasible>(Reason(2)));
  EXPECT_NE(std::get<reason::Infeasible>(Reason(2)).why.find("at most 24 exist"), std::string::npos)
      << std::get<reason::Infeasible>(Reason(2)).why;
  JobSpec bad = Job(3, q, 8);
  bad.max_tasks_per_node = 2;
  EXPECT_FALSE(sched_->Submit(bad, now_).ok());
}

TEST_F(SchedulerTest, FairShareAlternatesBetweenQueues) {
  QueueId a = AddQueue("a"), b = AddQueue("b");
  for (int i = 0; i < 3; ++i) Submit(Job(10 + i, a, 64));
  for (int i = 0; i < 3; ++i) Submit(Job(20 + i, b, 64));
  EXPECT_EQ(Started(Cycle()), (std::vector<int64_t>{10, 20, 11}));
  EXPECT_EQ(sched_->queues().used(a), Gpus(128));
  EXPECT_EQ(sched_->queues().used(b), Gpus(64));
}

TEST_F(SchedulerTest, PriorityThenAgeWithinAQueue) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 128));
  Advance(1);
  Submit(Job(2, q, 128, /*priority=*/5));
  EXPECT_EQ(Started(Cycle()), std::vector<int64_t>{2});
}

TEST_F(SchedulerTest, StrictFifoHoldsBackSmallerJobs) {
  QueueId fifo = AddQueue("fifo", 0, 0, QueuePolicy::kFifo);
  QueueId be = AddQueue("be");
  Submit(Job(1, fifo, 128));
  Submit(Job(2, be, 128));
  Cycle();  // one of them runs
  Submit(Job(3, fifo, 128));
  Submit(Job(4, fifo, 8));
  Submit(Job(5, be, 128));
  Submit(Job(6, be, 8));
  auto started = Started(Cycle());
  EXPECT_EQ(started, std::vector<int64_t>{6});  // be: small job passes; fifo: 4 waits behind 3
  EXPECT_TRUE(std::holds_alternative<reason::BehindFifoHead>(Reason(4)));
  EXPECT_EQ(sched_->Explain(JobId(4)), "pending: queue is strict FIFO: waiting behind job 3");
}

TEST_F(SchedulerTest, LimitsAreHard) {
  AddQueue("org", 0, 32);
  QueueId team = AddQueue("team", 0, 0, QueuePolicy::kBestEffort, "org");
  Submit(Job(1, team, 16));
  Submit(Job(2, team, 24));
  EXPECT_EQ(Started(Cycle()), std::vector<int64_t>{1});
  EXPECT_EQ(sched_->Explain(JobId(2)),
            "pending: queue 'org' is at its limit: 16 of 32 GPUs in use");
  Submit(Job(3, team, 40));
  Cycle();
  EXPECT_EQ(sched_->Explain(JobId(3)),
            "pending: can never run: needs 40 GPUs but queue 'org' is limited to 32");
}

TEST_F(SchedulerTest, SubmitRejectsMalformedJobs) {
  QueueId parent = AddQueue("p");
  AddQueue("c", 0, 0, QueuePolicy::kBestEffort, "p");
  EXPECT_FALSE(sched_->Submit(Job(1, parent, 8), now_).ok());  // not a leaf
  QueueId leaf = AddQueue("leaf");
  JobSpec odd = Job(2, leaf, 12);
  odd.task_gpus = 8;
  EXPECT_FALSE(sched_->Submit(odd, now_).ok());  // 12 not a multiple of 8
  JobSpec big_task = Job(3, leaf, 16);
  big_task.task_gpus = 16;
  EXPECT_FALSE(sched_->Submit(big_task, now_).ok());  // no 16-GPU node
  EXPECT_FALSE(sched_->Submit(Job(4, leaf, 0), now_).ok());
  EXPECT_FALSE(sched_->Submit(Job(5, QueueId(99), 8), now_).ok());
  Submit(Job(6, leaf, 8));
  EXPECT_EQ(sched_->Submit(Job(6, leaf, 8), now_).code(), StatusCode::kAlreadyExists);
}

TEST_F(SchedulerTest, InfeasibleJobsSayWhy) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 256));
  JobSpec rack = Job(2, q, 32);
  rack.required_tier = 1;  // a rack holds 16 GPUs
  Submit(rack);
  Cycle();
  EXPECT_EQ(sched_->Explain(JobId(1)),
            "pending: can never run: needs 256 GPUs in tasks of 8, but at most 192 exist there");
  EXPECT_EQ(sched_->Explain(JobId(2)),
            "pending: can never run: needs 32 GPUs in tasks of 8 within one rack, but at most 16 "
            "exist there");
}

TEST_F(SchedulerTest, RequiredTierWaitsForAContiguousBlock) {
  QueueId q = AddQueue("q");
  // One node cordoned in every pod: no pod has 64 usable GPUs.
  for (int32_t n : {0, 8, 16})
    ASSERT_TRUE(sched_->SetNodeState(NodeId(n), NodeState::kCordoned, now_).ok());
  JobSpec pod = Job(1, q, 64);
  pod.required_tier = 2;
  Submit(pod);
  Cycle();
  EXPECT_EQ(
      sched_->Explain(JobId(1)),
      "pending: no contiguous block: needs 64 GPUs within one pod, the largest free block is 56");
}

TEST_F(SchedulerTest, PreemptionPicksTheVictimThatLosesLeastWork) {
  QueueId q = AddQueue("q");
  for (int i = 0; i < 3; ++i) Submit(Job(10 + i, q, 64));
  Cycle();
  Advance(3600);
  // Job 11 checkpointed a minute ago; 10 and 12 an hour ago (at start).
  ASSERT_TRUE(sched_->Checkpointed(JobId(11), now_ - Seconds(60)).ok());
  Submit(Job(1, q, 64, /*priority=*/10));
  auto d = Cycle();
  auto pre = Of<PreemptJob>(d);
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].job, JobId(11));
  EXPECT_EQ(pre[0].for_job, JobId(1));
  EXPECT_EQ(pre[0].lost_gpu_seconds, 64 * 60);
  EXPECT_EQ(pre[0].deadline, now_ + Seconds(60));  // the queue's grace
  EXPECT_EQ(Phase(11), JobPhase::kPreempting);
  EXPECT_EQ(
      sched_->Explain(JobId(1)),
      "pending: preempting job(s) 11 to make room; they have their grace period to checkpoint");
  // Nothing else steals the GPUs; once 11 stops, 1 starts and 11 waits.
  Submit(Job(2, q, 64, /*priority=*/10));
  EXPECT_TRUE(Started(Cycle()).empty());
  Advance(30);
  ASSERT_TRUE(sched_->Checkpointed(JobId(11), now_).ok());  // checkpoint on SIGTERM
  ASSERT_TRUE(sched_->Stopped(JobId(11), now_).ok());
  EXPECT_EQ(Started(Cycle()), std::vector<int64_t>{1});
  EXPECT_EQ(Phase(11), JobPhase::kPending);
}

// Measured costs price the victims: a job seen to checkpoint when told to
// stop, in 20 s (within the 60 s grace), loses that write and its start-up,
// not the hour since its last checkpoint; a job with a measured 10-minute
// start-up costs that much more to stop.
TEST_F(SchedulerTest, MeasuredCheckpointAndStartUpCostsPriceTheVictims) {
  QueueId q = AddQueue("q");
  for (int i = 0; i < 3; ++i) Submit(Job(10 + i, q, 64));
  Cycle();
  Advance(3600);
  ASSERT_TRUE(sched_->Checkpointed(JobId(11), now_ - Seconds(60)).ok());
  // 11 is the cheapest by the work since its checkpoint (64 x 60 s), until
  // its start-up is measured at 10 minutes; 12 saves on stop in 20 s.
  ASSERT_TRUE(sched_->SetMeasuredCosts(JobId(11), Duration(0), Seconds(600), false).ok());
  ASSERT_TRUE(sched_->SetMeasuredCosts(JobId(12), Seconds(20), Duration(0), true).ok());
  EXPECT_FALSE(sched_->SetMeasuredCosts(JobId(99), Seconds(20), Duration(0), true).ok());
  Submit(Job(1, q, 64, /*priority=*/10));
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].job, JobId(12));
  EXPECT_EQ(pre[0].lost_gpu_seconds, 64 * 20);
  // A write longer than the grace cannot be made at the stop: the hour counts.
  Submit(Job(2, q, 64, /*priority=*/10));
  ASSERT_TRUE(sched_->SetMeasuredCosts(JobId(10), Seconds(120), Duration(0), true).ok());
  Advance(60);
  pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].job, JobId(11));
  EXPECT_EQ(pre[0].lost_gpu_seconds, 64 * (120 + 600));
}

TEST_F(SchedulerTest, StoppedVictimsWaitForTheirPreemptor) {
  QueueId q = AddQueue("q");
  for (int i = 0; i < 6; ++i) Submit(Job(10 + i, q, 32));
  Cycle();
  Advance(3600);
  Submit(Job(1, q, 64, /*priority=*/10));  // needs two victims
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 2u);
  // The first victim stops; the second is still checkpointing. The first
  // does not restart into the GPUs it just freed.
  Advance(10);
  ASSERT_TRUE(sched_->Stopped(pre[0].job, now_).ok());
  EXPECT_TRUE(Started(Cycle()).empty());
  Advance(10);
  ASSERT_TRUE(sched_->Stopped(pre[1].job, now_).ok());
  EXPECT_EQ(Started(Cycle()).front(), 1);
}

TEST_F(SchedulerTest, OverduePreemptedJobsAreTakenAsGone) {
  QueueId q = AddQueue("q");
  Submit(Job(10, q, 192));
  Cycle();
  Advance(3600);
  Submit(Job(1, q, 64, /*priority=*/10));
  ASSERT_EQ(Of<PreemptJob>(Cycle()).size(), 1u);
  Advance(60 + 60 + 1);  // grace (60 s) + stop timeout (60 s) passed, no report
  auto d = Cycle();
  EXPECT_EQ(Of<RequeueJob>(d).size(), 1u);
  EXPECT_EQ(Started(d), std::vector<int64_t>{1});
}

TEST_F(SchedulerTest, NonPreemptibleAndYoungJobsAreNeverVictims) {
  QueueId q = AddQueue("q", /*guarantee=*/192);
  JobSpec pinned = Job(10, q, 128);
  pinned.preemptible = false;
  Submit(pinned);
  Submit(Job(11, q, 64));
  Cycle();
  Advance(100);  // less than the 300 s minimum runtime
  Submit(Job(1, q, 64, 10));
  EXPECT_TRUE(Of<PreemptJob>(Cycle()).empty());
  Advance(300);
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].job, JobId(11));
}

TEST_F(SchedulerTest, OwnerReclaimsLentQuota) {
  QueueId owner = AddQueue("owner", /*guarantee=*/128);
  QueueId borrower = AddQueue("borrower");
  for (int i = 0; i < 3; ++i) Submit(Job(10 + i, borrower, 64));
  Cycle();
  EXPECT_TRUE(sched_->Find(JobId(10))->borrowing);
  Advance(600);
  Submit(Job(1, owner, 64));  // same priority: reclaim, not priority
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].for_job, JobId(1));
}

// Priority across queues takes only borrowed GPUs: a queue is never put
// below its guarantee (it would reclaim them at once, and the two queues
// would preempt each other in turn: the thrash a shared cluster under
// load showed, 7 preemptions per job, in examples/sims/a100-week.yaml).
TEST_F(SchedulerTest, PriorityAcrossQueuesTakesOnlyBorrowedGpus) {
  QueueId a = AddQueue("a", /*guarantee=*/96);
  QueueId b = AddQueue("b", /*guarantee=*/64);
  for (int i = 0; i < 4; ++i) Submit(Job(10 + i, a, 32));      // 128: 32 borrowed
  for (int i = 0; i < 2; ++i) Submit(Job(20 + i, b, 32, 10));  // 64: its guarantee
  Cycle();
  ASSERT_EQ(sched_->queues().used(a), Gpus(128));
  ASSERT_EQ(sched_->queues().Borrowed(a), Gpus(32));
  EXPECT_EQ(sched_->queues().Borrowed(b), Gpus(0));
  Advance(600);
  Submit(Job(1, b, 64, /*priority=*/10));  // would need 64 of a's: it lent 32
  EXPECT_TRUE(Of<PreemptJob>(Cycle()).empty());
  Submit(Job(2, b, 32, /*priority=*/10));  // 32: what a borrowed
  Advance(31);                             // past preemption_retry
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].for_job, JobId(2));
  EXPECT_EQ(sched_->Find(pre[0].job)->spec.queue, a);
}

TEST_F(SchedulerTest, NonPreemptibleJobsDoNotBorrow) {
  QueueId q = AddQueue("q", /*guarantee=*/16);
  JobSpec j = Job(1, q, 32);
  j.preemptible = false;
  Submit(j);
  Cycle();
  EXPECT_TRUE(std::holds_alternative<reason::NoBorrowing>(Reason(1)));
}

TEST_F(SchedulerTest, BackfillRespectsTheReservation) {
  SchedulerOptions opt;
  opt.preemption = false;
  sched_ = std::make_unique<Scheduler>(*topo_, opt);
  QueueId q = AddQueue("q");
  JobSpec running = Job(10, q, 128);
  running.runtime_estimate = Seconds(3600);
  Submit(running);
  Cycle();
  Submit(Job(1, q, 128));  // must wait for job 10
  Advance(1);
  JobSpec short_job = Job(2, q, 32);
  short_job.runtime_estimate = Seconds(600);  // ends before job 10
  JobSpec long_job = Job(3, q, 32);
  long_job.preemptible = false;  // no estimate: would delay job 1
  Submit(short_job);
  Submit(long_job);
  auto started = Started(Cycle());
  EXPECT_EQ(started, std::vector<int64_t>{2});
  const auto* holds = std::get_if<reason::HoldsReservation>(&Reason(1));
  ASSERT_NE(holds, nullptr);
  EXPECT_EQ(holds->at, Seconds(1000 + 3600));
  EXPECT_EQ(sched_->Explain(JobId(1)),
            "pending: next to run: GPUs in top top-0 are reserved for it from t=4600s");
  EXPECT_TRUE(std::holds_alternative<reason::WaitingForReservation>(Reason(3)));
}

// Start or wait: on racks whose uplinks are 4:1 oversubscribed, a 2-node
// gang that fits now only across two racks waits for the rack that frees
// first (its spread would cost far more than the wait), and that rack is
// kept for it; with a shorter maxWait, or links that cost nothing to
// cross, it starts spread at once.
class CompactWaitTest : public SchedulerTest {
 protected:
  CompactWaitTest() {
    ClusterSpec spec = unipool::testing::ThreeTier(192);
    spec.generator->partition_tier.clear();
    spec.tiers[2].oversubscription_milli = 4000;
    topo_ = std::make_unique<Topology>(Topology::Build(spec).value());
    sched_ = std::make_unique<Scheduler>(*topo_, SchedulerOptions{});
    q_ = AddQueue("q");
  }
  // Every node busy with a one-node job that ends in 10 s; then nodes 1
  // (rack 0) and 3 (rack 1) free: 16 GPUs free, in two racks.
  void FillAndFreeTwoRacksHalfway() {
    for (int64_t id = 1; id <= 24; ++id) {
      JobSpec j = Job(id, q_, 8);
      j.runtime_estimate = Seconds(10);
      Submit(j);
    }
    for (const StartJob& st : Of<StartJob>(Cycle())) on_[st.placement.tasks[0].node.value()] = st.job;
    Advance(1);
    ASSERT_TRUE(sched_->Finish(on_[1], now_).ok());
    ASSERT_TRUE(sched_->Finish(on_[3], now_).ok());
  }
  JobSpec Gang(int64_t id) {
    JobSpec g = Job(id, q_, 16);
    g.runtime_estimate = Seconds(3600);
    return g;
  }
  QueueId q_;
  std::map<int32_t, JobId> on_;  // node -> its job
};

TEST_F(CompactWaitTest, AGangWaitsForTheRackThatFreesFirstAndItIsKeptForIt) {
  FillAndFreeTwoRacksHalfway();
  Submit(Gang(100));
  JobSpec small = Job(101, q_, 8);  // a long one-node job behind it
  small.runtime_estimate = Seconds(3600);
  Submit(small);
  auto started = Started(Cycle());
  EXPECT_EQ(started, std::vector<int64_t>{101});
  const auto* wait = std::get_if<reason::WaitingForCompact>(&Reason(100));
  ASSERT_NE(wait, nullptr) << sched_->Explain(JobId(100));
  EXPECT_EQ(wait->at, Seconds(1010));
  EXPECT_EQ(wait->until, Seconds(1001 + 60));
  EXPECT_GT(wait->slowdown, 1.0);  // 4:1 above the rack: the ring runs 4x slower
  EXPECT_EQ(std::string(Scheduler::ReasonCode(Reason(100))), "Topology");
  EXPECT_EQ(Scheduler::EstimatedStart(Reason(100)), Seconds(1010));
  EXPECT_NE(sched_->Explain(JobId(100)).find("waiting for room in rack rack-00 from t=1010s"),
            std::string::npos)
      << sched_->Explain(JobId(100));
  // The small job kept out of rack 0: it took node 3.
  EXPECT_EQ(sched_->Find(JobId(101))->placement.tasks[0].node, NodeId(3));
  Advance(9);
  ASSERT_TRUE(sched_->Finish(on_[0], now_).ok());
  started = Started(Cycle());
  EXPECT_EQ(started, std::vector<int64_t>{100});
  EXPECT_EQ(sched_->Find(JobId(100))->placement.score.span_tier, 1);  // one rack
}

TEST_F(CompactWaitTest, MaxWaitBoundsTheWaitAndAnyStartsAtOnce) {
  FillAndFreeTwoRacksHalfway();
  JobSpec soon = Gang(100);
  soon.compact_max_wait = Seconds(5);  // the rack frees in 9 s: too late
  Submit(soon);
  EXPECT_EQ(Started(Cycle()), std::vector<int64_t>{100});
  EXPECT_EQ(sched_->Find(JobId(100))->placement.score.span_tier, 2);  // across racks
}

TEST_F(SchedulerTest, ASpreadThatCostsNothingStartsAtOnce) {
  // Non-blocking links above the rack: crossing costs only latency.
  QueueId q = AddQueue("q");
  for (int64_t id = 1; id <= 24; ++id) {
    JobSpec j = Job(id, q, 8);
    j.runtime_estimate = Seconds(10);
    Submit(j);
  }
  std::map<int32_t, JobId> on;
  for (const StartJob& st : Of<StartJob>(Cycle())) on[st.placement.tasks[0].node.value()] = st.job;
  Advance(1);
  ASSERT_TRUE(sched_->Finish(on[1], now_).ok());
  ASSERT_TRUE(sched_->Finish(on[3], now_).ok());
  JobSpec g = Job(100, q, 16);
  g.runtime_estimate = Seconds(3600);
  Submit(g);
  EXPECT_EQ(Started(Cycle()), std::vector<int64_t>{100});
}

TEST_F(SchedulerTest, LargeJobDoesNotStarveBehindSmallOnes) {
  QueueId q = AddQueue("q");
  std::mt19937 rng(7);
  int64_t next = 100;
  std::vector<int64_t> running;
  // A steady stream of 8-GPU one-hour jobs keeps the cluster busy.
  for (int i = 0; i < 24; ++i) {
    JobSpec j = Job(next++, q, 8);
    j.runtime_estimate = Seconds(3600);
    Submit(j);
  }
  Cycle();
  JobSpec big = Job(1, q, 192);
  big.runtime_estimate = Seconds(3600);
  Submit(big);
  bool big_started = false;
  for (int step = 0; step < 200 && !big_started; ++step) {
    Advance(600);
    // Every 10 minutes four small jobs end and four more arrive.
    int ended = 0;
    for (int64_t id = 100; id < next && ended < 4; ++id) {
      const JobInfo* info = sched_->Find(JobId(id));
      if (info && info->phase == JobPhase::kRunning) {
        ASSERT_TRUE(sched_->Finish(JobId(id), now_).ok());
        ++ended;
      }
    }
    for (int k = 0; k < 4; ++k) {
      JobSpec j = Job(next++, q, 8);
      j.runtime_estimate = Seconds(3600);
      j.preemptible = false;
      Submit(j);
    }
    for (const StartJob& s : Of<StartJob>(Cycle())) big_started |= s.job == JobId(1);
  }
  EXPECT_TRUE(big_started);
}

TEST_F(SchedulerTest, NodeFailureRequeuesFromCheckpointAndExcludesTheNode) {
  auto start = StartRestartable();
  ASSERT_EQ(start.size(), 1u);
  const NodeId bad = start[0].placement.tasks[0].node;
  Advance(1000);
  ASSERT_TRUE(sched_->Checkpointed(JobId(1), now_ - Seconds(100)).ok());
  ASSERT_TRUE(sched_->SetNodeState(bad, NodeState::kDown, now_).ok());
  auto d = Cycle();
  auto rq = Of<RequeueJob>(d);
  ASSERT_EQ(rq.size(), 1u);
  EXPECT_EQ(rq[0].lost_gpu_seconds, 16 * (100 + 60));
  auto restart = Of<StartJob>(d);
  ASSERT_EQ(restart.size(), 1u);
  for (const Task& t : restart[0].placement.tasks) EXPECT_NE(t.node, bad);
  EXPECT_EQ(sched_->Find(JobId(1))->restarts, 1);
}

// restart_cost is every run's start-up (reloading the checkpoint). A stop
// loses the work since the last checkpoint and the restart that follows;
// the start-up of a run was counted with the stop before it.
TEST_F(SchedulerTest, LostWorkCountsEachRestartOnceAndNeverExceedsTheTimeHeld) {
  auto start = StartRestartable();
  ASSERT_EQ(start.size(), 1u);
  int64_t held = 0, lost = 0;
  // No checkpoints; the second run stops 30 s into its start-up.
  const std::vector<int64_t> runs{1000, 30, 500};
  const std::vector<int64_t> each{16 * 1000, 16 * 30, 16 * 500};
  for (size_t r = 0; r < runs.size(); ++r) {
    Advance(runs[r]);
    held += 16 * runs[r];
    ASSERT_TRUE(
        sched_->SetNodeState(start[0].placement.tasks[0].node, NodeState::kDown, now_).ok());
    auto d = Cycle();
    auto rq = Of<RequeueJob>(d);
    ASSERT_EQ(rq.size(), 1u);
    EXPECT_EQ(rq[0].lost_gpu_seconds, each[r]) << "run " << r + 1;
    lost += rq[0].lost_gpu_seconds;
    start = Of<StartJob>(d);
    ASSERT_EQ(start.size(), 1u);
  }
  EXPECT_EQ(lost, held);  // all of it: nothing was ever checkpointed
}

TEST_F(SchedulerTest, RepeatedFailuresMakeANodeFlaky) {
  AddQueue("q");
  const NodeId n(5);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(sched_->SetNodeState(n, NodeState::kDown, now_).ok());
    ASSERT_TRUE(sched_->SetNodeState(n, NodeState::kUp, now_).ok());
    Advance(60);
  }
  EXPECT_EQ(sched_->free_gpus(), Gpus(184));  // node 5 stays out as flaky
  auto cordons = Of<CordonNode>(Cycle());
  ASSERT_EQ(cordons.size(), 1u);
  EXPECT_EQ(cordons[0].node, n);
  ASSERT_TRUE(sched_->SetNodeState(n, NodeState::kUp, now_).ok());  // operator clears it
  EXPECT_EQ(sched_->free_gpus(), Gpus(192));
}

TEST_F(SchedulerTest, DrainPreemptsWithGraceAndCordonKeepsJobs) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 8));
  Submit(Job(2, q, 8));
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_TRUE(
      sched_->SetNodeState(starts[0].placement.tasks[0].node, NodeState::kCordoned, now_).ok());
  ASSERT_TRUE(
      sched_->SetNodeState(starts[1].placement.tasks[0].node, NodeState::kDrained, now_).ok());
  auto pre = Of<PreemptJob>(Cycle());
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].job, starts[1].job);
  EXPECT_EQ(Phase(starts[0].job.value()), JobPhase::kRunning);
}

TEST(SchedulerSpareTest, HotSpareReplacesAFailedNodeInPlace) {
  // Two racks of three 8-GPU nodes; the last node of each rack is a spare.
  ClusterSpec spec = unipool::testing::ExplicitTwoRacks();
  spec.nodes.clear();
  for (const char* rack : {"r0", "r1"}) {
    for (int i = 0; i < 3; ++i) {
      NodeSpec n;
      n.name = std::string(rack) + "-n" + std::to_string(i);
      n.gpus = 8;
      n.gpu_model = "H100-SXM";
      n.groups = {"", rack, ""};
      if (i == 2) n.labels = {{"unipool.io/spare", "true"}};
      spec.nodes.push_back(n);
    }
  }
  Topology topo = Topology::Build(spec).value();
  Scheduler s(topo);
  QueueSpec q;
  q.name = "q";
  JobSpec j;
  j.id = JobId(1);
  j.queue = s.queues().Add(q).value();
  j.gpus = Gpus(16);
  EXPECT_EQ(s.free_gpus(), Gpus(32));  // spares are not offered
  ASSERT_TRUE(s.Submit(j, Seconds(0)).ok());
  auto start = s.Schedule(Seconds(0));
  ASSERT_EQ(start.size(), 1u);
  const NodeId failed = std::get<StartJob>(start[0]).placement.tasks[1].node;
  ASSERT_TRUE(s.SetNodeState(failed, NodeState::kDown, Seconds(100)).ok());
  auto d = s.Schedule(Seconds(100));
  ASSERT_EQ(d.size(), 2u);  // requeue, then restart on the spare
  EXPECT_TRUE(std::holds_alternative<RequeueJob>(d[0]));
  const Placement& p = std::get<StartJob>(d[1]).placement;
  EXPECT_EQ(topo.node_name(p.tasks[0].node), "r0-n0");
  EXPECT_EQ(topo.node_name(p.tasks[1].node), "r0-n2");  // the rack's spare
  EXPECT_EQ(s.Find(JobId(1))->restarts, 1);
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  ASSERT_TRUE(s.SetNodeState(failed, NodeState::kUp, Seconds(200)).ok());
  EXPECT_EQ(s.free_gpus(), Gpus(16));  // the repaired node is the new spare
}

// A GB200 NVL72 rack run as one node of 72 GPUs (more than a 64-bit mask
// holds): gangs of 72 take a node each, and a task of 40 leaves 32 beside it.
TEST(SchedulerWideNodeTest, SeventyTwoGpuNodesHoldGangsOfSeventyTwo) {
  ClusterSpec spec = unipool::testing::ExplicitTwoRacks();
  spec.nodes.clear();
  for (const char* name : {"nvl72-0", "nvl72-1"}) {
    NodeSpec n;
    n.name = name;
    n.gpus = 72;
    n.gpu_model = "B200";
    n.groups = {"", "r0", ""};
    spec.nodes.push_back(n);
  }
  Topology topo = Topology::Build(spec).value();
  EXPECT_EQ(CountGpus(AllGpus(72)), 72);
  EXPECT_EQ(CountGpus(AllGpus(kMaxGpusPerNode)), kMaxGpusPerNode);
  Scheduler s(topo);
  QueueSpec q;
  q.name = "q";
  const QueueId queue = s.queues().Add(q).value();
  const auto job = [&](int64_t id, int64_t gpus) {
    JobSpec j;
    j.id = JobId(id);
    j.queue = queue;
    j.gpus = Gpus(gpus);
    return j;
  };
  ASSERT_TRUE(s.Submit(job(1, 72), Seconds(0)).ok());
  ASSERT_TRUE(s.Submit(job(2, 40), Seconds(0)).ok());
  ASSERT_TRUE(s.Submit(job(3, 32), Seconds(0)).ok());
  std::vector<Placement> placed;
  for (const Decision& d : s.Schedule(Seconds(0))) {
    if (auto* st = std::get_if<StartJob>(&d)) placed.push_back(st->placement);
  }
  ASSERT_EQ(placed.size(), 3u);
  ASSERT_EQ(placed[0].tasks.size(), 1u);
  EXPECT_EQ(placed[0].tasks[0].gpus, AllGpus(72));
  EXPECT_EQ(placed[1].tasks.size(), 1u);
  EXPECT_EQ(placed[2].tasks.size(), 1u);
  EXPECT_EQ(placed[1].tasks[0].node, placed[2].tasks[0].node);
  EXPECT_EQ(placed[1].tasks[0].gpus | placed[2].tasks[0].gpus, AllGpus(72));
  EXPECT_EQ(s.free_gpus(), Gpus(0));
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants().message();
  // More than a mask holds is refused when the cluster is read.
  spec.nodes[0].gpus = kMaxGpusPerNode + 1;
  EXPECT_FALSE(Topology::Build(spec).ok());
}

class PartitionedTest : public SchedulerTest {
 protected:
  PartitionedTest() : SchedulerTest(/*partitions=*/true) {}
};

TEST_F(PartitionedTest, GlobalLevelPrefersDataLocalityAndBestFit) {
  QueueId q = AddQueue("q");
  Submit(Job(10, q, 32));  // lands in pod-0
  Cycle();
  JobSpec local = Job(1, q, 16);
  local.preferred_partition = 2;
  Submit(local);
  Submit(Job(2, q, 16));
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0].partition, 2);
  EXPECT_EQ(starts[1].partition, 0);  // the fullest pod that fits
}

TEST_F(PartitionedTest, OnlySpanningJobsCrossPartitions) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 128));
  Cycle();
  EXPECT_TRUE(std::holds_alternative<reason::Infeasible>(Reason(1)));
  JobSpec span = Job(2, q, 128);
  span.span_partitions = true;
  Submit(span);
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].partition, -1);
}

// A driver that restarts rebuilds the scheduler from its records: running
// jobs come back where they were, and the next cycle changes nothing.
TEST_F(SchedulerTest, RestoreTakesBackRunningJobs) {
  const QueueId q = AddQueue("a");
  Submit(Job(1, q, 16));
  Submit(Job(2, q, 8));
  const auto started = Of<StartJob>(Cycle());
  ASSERT_EQ(started.size(), 2u);

  Scheduler fresh(*topo_);
  QueueSpec qs;
  qs.name = "a";
  ASSERT_TRUE(fresh.queues().Add(qs).ok());
  for (const StartJob& s : started) {
    ASSERT_TRUE(fresh
                    .Restore(Job(s.job.value(), q, s.placement.gpus().value()), s.placement, now_,
                             now_, now_, 0)
                    .ok());
  }
  EXPECT_EQ(fresh.allocated_gpus().value(), 24);
  EXPECT_EQ(fresh.running_count(), 2);
  EXPECT_TRUE(fresh.Schedule(now_).empty());
  EXPECT_TRUE(fresh.CheckInvariants().ok());
  // The same GPUs twice are refused.
  Status twice = fresh.Restore(Job(3, q, 8), started[1].placement, now_, now_, now_, 0);
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.message().find("not free"), std::string::npos);
}

}  // namespace
}  // namespace unipool::sched
