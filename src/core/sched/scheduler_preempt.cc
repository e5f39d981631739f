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
// the cheapest victims (PreemptionCost: GPU-seconds lost since their last
// checkpoint, or the checkpoint written at the stop, plus restart) that
// free enough GPUs there; then the group with the least lost
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
  VictimSets sets;
  sets.candidates = PreemptionCandidates(job, cs.now);
  if (sets.candidates.empty()) return false;
  // Not even every candidate together would make room.
  int64_t total = PoolFor(s.partition).Free(topo_->top_tier(), GroupId(0));
  for (const Victim& v : sets.candidates) total += jobs_.at(v.id).allocated().value();
  if (total < need.value()) return false;
  CheapestVictimSets(s, need, sets);
  return PreemptFirstThatFits(job, need, sets, cs.now);
}

// The running jobs `job` may preempt, cheapest first.
std::vector<Scheduler::Victim> Scheduler::PreemptionCandidates(const JobInfo& job, Time now) const {
  std::vector<Victim> out;
  for (JobId id : running_) {
    const JobInfo& v = jobs_.at(id);
    if (MayPreempt(job, v, now)) out.push_back({PreemptionCost(v, now), id, &v});
  }
  std::sort(out.begin(), out.end(), [](const Victim& a, const Victim& b) {
    return std::tie(a.cost, a.id) < std::tie(b.cost, b.id);
  });
  return out;
}

// Phase 1 lists, per (tier, group), the usable GPUs each candidate frees
// there, in candidate (cost) order: one linked list per group in a flat
// arena, the group's index in group_slot_ (no hash map, no allocation per
// group).
// Phase 2 takes, per group, candidates in that order until the group's
// free GPUs plus theirs reach `need`: the cheapest set for that group.
// Groups too small for the job, or outside its partition, are skipped.
void Scheduler::CheapestVictimSets(const JobSpec& s, Gpus need, VictimSets& sets) {
  struct Entry {
    int32_t candidate;
    int32_t next;  // -1: the last of its group
    int64_t gpus;
  };
  struct Group {
    int tier;
    int32_t group;
    int32_t head, tail;
    bool allowed;  // big enough for the job, in its partition
  };
  std::vector<Entry> entries;
  std::vector<Group> groups;
  const int max_tier = s.required_tier >= 0 ? s.required_tier : topo_->top_tier();
  const auto allowed = [&](int tier, int32_t g) {
    if (topo_->group_gpus(tier, GroupId(g)) < need) return false;
    const int32_t gp = group_partition_[tier][g];
    if (gp == -1 && !s.span_partitions && !partitions_.empty()) return false;
    return s.partition < 0 || gp == s.partition;
  };
  for (size_t c = 0; c < sets.candidates.size(); ++c) {
    for (const Task& t : sets.candidates[c].job->placement.tasks) {
      if (!global_.usable(t.node)) continue;
      for (int tier = 0; tier <= max_tier; ++tier) {
        const int32_t g = topo_->group_of(t.node, tier).value();
        int32_t& slot = group_slot_[tier][g];
        if (slot == kUnseen) {
          slot = static_cast<int32_t>(groups.size());
          groups.push_back({tier, g, -1, -1, allowed(tier, g)});
        }
        Group& group = groups[slot];
        if (!group.allowed) continue;
        if (group.tail < 0 || entries[group.tail].candidate != static_cast<int32_t>(c)) {
          const int32_t e = static_cast<int32_t>(entries.size());
          entries.push_back({static_cast<int32_t>(c), -1, 0});
          (group.tail < 0 ? group.head : entries[group.tail].next) = e;
          group.tail = e;
        }
        entries[group.tail].gpus += CountGpus(t.gpus);
      }
    }
  }
  for (const Group& group : groups) {
    if (!group.allowed) continue;
    int64_t have =
        PoolFor(group_partition_[group.tier][group.group]).Free(group.tier, GroupId(group.group));
    VictimSet o{0, 0, group.tier, group.group, sets.chosen.size()};
    std::unordered_map<int32_t, Gpus> taken;  // from other queues, by queue
    for (int32_t e = group.head; e >= 0 && have < need.value(); e = entries[e].next) {
      const Victim& v = sets.candidates[entries[e].candidate];
      if (v.job->spec.queue != s.queue) {  // together, too, only what the queue borrowed
        Gpus& from = taken[v.job->spec.queue.value()];
        if (from + v.job->allocated() > queues_.Borrowed(v.job->spec.queue)) continue;
        from += v.job->allocated();
      }
      have += entries[e].gpus;
      o.cost += v.cost;
      sets.chosen.push_back(static_cast<size_t>(entries[e].candidate));
    }
    o.victims = sets.chosen.size() - o.first;
    if (have < need.value() || o.victims == 0) {
      sets.chosen.resize(o.first);
      continue;
    }
    sets.options.push_back(o);
  }
  for (const Group& group : groups) group_slot_[group.tier][group.group] = kUnseen;
  std::sort(sets.options.begin(), sets.options.end(), [](const VictimSet& a, const VictimSet& b) {
    return std::tie(a.cost, a.victims, a.tier, a.group) <
           std::tie(b.cost, b.victims, b.tier, b.group);
  });
}

