// Scheduler stories of elastic jobs: shrinking to fit, growing into idle
// GPUs, and elastic continue (M13): going on without a lost or slow node.
#include <gtest/gtest.h>

#include <set>

#include "core/sched/scheduler_test_util.h"

namespace unipool::sched {
namespace {

TEST_F(SchedulerTest, ElasticJobsShrinkToFitAndGrowIntoIdleGpus) {
  QueueId q = AddQueue("q");
  Submit(Job(10, q, 128));
  Cycle();
  JobSpec e = Job(1, q, 128);
  e.min_gpus = Gpus(32);
  e.step = Gpus(16);
  Submit(e);
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].placement.gpus(), Gpus(64));  // the most that fits
  ASSERT_TRUE(sched_->Finish(JobId(10), now_).ok());
  // Half the cluster frees up: the job grows by as many steps as fit.
  auto resizes = Of<ResizeJob>(Cycle());
  ASSERT_EQ(resizes.size(), 1u);
  EXPECT_EQ(resizes[0].from, Gpus(64));
  EXPECT_EQ(resizes[0].placement.gpus(), Gpus(128));
  EXPECT_EQ(sched_->Find(JobId(1))->allocated(), Gpus(128));
  EXPECT_TRUE(Of<ResizeJob>(Cycle()).empty());  // at its maximum
}

TEST_F(SchedulerTest, ElasticJobsShrinkBeforeAnyoneIsPreempted) {
  QueueId q = AddQueue("q");
  JobSpec e = Job(1, q, 128);
  e.min_gpus = Gpus(32);
  e.step = Gpus(16);
  Submit(e);
  Submit(Job(2, q, 64));
  Cycle();
  Advance(600);
  Submit(Job(3, q, 48, /*priority=*/5));
  auto d = Cycle();
  EXPECT_TRUE(Of<PreemptJob>(d).empty());
  auto resizes = Of<ResizeJob>(d);
  ASSERT_EQ(resizes.size(), 1u);
  EXPECT_EQ(resizes[0].job, JobId(1));
  EXPECT_EQ(resizes[0].placement.gpus(), Gpus(80));  // gave back three steps
  EXPECT_EQ(Started(d), std::vector<int64_t>{3});
  EXPECT_EQ(sched_->Find(JobId(2))->phase, JobPhase::kRunning);
}

// Elastic continue (M13): a lost node shrinks the job to its survivors in
// place, with no work lost and no requeue; the node's return grows it back.
TEST_F(SchedulerTest, ElasticContinueJobsGoOnWithoutALostNodeAndGrowBack) {
  QueueId q = AddQueue("q");
  Submit(ElasticContinue(1, q, 24, 8));
  Submit(Job(2, q, 192 - 24));  // the rest of the cluster: no idle GPUs
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(starts[0].job, JobId(1));
  ASSERT_EQ(starts[0].placement.tasks.size(), 3u);
  const NodeId lost = starts[0].placement.tasks[1].node;
  Advance(600);
  ASSERT_TRUE(sched_->SetNodeState(lost, NodeState::kDown, now_).ok());
  auto d = Cycle();
  EXPECT_TRUE(Of<RequeueJob>(d).empty());
  auto shrunk = Of<ResizeJob>(d);
  ASSERT_EQ(shrunk.size(), 1u);
  EXPECT_TRUE(shrunk[0].in_place);
  EXPECT_EQ(shrunk[0].lost_node, lost);
  EXPECT_EQ(shrunk[0].from, Gpus(24));
  EXPECT_EQ(shrunk[0].placement.gpus(), Gpus(16));
  for (const Task& t : shrunk[0].placement.tasks) EXPECT_NE(t.node, lost);
  const JobInfo* job = sched_->Find(JobId(1));
  EXPECT_EQ(job->phase, JobPhase::kRunning);
  EXPECT_EQ(job->restarts, 0);
  EXPECT_EQ(job->lost_gpu_seconds, 0);
  EXPECT_TRUE(sched_->JobsOn(lost).empty());
  EXPECT_TRUE(Of<ResizeJob>(Cycle()).empty());  // nowhere to grow
  Advance(600);
  ASSERT_TRUE(sched_->SetNodeState(lost, NodeState::kUp, now_).ok());
  auto grown = Of<ResizeJob>(Cycle());
  ASSERT_EQ(grown.size(), 1u);
  EXPECT_TRUE(grown[0].in_place);
  EXPECT_EQ(grown[0].placement.gpus(), Gpus(24));
  EXPECT_EQ(grown[0].placement.tasks[1].node, lost);
  EXPECT_EQ(sched_->Find(JobId(1))->restarts, 0);
}

TEST_F(SchedulerTest, ElasticContinueJobsBelowTheirMinimumRestartAsAnyJob) {
  QueueId q = AddQueue("q");
  Submit(ElasticContinue(1, q, 16, 16));
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 1u);
  Advance(600);
  ASSERT_TRUE(sched_->SetNodeState(starts[0].placement.tasks[0].node, NodeState::kDown, now_).ok());
  auto d = Cycle();
  EXPECT_EQ(Of<RequeueJob>(d).size(), 1u);
  EXPECT_TRUE(Of<ResizeJob>(d).empty());
  EXPECT_EQ(sched_->Find(JobId(1))->restarts, 1);
}

