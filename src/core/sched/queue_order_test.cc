// Queue orders (QueueOrder): which pending job of a queue goes next among
// those of the same priority. Every job here asks for the whole cluster, so
// they run one at a time and the start order is the queue's order.
#include <gtest/gtest.h>

#include <vector>

#include "core/sched/scheduler.h"
#include "core/topology/test_clusters.h"

namespace unipool::sched {
namespace {

constexpr int64_t kAll = 192;  // GPUs in the test cluster

class QueueOrderTest : public ::testing::Test {
 protected:
  QueueOrderTest() : topo_(Cluster()), sched_(topo_) {}

  static Topology Cluster() {  // one partition
    ClusterSpec spec = unipool::testing::ThreeTier(kAll);
    spec.generator->partition_tier.clear();
    return Topology::Build(spec).value();
  }

  QueueId AddQueue(QueueOrder order) {
    QueueSpec q;
    q.name = "q";
    q.order = order;
    return sched_.queues().Add(q).value();
  }

  // A whole-cluster job with a runtime estimate in hours (0: none).
  void Submit(int64_t id, QueueId q, int64_t hours, int32_t priority = 0,
              int64_t attained_gpu_seconds = 0) {
    JobSpec j;
    j.id = JobId(id);
    j.queue = q;
    j.gpus = Gpus(kAll);
    j.priority = priority;
    j.runtime_estimate = Seconds(hours * 3600);
    ASSERT_TRUE(sched_.Submit(j, now_, attained_gpu_seconds).ok());
    now_ += Seconds(1);
  }

  // The one job the next cycle starts (0: none).
  int64_t Next() {
    std::vector<Decision> ds = sched_.Schedule(now_);
    EXPECT_TRUE(sched_.CheckInvariants().ok()) << sched_.CheckInvariants().message();
    int64_t started = 0;
    for (const Decision& d : ds) {
      if (const auto* s = std::get_if<StartJob>(&d)) {
        EXPECT_EQ(started, 0) << "two whole-cluster jobs started";
        started = s->job.value();
      }
    }
    return started;
  }

  // Runs every pending job to its end, one at a time: their start order.
  std::vector<int64_t> Drain() {
    std::vector<int64_t> order;
    for (int64_t id = Next(); id != 0; id = Next()) {
      order.push_back(id);
      now_ += Seconds(10);
      EXPECT_TRUE(sched_.Finish(JobId(id), now_).ok());
    }
    return order;
  }

  Topology topo_;
  Scheduler sched_;
  Time now_ = Seconds(1000);
};

TEST_F(QueueOrderTest, SubmissionOrderIsFirstComeFirstServed) {
  const QueueId q = AddQueue(QueueOrder::kSubmission);
  Submit(1, q, 3);
  Submit(2, q, 1);
  Submit(3, q, 0);
  Submit(4, q, 2);
  EXPECT_EQ(Drain(), (std::vector<int64_t>{1, 2, 3, 4}));
}

// Shortest estimate first; a job without one goes last, and a higher
// priority still goes before any estimate.
TEST_F(QueueOrderTest, ShortestJobFirst) {
  const QueueId q = AddQueue(QueueOrder::kShortestFirst);
  Submit(1, q, 3);
  Submit(2, q, 0);
  Submit(3, q, 1);
  Submit(4, q, 2);
  Submit(5, q, 0, /*priority=*/1);
  Submit(6, q, 1);
  EXPECT_EQ(Drain(), (std::vector<int64_t>{5, 3, 6, 4, 1, 2}));
}

// A job that ran 100 s on the whole cluster and failed has attained 19,200
// GPU-seconds: the new job goes first, and so does one a driver queues
// again with less service than it.
TEST_F(QueueOrderTest, LeastAttainedServiceFirst) {
  const QueueId q = AddQueue(QueueOrder::kLeastAttained);
  Submit(1, q, 1);
  ASSERT_EQ(Next(), 1);
  now_ += Seconds(100);
  ASSERT_TRUE(sched_.TaskFailed(JobId(1), now_).ok());
  EXPECT_EQ(sched_.Find(JobId(1))->attained_gpu_seconds, kAll * 100);
  Submit(2, q, 1);
  Submit(3, q, 1, 0, /*attained_gpu_seconds=*/kAll * 50);
  Submit(4, q, 1, 0, /*attained_gpu_seconds=*/kAll * 200);
  EXPECT_EQ(Drain(), (std::vector<int64_t>{2, 3, 1, 4}));
}

// Changing a queue's order re-sorts the jobs already waiting in it at the
// next cycle.
TEST_F(QueueOrderTest, AChangedOrderReSortsTheWaitingJobs) {
  const QueueId q = AddQueue(QueueOrder::kSubmission);
  Submit(1, q, 1);
  ASSERT_EQ(Next(), 1);
  Submit(2, q, 3);
  Submit(3, q, 2);
  Submit(4, q, 1);
  QueueSpec spec = sched_.queues().spec(q);
  spec.order = QueueOrder::kShortestFirst;
  ASSERT_TRUE(sched_.queues().Update(q, spec).ok());
  now_ += Seconds(10);
  ASSERT_TRUE(sched_.Finish(JobId(1), now_).ok());
  EXPECT_EQ(Drain(), (std::vector<int64_t>{4, 3, 2}));
}

TEST(QueueOrderNames, ReadBackAndRefuseOthers) {
  for (QueueOrder o :
       {QueueOrder::kSubmission, QueueOrder::kShortestFirst, QueueOrder::kLeastAttained}) {
    QueueOrder read = QueueOrder::kSubmission;
    EXPECT_TRUE(ParseQueueOrder(QueueOrderName(o), &read));
    EXPECT_EQ(read, o);
  }
  QueueOrder read = QueueOrder::kSubmission;
  EXPECT_FALSE(ParseQueueOrder("SJF", &read));
  EXPECT_FALSE(ParseQueueOrder("", &read));
}

}  // namespace
}  // namespace unipool::sched