// Trial of the cheapest sets in turn: give the victims' GPUs back, try to
// place, take them again. The first that fits is preempted.
bool Scheduler::PreemptFirstThatFits(JobInfo& job, Gpus need, const VictimSets& sets, Time now) {
  const JobSpec& s = job.spec;
  constexpr size_t kTrials = 8;
  for (size_t i = 0; i < sets.options.size() && i < kTrials; ++i) {
    const VictimSet& o = sets.options[i];
    const auto chosen = [&](size_t k) { return sets.candidates[sets.chosen[o.first + k]]; };
    Pool& pool = PoolFor(group_partition_[o.tier][o.group]);
    std::vector<Task> given;
    for (size_t k = 0; k < o.victims; ++k) {
      for (const Task& t : chosen(k).job->placement.tasks) {
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
    for (size_t k = 0; k < o.victims; ++k) {
      JobInfo& v = jobs_.at(chosen(k).id);
      v.phase = JobPhase::kPreempting;
      preempting_.insert(v.spec.id);
      v.preempt_deadline = now + queues_.spec(v.spec.queue).grace;
      v.preemptions++;
      stats_.preemptions++;
      out_.push_back(PreemptJob{v.spec.id, s.id, v.preempt_deadline, chosen(k).cost});
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
  for (Cut& c : cuts) DropSlices(jobs_.at(c.id), std::move(c.keep), c.give, NodeId(), cs.now);
  job.borrowing = queues_.Borrows(s.queue, Gpus(need));
  if (reservation_ && reservation_->holder == s.id) reservation_.reset();
  Commit(job, *a.placement, a.partition, cs.now);
  return true;
}

// A running job keeps `keep` (its tasks less `give`, node order) and goes
// on smaller: the GPUs of `give` leave its accounts (the caller returns
// them to the pools) and a ResizeJob says so; `lost` is the lost node that
// caused it, if any.
void Scheduler::DropSlices(JobInfo& job, std::vector<Task> keep, const std::vector<Task>& give,
                           NodeId lost, Time now) {
  const Gpus from = job.allocated();
  Accrue(job, now);
  for (const Task& t : give) {
    auto& on = node_jobs_[t.node.value()];
    on.erase(std::remove(on.begin(), on.end(), job.spec.id), on.end());
  }
  job.placement.tasks = std::move(keep);
  ScorePlacement(*topo_, job.placement);
  const Gpus dropped = from - job.allocated();
  queues_.Charge(job.spec.queue, Gpus(0) - dropped);
  allocated_ -= dropped;
  out_.push_back(ResizeJob{job.spec.id, job.placement, from, job.spec.continue_on_resize, lost});
}

}  // namespace unipool::sched
