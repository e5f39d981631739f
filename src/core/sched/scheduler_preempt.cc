// Checkpoint-aware preemption: which running jobs a job may preempt, the
// choice of victims, and shrinking elastic jobs before anyone is preempted.
#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>

#include "core/sched/scheduler.h"
#include "core/sched/scheduler_internal.h"

namespace unipool::sched {

// ---- Preemption ----------------------------------------------------------------

// Across queues, only borrowed GPUs are taken: a victim's queue keeps its
// guarantee (QueueTree::Borrowed), or it would reclaim them at once and
// the two queues would preempt each other in turn.
bool Scheduler::MayPreempt(const JobInfo& p, const JobInfo& v, Time now) const {
  if (v.phase != JobPhase::kRunning || !v.spec.preemptible || v.spec.id == p.spec.id) return false;
  if (now - v.started < options_.min_runtime) return false;
  const bool same_queue = v.spec.queue == p.spec.queue;
  const bool lent = !same_queue && queues_.Borrowed(v.spec.queue) >= v.allocated();
  const bool lower = v.spec.priority < p.spec.priority;
  if (lower && (same_queue || lent)) return true;
  const Gpus need = p.spec.min_gpus.value() > 0 ? p.spec.min_gpus : p.spec.gpus;
  if (lent && queues_.WithinGuarantee(p.spec.queue, need)) return true;  // reclaim lent quota
  return reservation_ && reservation_->holder == p.spec.id && v.backfilled &&
         v.spec.priority <= p.spec.priority && (same_queue || lent);
}

// Chooses whole gangs to stop so `job` fits: per group of each allowed tier,
// the cheapest victims (GPU-seconds lost since their last checkpoint plus
// restart) that free enough GPUs there; then the group with the least lost
// work, fewest victims, lowest tier. The choice is checked by a trial
// placement with the victims' GPUs given back.
bool Scheduler::TryPreempt(JobInfo& job, CycleState& cs) {
  if (!options_.preemption || !job.victims.empty() || running_.empty()) return false;
  if (job.last_preempt_attempt.value() >= 0 &&
      cs.now - job.last_preempt_attempt < options_.preemption_retry) {
    return false;
  }
  const JobSpec& s = job.spec;
  const Gpus need = s.min_gpus.value() > 0 ? s.min_gpus : s.gpus;
  // Cheap gate before looking at every running job: someone must be of lower
  // priority, or the job must be reclaiming its guarantee or hold the
  // reservation.
  const bool gate = *running_priorities_.begin() < s.priority ||
                    queues_.WithinGuarantee(s.queue, need) ||
                    (reservation_ && reservation_->holder == s.id);
  if (!gate || cs.preemption_attempts >= options_.max_preemption_attempts_per_cycle) return false;
  cs.preemption_attempts++;
  stats_.preemption_searches++;
  job.last_preempt_attempt = cs.now;
  struct Candidate {
    int64_t cost;
    JobId id;
  };
  std::vector<Candidate> candidates;
  for (JobId id : running_) {
    const JobInfo& v = jobs_.at(id);
    if (MayPreempt(job, v, cs.now)) candidates.push_back({LostGpuSeconds(v, cs.now), id});
  }
  if (candidates.empty()) return false;
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.cost, a.id) < std::tie(b.cost, b.id);
  });
  const int max_tier = s.required_tier >= 0 ? s.required_tier : topo_->top_tier();
  // Not even every candidate together would make room.
  int64_t total = PoolFor(s.partition).Free(topo_->top_tier(), GroupId(0));
  for (const Candidate& c : candidates) total += jobs_.at(c.id).allocated().value();
  if (total < need.value()) return false;
  // Usable GPUs each candidate frees per group: [tier][group] -> (candidate, gpus).
  std::vector<std::unordered_map<int32_t, std::vector<std::pair<size_t, int64_t>>>> freed(max_tier +
                                                                                          1);
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (const Task& t : jobs_.at(candidates[c].id).placement.tasks) {
      if (!global_.usable(t.node)) continue;
      for (int tier = 0; tier <= max_tier; ++tier) {
        auto& list = freed[tier][topo_->group_of(t.node, tier).value()];
        if (list.empty() || list.back().first != c) list.emplace_back(c, 0);
        list.back().second += CountGpus(t.gpus);
      }
    }
  }
  struct Option {
    int64_t cost;
    size_t victims;
    int tier;
    int32_t group;
    std::vector<size_t> chosen;
  };
  std::vector<Option> options;
  for (int tier = 0; tier <= max_tier; ++tier) {
    for (const auto& [g, list] : freed[tier]) {
      const int32_t gp = group_partition_[tier][g];
      if (gp == -1 && !s.span_partitions && !partitions_.empty()) continue;
      if (s.partition >= 0 && gp != s.partition) continue;
      int64_t have = PoolFor(gp).Free(tier, GroupId(g));
      Option o{0, 0, tier, g, {}};
      std::unordered_map<int32_t, Gpus> taken;  // from other queues, by queue
      for (const auto& [c, gpus] : list) {      // list is in cost order
        if (have >= need.value()) break;
        const JobInfo& v = jobs_.at(candidates[c].id);
        if (v.spec.queue != s.queue) {  // together, too, only what the queue borrowed
          Gpus& from = taken[v.spec.queue.value()];
          if (from + v.allocated() > queues_.Borrowed(v.spec.queue)) continue;
          from += v.allocated();
        }
        have += gpus;
        o.cost += candidates[c].cost;
        o.chosen.push_back(c);
      }
      if (have < need.value() || o.chosen.empty()) continue;
      o.victims = o.chosen.size();
      options.push_back(std::move(o));
    }
  }
  std::sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    return std::tie(a.cost, a.victims, a.tier, a.group) <
           std::tie(b.cost, b.victims, b.tier, b.group);
  });
  constexpr size_t kTrials = 8;
  for (size_t i = 0; i < options.size() && i < kTrials; ++i) {
    const Option& o = options[i];
    const int32_t gp = group_partition_[o.tier][o.group];
    Pool& pool = PoolFor(gp);
    // Trial: give the victims' GPUs back, try, take them again.
    std::vector<Task> given;
    for (size_t c : o.chosen) {
      for (const Task& t : jobs_.at(candidates[c].id).placement.tasks) {
        if (pool.member(t.node) && pool.usable(t.node)) {
          pool.Release(t.node, t.gpus);
          given.push_back(t);
        }
      }
    }
    pool.Flush();
    PlaceRequest req;
    req.task_gpus = s.task_gpus;
    req.tasks = need.value() / s.task_gpus;
    req.within = std::make_pair(o.tier, GroupId(o.group));
    const bool fits = std::holds_alternative<Placed>(placer_.Place(pool, req));
    for (const Task& t : given) pool.Take(t.node, t.gpus);
    pool.Flush();
    if (!fits) continue;
    for (size_t c : o.chosen) {
      JobInfo& v = jobs_.at(candidates[c].id);
      v.phase = JobPhase::kPreempting;
      preempting_.insert(v.spec.id);
      v.preempt_deadline = cs.now + queues_.spec(v.spec.queue).grace;
      v.preemptions++;
      stats_.preemptions++;
      out_.push_back(PreemptJob{v.spec.id, s.id, v.preempt_deadline, candidates[c].cost});
      job.victims.push_back(v.spec.id);
    }
    preemptors_.insert(s.id);
    job.reason = reason::WaitingForPreemption{job.victims};
    return true;
  }
  return false;
}

