// Start or wait: a gang that fits now only spread over more groups than it
// needs starts spread only when that wins. The spread costs its run time
// times the slowdown of its collectives at the crossed tier's bandwidth
// (the placer's own ring all-reduce estimate, weighted by the share of a
// step spent in them); waiting costs the time until one group frees enough
// for it, from running jobs' estimated ends. It waits only when the wait is
// shorter, and never past compact_max_wait; the group that frees first is
// reserved for it, and backfill uses the rest.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/sched/scheduler.h"
#include "core/sched/scheduler_internal.h"

namespace unipool::sched {

// Where `spread` is less compact than the gang could be: the lowest tier at
// which it uses more groups than it needs (`min_groups`, from the nodes it
// needs and a group's nodes). None for a gang already as compact as it can
// be, or one asked to take a node per task only for its own sake.
Scheduler::Excess Scheduler::ExcessOf(const JobSpec& spec, const Placement& spread) const {
  Excess e;
  const int top = topo_->top_tier();
  const int64_t tasks = spread.gpus().value() / spec.task_gpus;
  int64_t per_node = global_.max_node_gpus() / spec.task_gpus;
  if (spec.max_tasks_per_node > 0) per_node = std::min<int64_t>(per_node, spec.max_tasks_per_node);
  const int64_t nodes = (tasks + per_node - 1) / std::max<int64_t>(1, per_node);
  for (int t = spec.preferred_tier >= 0 ? spec.preferred_tier : 0; t < top; ++t) {
    const int64_t group_nodes = topo_->group_num_nodes(t, GroupId(0));
    const int64_t need = (nodes + group_nodes - 1) / group_nodes;
    if (spread.score.groups_used[t] > need) {
      e.tier = t;
      e.min_groups = need;
      e.used_groups = spread.score.groups_used[t];
      return e;
    }
    if (spec.preferred_tier >= 0) break;
  }
  return e;
}

// The share of its step time the gang loses placed as `spread`: when it
// crosses a higher tier than one group of the excess tier's parent would
// need, its collectives at the crossed tier's bandwidth against inside the
// fewest groups (the placer's ring estimate); when only more groups of the
// excess tier are used than needed, the share of the gang in the extra
// groups pays the step from that tier to the one above.
double Scheduler::SpreadSlowdown(const JobSpec& spec, const Placement& spread,
                                 const Excess& e) const {
  const double share = spec.comm_share >= 0 ? spec.comm_share : options_.comm_share;
  const int64_t gpus = spread.gpus().value();
  const int compact_tier = e.min_groups == 1 ? e.tier : e.tier + 1;
  auto ratio = [&](int slow, int fast) {
    const Duration f = RingAllReduce1GiB(*topo_, fast, gpus);
    return f.value() <= 0 ? 1.0
                          : static_cast<double>(RingAllReduce1GiB(*topo_, slow, gpus).value()) /
                                static_cast<double>(f.value());
  };
  if (spread.score.span_tier > compact_tier) {
    return share * std::max(0.0, ratio(spread.score.span_tier, compact_tier) - 1);
  }
  const double extra = static_cast<double>(e.used_groups - e.min_groups) / e.used_groups;
  return share * extra * std::max(0.0, ratio(e.tier + 1, e.tier) - 1);
}

// When the gang fits in its fewest groups of the excess tier under one
// parent group: per parent the spread placement touches, each child's time
// to hold its part of the gang (per node, the tasks it gains as each job on
// it ends, from their estimates; jobs without one never end here), and the
// `min_groups`-th soonest of them. O(jobs on those parents' nodes).
Scheduler::CompactPlace Scheduler::EarliestCompact(const JobSpec& spec, const Placement& spread,
                                                   const Excess& e, Time now) const {
  const int64_t tasks = spread.gpus().value() / spec.task_gpus;
  const int64_t part = (tasks + e.min_groups - 1) / e.min_groups;  // tasks per child
  const int parent_tier = e.tier + 1;
  std::vector<int32_t> parents;
  for (const Task& t : spread.tasks)
    parents.push_back(topo_->group_of(t.node, parent_tier).value());
  std::sort(parents.begin(), parents.end());
  parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
  auto tasks_for = [&](int64_t free) {
    const int64_t n = free / spec.task_gpus;
    const int32_t cap = spec.max_tasks_per_node;
    return cap > 0 ? std::min<int64_t>(n, cap) : n;
  };
  CompactPlace best;
  std::vector<std::pair<Time, int64_t>> gains, ends;  // (time, tasks), (time, GPUs)
  std::vector<std::pair<Time, int32_t>> ready;        // (time, child)
  for (int32_t p : parents) {
    ready.clear();
    const int32_t first_child = topo_->group_first_child(parent_tier, GroupId(p));
    for (int32_t c = first_child;
         c < first_child + topo_->group_num_children(parent_tier, GroupId(p)); ++c) {
      const GroupId child(c);
      int64_t have = global_.TasksIn(e.tier, child, spec.task_gpus, spec.max_tasks_per_node);
      gains.clear();
      const int32_t first = topo_->group_first_node(e.tier, child).value();
      for (int32_t n = first; n < first + topo_->group_num_nodes(e.tier, child); ++n) {
        const NodeId node(n);
        if (!global_.usable(node)) continue;
        ends.clear();
        for (JobId id : node_jobs_[n]) {
          const JobInfo& r = jobs_.at(id);
          Time end = r.preempt_deadline;
          if (r.phase != JobPhase::kPreempting) {
            if (r.spec.runtime_estimate.value() <= 0) continue;
            end = std::max(now, r.started + r.spec.runtime_estimate);
          }
          auto it = std::lower_bound(r.placement.tasks.begin(), r.placement.tasks.end(), node,
                                     [](const Task& t, NodeId x) { return t.node < x; });
          if (it != r.placement.tasks.end() && it->node == node) {
            ends.emplace_back(end, CountGpus(it->gpus));
          }
        }
        std::sort(ends.begin(), ends.end());
        int64_t free = global_.free(node);
        for (const auto& [end, gpus] : ends) {
          const int64_t before = tasks_for(free);
          free += gpus;
          if (tasks_for(free) > before) gains.emplace_back(end, tasks_for(free) - before);
        }
      }
      std::sort(gains.begin(), gains.end());
      Time at = have >= part ? now : Time(-1);
      for (size_t i = 0; i < gains.size() && at.value() < 0; ++i) {
        if ((have += gains[i].second) >= part) at = gains[i].first;
      }
      if (at.value() >= 0) ready.emplace_back(at, c);
    }
    if (static_cast<int64_t>(ready.size()) < e.min_groups) continue;
    std::nth_element(ready.begin(), ready.begin() + (e.min_groups - 1), ready.end());
    const auto [at, child] = ready[e.min_groups - 1];
    if (best.at.value() < 0 || at < best.at) {
      best.at = at;
      // One group: reserve it; several: their parent.
      best.tier = e.min_groups == 1 ? e.tier : parent_tier;
      best.group = GroupId(e.min_groups == 1 ? child : p);
    }
  }
  return best;
}

// True when `job` should wait rather than start as `spread`; then its
// reason says for which group, until when and why.
bool Scheduler::WaitForCompact(JobInfo& job, const Placement& spread, CycleState& cs) {
  const JobSpec& s = job.spec;
  const Duration max_wait =
      s.compact_max_wait.value() >= 0 ? s.compact_max_wait : options_.compact_max_wait;
  if (max_wait.value() <= 0 || spread.tasks.size() < 2 || s.runtime_estimate.value() <= 0) {
    return false;
  }
  const Excess e = ExcessOf(s, spread);
  if (e.tier < 0) return false;
  if (job.compact_since.value() < 0) job.compact_since = cs.now;
  const Time until = job.compact_since + max_wait;
  if (cs.now >= until) return false;
  const double slowdown = SpreadSlowdown(s, spread, e);
  const Duration cost =
      Nanoseconds(std::llround(static_cast<double>(s.runtime_estimate.value()) * slowdown));
  const CompactPlace place = EarliestCompact(s, spread, e, cs.now);
  if (place.at.value() < 0 || place.at <= cs.now || place.at > until || place.at - cs.now >= cost) {
    return false;
  }
  job.reason =
      reason::WaitingForCompact{e.tier, place.tier, place.group, place.at, until, slowdown};
  cs.any_blocked = true;
  if (options_.backfill && !cs.reservation_active) {
    reservation_ = Reservation{s.id, place.at, place.tier, place.group, cs.now, /*hard=*/true};
    cs.reservation_active = true;
  }
  return true;
}

}  // namespace unipool::sched
