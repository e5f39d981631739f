// The scheduler tests' fixture (scheduler_test.cc, scheduler_elastic_test.cc):
// a small three-tier cluster, queues and jobs made in a line, and the
// decisions of a cycle by type.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"
#include "core/topology/test_clusters.h"

namespace unipool::sched {

// 24 nodes x 8 GPUs = 192 GPUs; racks of 2 nodes, pods of 4 racks (64 GPUs).
class SchedulerTest : public ::testing::Test {
 protected:
  explicit SchedulerTest(bool partitions = false, SchedulerOptions opt = {}) {
    ClusterSpec spec = unipool::testing::ThreeTier(192);
    if (!partitions) spec.generator->partition_tier.clear();
    topo_ = std::make_unique<Topology>(Topology::Build(spec).value());
    sched_ = std::make_unique<Scheduler>(*topo_, opt);
  }

  QueueId AddQueue(std::string name, int64_t guarantee = 0, int64_t limit = 0,
                   QueuePolicy policy = QueuePolicy::kBestEffort, std::string parent = "") {
    QueueSpec q;
    q.name = std::move(name);
    q.parent = std::move(parent);
    q.guarantee = Gpus(guarantee);
    q.limit = Gpus(limit);
    q.policy = policy;
    q.grace = Seconds(60);
    return sched_->queues().Add(q).value();
  }

  JobSpec Job(int64_t id, QueueId q, int64_t gpus, int32_t priority = 0) {
    JobSpec j;
    j.id = JobId(id);
    j.queue = q;
    j.gpus = Gpus(gpus);
    j.priority = priority;
    return j;
  }

  void Submit(const JobSpec& j) { ASSERT_TRUE(sched_->Submit(j, now_).ok()); }

  std::vector<Decision> Cycle() {
    std::vector<Decision> d = sched_->Schedule(now_);
    EXPECT_TRUE(sched_->CheckInvariants().ok()) << sched_->CheckInvariants().message();
    return d;
  }

  template <class T>
  static std::vector<T> Of(const std::vector<Decision>& ds) {
    std::vector<T> out;
    for (const Decision& d : ds) {
      if (auto* x = std::get_if<T>(&d)) out.push_back(*x);
    }
    return out;
  }
  static std::vector<int64_t> Started(const std::vector<Decision>& ds) {
    std::vector<int64_t> ids;
    for (const StartJob& s : Of<StartJob>(ds)) ids.push_back(s.job.value());
    return ids;
  }
  JobPhase Phase(int64_t id) { return sched_->Find(JobId(id))->phase; }
  const PendingReason& Reason(int64_t id) { return sched_->Find(JobId(id))->reason; }
  void Advance(int64_t seconds) { now_ += Seconds(seconds); }
  // An elastic continue job of `gpus`, down to `min`, in steps of a node.
  JobSpec ElasticContinue(int64_t id, QueueId q, int64_t gpus, int64_t min) {
    JobSpec j = Job(id, q, gpus);
    j.min_gpus = Gpus(min);
    j.step = Gpus(8);
    j.continue_on_resize = true;
    return j;
  }
  // Job 1 in a new queue: 16 GPUs, a restart (start-up) cost of 60 s,
  // started by one cycle; what the cycle started.
  std::vector<StartJob> StartRestartable() {
    JobSpec j = Job(1, AddQueue("q"), 16);
    j.restart_cost = Seconds(60);
    Submit(j);
    return Of<StartJob>(Cycle());
  }

  std::unique_ptr<Topology> topo_;
  std::unique_ptr<Scheduler> sched_;
  Time now_ = Seconds(1000);
};

}  // namespace unipool::sched