// Elastic jobs above their minimum give back whole node slices from the end
// of their rank order, in steps, before anyone is preempted: an elastic
// job resizes without losing work. Only jobs this one may preempt shrink.
// On success the shrinks (ResizeJob) and the start are committed at once.
bool Scheduler::TryShrink(JobInfo& job, const PlaceRequest& base, CycleState& cs) {
  if (!options_.preemption || elastic_.empty()) return false;
  const JobSpec& s = job.spec;
  const int64_t need = (s.min_gpus.value() > 0 ? s.min_gpus : s.gpus).value();
  const int64_t free_now = PoolFor(s.partition).Free(topo_->top_tier(), GroupId(0));
  struct Cut {
    JobId id;
    std::vector<Task> keep, give;
    int64_t gpus = 0;
  };
  std::vector<Cut> cuts;
  int64_t freed = 0;
  for (JobId id : elastic_) {
    if (free_now + freed >= need) break;
    const JobInfo& e = jobs_.at(id);
    if (!MayPreempt(job, e, cs.now)) continue;
    const int64_t spare = (e.allocated() - e.spec.min_gpus).value();
    const int64_t step = e.spec.step.value();
    Cut c{id, e.placement.tasks, {}, 0};
    while (!c.keep.empty() && global_.usable(c.keep.back().node) &&
           free_now + freed + c.gpus < need) {
      const int64_t g = CountGpus(c.keep.back().gpus);
      if (c.gpus + g > spare) break;
      c.gpus += g;
      c.give.push_back(c.keep.back());
      c.keep.pop_back();
    }
    while (c.gpus % step != 0) {  // whole steps only
      c.gpus -= CountGpus(c.give.back().gpus);
      c.keep.push_back(c.give.back());
      c.give.pop_back();
    }
    if (c.gpus == 0) continue;
    std::reverse(c.give.begin(), c.give.end());  // node order
    freed += c.gpus;
    cuts.push_back(std::move(c));
  }
  if (cuts.empty() || free_now + freed < need) return false;
  for (const Cut& c : cuts) ApplyToPools(c.give, /*take=*/false);
  Attempt a = Search(job, Gpus(need), base);
  if (!a.placement) {
    for (const Cut& c : cuts) ApplyToPools(c.give, /*take=*/true);
    return false;
  }
  for (Cut& c : cuts) {
    JobInfo& e = jobs_.at(c.id);
    const Gpus from = e.allocated();
    Accrue(e, cs.now);
    for (const Task& t : c.give) {
      auto& on = node_jobs_[t.node.value()];
      on.erase(std::remove(on.begin(), on.end(), c.id), on.end());
    }
    e.placement.tasks = std::move(c.keep);
    ScorePlacement(*topo_, e.placement);
    queues_.Charge(e.spec.queue, Gpus(0) - Gpus(c.gpus));
    allocated_ -= Gpus(c.gpus);
    out_.push_back(ResizeJob{c.id, e.placement, from});
  }
  job.borrowing = queues_.Borrows(s.queue, Gpus(need));
  if (reservation_ && reservation_->holder == s.id) reservation_.reset();
  Commit(job, *a.placement, a.partition, cs.now);
  return true;
}

}  // namespace unipool::sched
