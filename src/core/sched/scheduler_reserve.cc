// The plan: a reservation for the first job that cannot start, from running
// jobs' runtime estimates; later jobs backfill only around it.
#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/sched/scheduler.h"
#include "core/sched/scheduler_internal.h"

namespace unipool::sched {

// ---- Reservation (plan) ----------------------------------------------------

// The earliest time the job fits, from running jobs' estimated ends: walk
// the jobs in end order, adding the GPUs each frees to its groups' counts,
// until one group the job may use (at a tier it may span) has the GPUs it
// needs; the lowest such tier wins. Counting, not placing: O(tasks of the
// jobs walked), no change to the pools. Jobs with no estimate never end in
// this plan.
void Scheduler::Reserve(JobInfo& job, CycleState& cs) {
  cs.reservation_active = true;
  if (reservation_ && reservation_->holder == job.spec.id &&
      cs.now - reservation_->computed < options_.reservation_refresh) {
    if (reservation_->at.value() >= 0) {
      job.reason =
          reason::HoldsReservation{reservation_->at, reservation_->tier, reservation_->group};
    }
    return;
  }
  stats_.reservations++;
  std::vector<std::pair<Time, JobId>> ends;
  for (JobId id : running_) {
    const JobInfo& r = jobs_.at(id);
    if (r.spec.runtime_estimate.value() <= 0) continue;
    ends.emplace_back(std::max(cs.now, r.started + r.spec.runtime_estimate), id);
  }
  std::sort(ends.begin(), ends.end());
  Reservation res{job.spec.id, Time(-1), -1, GroupId(), cs.now};
  const JobSpec& s = job.spec;
  const int64_t need = (s.min_gpus.value() > 0 ? s.min_gpus : s.gpus).value();
  const int max_tier = s.required_tier >= 0 ? s.required_tier : topo_->top_tier();
  const bool any_partition = partitions_.empty() || s.span_partitions;
  // May the job use group g of tier t as one block?
  auto usable_group = [&](int t, int32_t g) {
    if (any_partition) return true;
    const int32_t gp = group_partition_[t][g];
    return gp >= 0 && (s.partition < 0 || gp == s.partition);
  };
  auto free_in = [&](int t, int32_t g) {
    const int32_t gp = group_partition_[t][g];
    return PoolFor(any_partition ? -1 : gp).Free(t, GroupId(g));
  };
  std::vector<std::unordered_map<int32_t, int64_t>> freed(max_tier + 1);
  // Partitions as blocks, for jobs that may not span them.
  std::vector<int64_t> freed_partition(partitions_.size(), 0);
  for (size_t i = 0; i < ends.size() && res.at.value() < 0; ++i) {
    for (const Task& t : jobs_.at(ends[i].second).placement.tasks) {
      if (!global_.usable(t.node)) continue;
      const int64_t gpus = CountGpus(t.gpus);
      for (int tier = 0; tier <= max_tier; ++tier) {
        const int32_t g = topo_->group_of(t.node, tier).value();
        if (!usable_group(tier, g)) continue;
        const int64_t have = (freed[tier][g] += gpus) + free_in(tier, g);
        if (have >= need && (res.at.value() < 0 || tier < res.tier)) {
          res.at = ends[i].first;
          res.tier = tier;
          res.group = GroupId(g);
        }
      }
      if (!any_partition) {
        const int32_t p = topo_->node_partition(t.node);
        if (s.partition >= 0 && p != s.partition) continue;
        const int64_t have =
            (freed_partition[p] += gpus) + PoolFor(p).Free(topo_->top_tier(), GroupId(0));
        if (have >= need && res.at.value() < 0) {
          res.at = ends[i].first;  // somewhere in partition p: keep no group free
          res.tier = -1;
        }
      }
    }
  }
  reservation_ = res;
  // Without estimates the time is unknown: the resource reason says more.
  if (res.at.value() >= 0) job.reason = reason::HoldsReservation{res.at, res.tier, res.group};
}

}  // namespace unipool::sched
