// Scheduler properties: long random event sequences keep the invariants
// after every cycle, and the same seed gives the same decisions.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"
#include "core/topology/test_clusters.h"

namespace unipool::sched {
namespace {

std::string RunRandom(uint32_t seed, int steps) {
  Topology topo = Topology::Build(unipool::testing::ThreeTier(192)).value();
  Scheduler s(topo);
  QueueSpec qa{"a", "", Gpus(64), Gpus(160), 1};
  QueueSpec qb{"b", "", Gpus(0), Gpus(0), 2};
  QueueSpec qc{"c", "", Gpus(32), Gpus(0), 1, QueuePolicy::kFifo};
  const QueueId queues[] = {s.queues().Add(qa).value(), s.queues().Add(qb).value(),
                            s.queues().Add(qc).value()};
  std::mt19937 rng(seed);
  std::string log;
  Time now = Seconds(0);
  int64_t next = 1;
  std::vector<JobId> live;
  std::set<int64_t> pinned;  // non-preemptible
  for (int step = 0; step < steps; ++step) {
    now += Seconds(rng() % 400);
    const int action = rng() % 10;
    if (action < 5) {
      JobSpec j;
      j.id = JobId(next++);
      j.queue = queues[rng() % 3];
      const int64_t sizes[] = {1, 2, 4, 8, 16, 32, 64};
      j.gpus = Gpus(sizes[rng() % 7]);
      j.priority = static_cast<int32_t>(rng() % 3);
      j.preemptible = rng() % 4 != 0;
      if (rng() % 3 == 0) j.runtime_estimate = Seconds(600 + rng() % 3600);
      if (j.gpus.value() >= 16 && rng() % 4 == 0) {
        j.min_gpus = Gpus(8);
        j.step = Gpus(8);
      }
      if (rng() % 5 == 0) j.required_tier = 2;
      if (!j.preemptible) pinned.insert(j.id.value());
      if (s.Submit(j, now).ok()) live.push_back(j.id);
    } else if (action < 7 && !live.empty()) {
      const JobId id = live[rng() % live.size()];
      const JobInfo* info = s.Find(id);
      if (info->phase == JobPhase::kPreempting) {
        (void)s.Stopped(id, now);
      } else if (info->phase == JobPhase::kRunning) {
        (void)s.Finish(id, now);
        live.erase(std::find(live.begin(), live.end(), id));
      } else {
        (void)s.Checkpointed(id, now);
      }
    } else if (action == 7) {
      const NodeId n(static_cast<int32_t>(rng() % 24));
      const NodeState st[] = {NodeState::kDown, NodeState::kUp, NodeState::kCordoned,
                              NodeState::kDrained, NodeState::kUp};
      (void)s.SetNodeState(n, st[rng() % 5], now);
    } else if (action == 8 && !live.empty()) {
      const JobId id = live[rng() % live.size()];
      (void)s.Cancel(id, now);
      live.erase(std::find(live.begin(), live.end(), id));
    }
    for (const Decision& d : s.Schedule(now)) {
      if (auto* st = std::get_if<StartJob>(&d)) {
        log += "S" + std::to_string(st->job.value()) + "@" +
               std::to_string(st->placement.tasks[0].node.value()) + " ";
      } else if (auto* p = std::get_if<PreemptJob>(&d)) {
        EXPECT_FALSE(pinned.count(p->job.value())) << "preempted a non-preemptible job";
        log += "P" + std::to_string(p->job.value()) + " ";
      } else if (auto* r = std::get_if<RequeueJob>(&d)) {
        log += "R" + std::to_string(r->job.value()) + " ";
      } else if (auto* z = std::get_if<ResizeJob>(&d)) {
        log += "Z" + std::to_string(z->job.value()) + " ";
      }
    }
    Status inv = s.CheckInvariants();
    EXPECT_TRUE(inv.ok()) << "seed " << seed << " step " << step << ": " << inv.message();
    if (!inv.ok()) break;
  }
  return log;
}

TEST(SchedulerPropertyTest, InvariantsHoldUnderRandomEvents) {
  for (uint32_t seed = 1; seed <= 20; ++seed) RunRandom(seed, 400);
}

TEST(SchedulerPropertyTest, SameEventsSameDecisions) {
  const std::string a = RunRandom(42, 300);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, RunRandom(42, 300));
}

}  // namespace
}  // namespace unipool::sched