// onStraggler: replace on an elastic continue job swaps the node: it drops
// the node in place and grows onto another (the caller cordoned it).
TEST_F(SchedulerTest, ReplaceSwapsTheNodeOfAnElasticContinueJobAndRequeuesOthers) {
  QueueId q = AddQueue("q");
  Submit(ElasticContinue(1, q, 24, 8));
  JobSpec fixed = Job(2, q, 16);
  Submit(fixed);
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 2u);
  Advance(600);
  const NodeId slow = starts[0].placement.tasks[0].node;
  ASSERT_TRUE(sched_->SetNodeState(slow, NodeState::kCordoned, now_).ok());
  ASSERT_TRUE(sched_->Replace(JobId(1), slow, "slow", now_).ok());
  auto d = Cycle();
  EXPECT_TRUE(Of<RequeueJob>(d).empty());
  auto resizes = Of<ResizeJob>(d);
  ASSERT_EQ(resizes.size(), 2u);  // off the node, then onto another
  EXPECT_EQ(resizes[0].placement.gpus(), Gpus(16));
  EXPECT_EQ(resizes[1].placement.gpus(), Gpus(24));
  for (const Task& t : resizes[1].placement.tasks) EXPECT_NE(t.node, slow);
  EXPECT_EQ(sched_->Find(JobId(1))->restarts, 0);
  // A fixed-size job leaves the node by a restart from its checkpoint.
  const NodeId other = starts[1].placement.tasks[0].node;
  ASSERT_TRUE(sched_->SetNodeState(other, NodeState::kCordoned, now_).ok());
  ASSERT_TRUE(sched_->Replace(JobId(2), other, "slow", now_).ok());
  auto rq = Of<RequeueJob>(Cycle());
  ASSERT_EQ(rq.size(), 1u);
  EXPECT_EQ(rq[0].why, "slow");
  EXPECT_EQ(sched_->Find(JobId(2))->restarts, 1);
  EXPECT_EQ(sched_->Replace(JobId(2), slow, "slow", now_).code(), StatusCode::kFailedPrecondition);
}

// Before cordoning a straggler's node the caller asks whether the job
// fits without it: its GPUs elsewhere and the free ones off the node.
TEST_F(SchedulerTest, HasRoomWithoutCountsTheJobsOtherGpusAndTheFreeOnesOffTheNode) {
  QueueId q = AddQueue("q");
  Submit(Job(1, q, 16));
  Submit(ElasticContinue(2, q, 16, 8));
  Submit(Job(3, q, 192 - 32 - 8));  // one node left free
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 3u);
  const NodeId slow = starts[0].placement.tasks[0].node;
  EXPECT_TRUE(sched_->HasRoomWithout(JobId(1), slow));  // 8 held elsewhere + 8 free
  Submit(Job(4, q, 8));
  ASSERT_EQ(Of<StartJob>(Cycle()).size(), 1u);  // none free now
  EXPECT_FALSE(sched_->HasRoomWithout(JobId(1), slow));
  // An elastic job fits at its minimum on the node it keeps.
  EXPECT_TRUE(sched_->HasRoomWithout(JobId(2), starts[1].placement.tasks[0].node));
  EXPECT_FALSE(sched_->HasRoomWithout(JobId(99), slow));
}

// A job of a node per task (nodes: {min: 2, max: 3} at 4 GPUs each) grows
// back onto a node of its own, never beside a task it already runs; and
// only where such a node has room.
TEST_F(SchedulerTest, ElasticJobsOfANodePerTaskGrowOntoNodesOfTheirOwn) {
  QueueId q = AddQueue("q");
  JobSpec j = ElasticContinue(1, q, 12, 8);
  j.task_gpus = 4;
  j.max_tasks_per_node = 1;
  j.step = Gpus(4);
  Submit(j);
  Submit(Job(2, q, 192 - 24));  // 4 GPUs left free beside each of job 1's nodes
  auto starts = Of<StartJob>(Cycle());
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_EQ(starts[0].placement.tasks.size(), 3u);
  const NodeId lost = starts[0].placement.tasks[2].node;
  Advance(600);
  ASSERT_TRUE(sched_->SetNodeState(lost, NodeState::kDown, now_).ok());
  auto shrunk = Of<ResizeJob>(Cycle());
  ASSERT_EQ(shrunk.size(), 1u);
  EXPECT_EQ(shrunk[0].placement.gpus(), Gpus(8));
  // Free GPUs sit only beside its own tasks: it does not grow there.
  EXPECT_TRUE(Of<ResizeJob>(Cycle()).empty());
  ASSERT_TRUE(sched_->Finish(JobId(2), now_).ok());
  auto grown = Of<ResizeJob>(Cycle());
  ASSERT_EQ(grown.size(), 1u);
  ASSERT_EQ(grown[0].placement.tasks.size(), 3u);
  EXPECT_EQ(grown[0].placement.gpus(), Gpus(12));
  std::set<int32_t> nodes;
  for (const Task& t : grown[0].placement.tasks) nodes.insert(t.node.value());
  EXPECT_EQ(nodes.size(), 3u) << "a node per task";
}

}  // namespace
}  // namespace unipool::sched
