// The scheduling cycle: Schedule() and its phases (StopOverdue,
// PlacePreemptors, PlaceInOrder with TryPlace, Grow), the placement search
// and committing and releasing GPUs.
#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>

#include "core/sched/scheduler.h"
#include "core/sched/scheduler_internal.h"

namespace unipool::sched {

// ---- Commit and release ----------------------------------------------------

void Scheduler::Commit(JobInfo& job, const Placement& p, int32_t partition, Time now) {
  const Gpus before = job.allocated();
  // Both placements are sorted by node: walk them together to find the
  // GPUs that are new (all of them for a start, the growth for a resize).
  std::vector<Task> fresh;
  fresh.reserve(p.tasks.size());
  if (job.phase == JobPhase::kRunning) Accrue(job, now);
  auto old = job.placement.tasks.begin();
  for (const Task& t : p.tasks) {
    while (old != job.placement.tasks.end() && old->node < t.node) ++old;
    const GpuMask held = old != job.placement.tasks.end() && old->node == t.node ? old->gpus : 0;
    if ((t.gpus & ~held) == 0) continue;
    fresh.push_back(Task{t.node, t.gpus & ~held});
    auto& on = node_jobs_[t.node.value()];
    if (held == 0 || std::find(on.begin(), on.end(), job.spec.id) == on.end())
      on.push_back(job.spec.id);
  }
  ApplyToPools(fresh, /*take=*/true);
  const bool resize = job.phase == JobPhase::kRunning;
  job.placement = p;
  job.partition = partition;
  const Gpus delta = job.allocated() - before;
  queues_.Charge(job.spec.queue, delta);
  allocated_ += delta;
  stats_.placements++;
  if (resize) {
    out_.push_back(ResizeJob{job.spec.id, p, before, job.spec.continue_on_resize});
    return;
  }
  job.phase = JobPhase::kRunning;
  job.compact_since = Time(-1);
  job.started = now;
  job.attained_since = now;
  job.last_checkpoint = now;
  job.reason = reason::New{};
  running_.insert(job.spec.id);
  running_priorities_.insert(job.spec.priority);
  if (job.spec.min_gpus.value() > 0) elastic_.insert(job.spec.id);
  out_.push_back(StartJob{job.spec.id, p, partition});
}

// Takes or returns `tasks` (sorted by node) in the global pool and in the
// partition pools, then flushes them.
void Scheduler::ApplyToPools(const std::vector<Task>& tasks, bool take) {
  if (!take) freed_since_grow_ = power_dirty_ = true;
  for (const Task& t : tasks) power_.Busy(t.node, take ? CountGpus(t.gpus) : -CountGpus(t.gpus));
  take ? global_.TakeAll(tasks) : global_.ReleaseAll(tasks);
  if (!partitions_.empty()) {
    // Split by partition, keeping node order within each.
    std::vector<std::vector<Task>> by(partitions_.size());
    for (const Task& t : tasks) by[topo_->node_partition(t.node)].push_back(t);
    for (size_t p = 0; p < by.size(); ++p) {
      if (by[p].empty()) continue;
      take ? partitions_[p]->TakeAll(by[p]) : partitions_[p]->ReleaseAll(by[p]);
    }
  }
  global_.Flush();
  for (auto& pool : partitions_) pool->Flush();
}

void Scheduler::Release(JobInfo& job) {
  for (const Task& t : job.placement.tasks) {
    auto& on = node_jobs_[t.node.value()];
    on.erase(std::remove(on.begin(), on.end(), job.spec.id), on.end());
  }
  ApplyToPools(job.placement.tasks, /*take=*/false);
  queues_.Charge(job.spec.queue, Gpus(0) - job.allocated());
  allocated_ -= job.allocated();
  job.placement = Placement{};
  if (running_.erase(job.spec.id)) {
    running_priorities_.erase(running_priorities_.find(job.spec.priority));
  }
  elastic_.erase(job.spec.id);
  preempting_.erase(job.spec.id);
}

// ---- The cycle -------------------------------------------------------------

std::vector<Decision> Scheduler::Schedule(Time now) {
  stats_.cycles++;
  CycleState cs;
  cs.now = now;
  ApplyQueueOrders();
  StopOverdue(now);
  RefreshPower();
  PlacePreemptors(cs);
  PlaceInOrder(cs);
  Grow(cs);
  std::vector<Decision> out;
  out.swap(out_);
  return out;
}

// Preempted jobs whose stop was never reported, well past their deadline,
// are taken as gone: requeued from their last checkpoint, so that their
// preemptors are not held up for ever.
void Scheduler::StopOverdue(Time now) {
  std::vector<JobId> overdue;
  for (JobId id : preempting_) {
    const JobInfo& j = jobs_.at(id);
    if (now > j.preempt_deadline + options_.stop_timeout) overdue.push_back(id);
  }
  for (JobId id : overdue) Requeue(jobs_.at(id), NodeId(), now);
}

// Jobs whose victims have all stopped go first: the GPUs were freed for them.
// While some victims are still stopping, the victims already stopped wait
// (PlaceInOrder skips them) and elastic jobs do not grow, so the GPUs freed
// so far are not taken straight back.
void Scheduler::PlacePreemptors(CycleState& cs) {
  for (auto it = preemptors_.begin(); it != preemptors_.end();) {
    JobInfo& job = jobs_.at(*it);
    const bool waiting = std::any_of(job.victims.begin(), job.victims.end(), [&](JobId v) {
      auto vit = jobs_.find(v);
      return vit != jobs_.end() && vit->second.phase == JobPhase::kPreempting;
    });
    if (waiting) {
      cs.any_blocked = true;
      for (JobId v : job.victims) cs.held_back.insert(v);
      ++it;
      continue;
    }
    it = preemptors_.erase(it);
    job.victims.clear();
    if (TryPlace(job, cs)) {
      pending_[job.spec.queue.value()].erase(KeyOf(job));
      --pending_count_;
    }
  }
}

// Hierarchical fair share between queues; within one, priority, then the
// queue's order (QueueOrder), then age.
void Scheduler::PlaceInOrder(CycleState& cs) {
  using Entry = std::tuple<double, int32_t>;  // (share key, queue)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  pending_.resize(queues_.size());
  std::vector<std::set<PendingKey>::iterator> cursor(pending_.size());
  for (size_t q = 0; q < pending_.size(); ++q) {
    cursor[q] = pending_[q].begin();
    if (!pending_[q].empty()) heap.emplace(queues_.ShareKey(QueueId(int32_t(q))), int32_t(q));
  }
  while (!heap.empty()) {
    const int32_t q = std::get<1>(heap.top());
    heap.pop();
    auto& it = cursor[q];
    // Skip preemptors waiting on victims, and victims held back for them.
    while (it != pending_[q].end() && (preemptors_.count(it->id) || cs.held_back.count(it->id)))
      ++it;
    if (it == pending_[q].end()) continue;
    JobInfo& job = jobs_.at(it->id);
    if (cs.attempts >= options_.max_attempts_per_cycle) return;
    if (options_.max_jobs_examined_per_cycle > 0 &&
        cs.examined++ >= options_.max_jobs_examined_per_cycle) {
      return;
    }
    if (TryPlace(job, cs)) {
      it = pending_[q].erase(it);
      --pending_count_;
    } else {
      ++it;
      if (queues_.spec(QueueId(q)).policy == QueuePolicy::kFifo) {
        for (auto rest = it; rest != pending_[q].end(); ++rest) {
          JobInfo& behind = jobs_.at(rest->id);
          if (!preemptors_.count(rest->id)) behind.reason = reason::BehindFifoHead{job.spec.id};
        }
        continue;
      }
    }
    heap.emplace(queues_.ShareKey(QueueId(q)), q);
  }
}

std::optional<std::string> Scheduler::Infeasible(const JobInfo& job) const {
  const JobSpec& s = job.spec;
  const Gpus need = s.min_gpus.value() > 0 ? s.min_gpus : s.gpus;
  for (QueueId a = s.queue; a.valid(); a = queues_.parent(a)) {
    const Gpus limit = queues_.spec(a).limit;
    if (limit.value() > 0 && need > limit) {
      return "needs " + std::to_string(need.value()) + " GPUs but queue '" + queues_.spec(a).name +
             "' is limited to " + std::to_string(limit.value());
    }
  }
  // Capacity if every node were up and idle. With uniform nodes, a node
  // holds K / task_gpus tasks; otherwise GPUs are counted.
  const int tier = s.required_tier >= 0 ? s.required_tier : topo_->top_tier();
  const auto& largest = largest_group_[tier];
  int64_t most = 0;
  if (s.span_partitions || partitions_.empty()) {
    most = largest[0];
  } else if (s.partition >= 0) {
    most = largest[s.partition + 1];
  } else {
    most = *std::max_element(largest.begin() + 1, largest.end());
  }
  const int64_t k = global_.max_node_gpus();
  if (global_.uniform_nodes()) {
    const int64_t per_node = s.max_tasks_per_node > 0
                                 ? std::min<int64_t>(k / s.task_gpus, s.max_tasks_per_node)
                                 : k / s.task_gpus;
    most = most / k * (per_node * s.task_gpus);
  }
  if (most < need.value()) {
    return "needs " + std::to_string(need.value()) + " GPUs in tasks of " +
           std::to_string(s.task_gpus) +
           (s.required_tier >= 0 ? " within one " + topo_->tier(tier).name : "") +
           (s.partition >= 0 ? " in partition " + topo_->partitions()[s.partition] : "") +
           ", but at most " + std::to_string(most) + " exist there";
  }
  return std::nullopt;
}

std::vector<int32_t> Scheduler::CandidatePartitions(const JobInfo& job) const {
  if (partitions_.empty()) return {-1};
  if (job.spec.partition >= 0) return {job.spec.partition};
  std::vector<int32_t> all(partitions_.size());
  for (size_t p = 0; p < all.size(); ++p) all[p] = static_cast<int32_t>(p);
  return all;
}

// Global level: the partition where the gang fits at the lowest tier, the
// preferred (data-local) one on a tie, then the fullest; partition level: the
// placer in that partition's pool. Spanning jobs fall back to the whole pool.
Scheduler::Attempt Scheduler::Search(const JobInfo& job, Gpus gpus,
                                     const PlaceRequest& base) const {
  PlaceRequest req = base;
  req.tasks = gpus.value() / job.spec.task_gpus;
  Attempt a;
  // (level, not preferred, fit, free, partition): the lowest tier first, then
  // data locality, then for one-node gangs the tightest node, then the
  // fullest partition.
  std::vector<std::tuple<int, int, int, int64_t, int32_t>> ranked;
  int64_t most_free = 0, largest = 0;
  int32_t power_partition = -2;  // one where the GPUs power hides would do
  for (int32_t p : CandidatePartitions(job)) {
    const Pool& pool = PoolFor(p);
    const int32_t part = partitions_.empty() ? -1 : p;
    if (power_partition == -2 && power_.hidden_gpus(part) > 0 &&
        pool.Free(topo_->top_tier(), GroupId(0)) + power_.hidden_gpus(part) >= gpus.value()) {
      power_partition = part;
    }
    const int level = options_.placer == PlacerKind::kTopology
                          ? topology_placer_.LowestLevel(pool, req)
                          : (pool.TasksIn(topo_->top_tier(), GroupId(0), req.task_gpus,
                                          req.max_tasks_per_node) >= req.tasks
                                 ? 0
                                 : -1);
    most_free = std::max(most_free, pool.Free(topo_->top_tier(), GroupId(0)));
    const int cap_level = std::min(req.max_level, pool.top_level());
    largest = std::max(largest, LargestBlock(pool, cap_level, req.task_gpus));
    if (level < 0 || level > req.max_level) continue;
    int fit = 0;
    if (level == 0) {
      const int64_t want = req.tasks * req.task_gpus;
      for (fit = static_cast<int>(want); fit < pool.max_node_gpus(); ++fit) {
        if (pool.Hist(topo_->top_tier(), GroupId(0), fit) > 0) break;
      }
    }
    ranked.emplace_back(level, p == job.spec.preferred_partition ? 0 : 1, fit,
                        pool.Free(topo_->top_tier(), GroupId(0)), p);
  }
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [level, pref, fit, free, p] : ranked) {
    PlaceOutcome out = placer_.Place(PoolFor(p), req);
    if (auto* placed = std::get_if<Placed>(&out)) {
      a.placement = std::move(placed->placement);
      a.partition = p;
      return a;
    }
  }
  if (job.spec.span_partitions && !partitions_.empty()) {
    PlaceOutcome out = placer_.Place(global_, req);
    if (auto* placed = std::get_if<Placed>(&out)) {
      a.placement = std::move(placed->placement);
      return a;
    }
  }
  if (std::optional<PowerBudget::Domain> d =
          power_partition == -2 ? std::nullopt : power_.Binding(power_partition)) {
    a.reason = reason::WaitingForPower{gpus, d->tier, d->group, d->draw, d->cap};
  } else if (most_free < gpus.value()) {
    a.reason = reason::NotEnoughGpus{gpus, Gpus(most_free)};
  } else {
    const int tier = std::min(req.max_level, global_.top_level()) - 1;
    a.reason = reason::NoContiguousBlock{gpus, std::max(tier, 0), Gpus(largest)};
  }
  return a;
}

bool Scheduler::TryPlace(JobInfo& job, CycleState& cs) {
  const JobSpec& s = job.spec;
  if (std::optional<std::string> why = Infeasible(job)) {
    job.reason = reason::Infeasible{*why};
    if (options_.fail_infeasible) out_.push_back(FailJob{s.id, *why});
    return false;
  }
  const Gpus floor = s.min_gpus.value() > 0 ? s.min_gpus : s.gpus;
  if (std::optional<QueueId> q = queues_.LimitExceededBy(s.queue, floor)) {
    job.reason = reason::OverLimit{*q, queues_.used(*q), queues_.spec(*q).limit};
    return false;
  }
  if (!s.preemptible && queues_.Borrows(s.queue, floor)) {
    job.reason = reason::NoBorrowing{s.queue};
    return false;
  }
  PlaceRequest base;
  base.task_gpus = s.task_gpus;
  base.max_tasks_per_node = s.max_tasks_per_node;
  if (s.required_tier >= 0) base.max_level = s.required_tier + 1;
  // Plan: respect the reservation of the job ahead.
  bool in_the_way = false;
  const bool reserved_for_other =
      cs.reservation_active && reservation_ && reservation_->holder != s.id;
  if (reserved_for_other) {
    const bool ends_before = s.runtime_estimate.value() > 0 && reservation_->at.value() >= 0 &&
                             cs.now + s.runtime_estimate <= reservation_->at;
    const bool keep_out = !s.preemptible || reservation_->hard;
    if (!ends_before && keep_out && reservation_->tier >= 0 && !base.exclude) {
      base.exclude = std::make_pair(reservation_->tier, reservation_->group);
    }
    in_the_way = !ends_before && !keep_out;
  }
  // Largest size first for elastic jobs, down to the minimum.
  const Gpus step = s.min_gpus.value() > 0 ? s.step : s.gpus;
  std::optional<PendingReason> first_failure;
  for (Gpus gpus = s.gpus; gpus >= floor; gpus -= step) {
    if (queues_.LimitExceededBy(s.queue, gpus)) continue;
    if (!s.preemptible && queues_.Borrows(s.queue, gpus)) continue;
    const auto key = std::make_tuple(s.task_gpus, s.max_tasks_per_node, base.max_level, s.partition,
                                     s.span_partitions, base.exclude.has_value());
    const int64_t tasks = gpus.value() / s.task_gpus;
    auto seen = cs.failed.find(key);
    if (seen != cs.failed.end() && seen->second.first <= tasks) {
      if (!first_failure) first_failure = seen->second.second;
      continue;
    }
    cs.attempts++;
    stats_.attempts++;
    Attempt a = Search(job, gpus, base);
    if (a.placement && WaitForCompact(job, *a.placement, cs)) return false;
    if (a.placement) {
      job.borrowing = queues_.Borrows(s.queue, gpus);
      job.backfilled = in_the_way;
      if (reservation_ && reservation_->holder == s.id) reservation_.reset();
      Commit(job, *a.placement, a.partition, cs.now);
      return true;
    }
    if (seen == cs.failed.end() || seen->second.first > tasks) cs.failed[key] = {tasks, a.reason};
    if (!first_failure) first_failure = a.reason;
  }
  cs.any_blocked = true;
  job.reason =
      first_failure ? *first_failure : PendingReason(reason::NotEnoughGpus{floor, free_gpus()});
  if (base.exclude && reservation_ && base.exclude->first == reservation_->tier &&
      base.exclude->second == reservation_->group && reservation_->holder != s.id) {
    job.reason = reason::WaitingForReservation{reservation_->holder, reservation_->at};
  }
  if (TryShrink(job, base, cs)) return true;
  if (TryPreempt(job, cs)) return false;
  if (options_.backfill && !cs.reservation_active) Reserve(job, cs);
  return false;
}

// ---- Elastic growth ------------------------------------------------------------

// Idle GPUs go to elastic jobs below their maximum, as many steps as fit,
// inside the group the job already spans when possible; only when no job is
// blocked for lack of GPUs.
void Scheduler::Grow(CycleState& cs) {
  // Growth only fails again until some GPUs come free.
  if (cs.any_blocked || !freed_since_grow_ || elastic_.empty()) return;
  freed_since_grow_ = false;
  for (JobId id : elastic_) {
    JobInfo& job = jobs_.at(id);
    const JobSpec& s = job.spec;
    if (s.min_gpus.value() == 0 || job.phase != JobPhase::kRunning || job.allocated() >= s.gpus) {
      continue;
    }
    // The most steps that fit, halving on failure: inside the group the job
    // already spans first, then anywhere it may run.
    int64_t steps = (s.gpus - job.allocated()) / s.step;
    const int span = std::max(job.placement.score.span_tier, 0);
    Pool& pool = PoolFor(job.partition);
    std::optional<Placed> grown;
    for (; steps >= 1 && !grown; steps /= 2) {
      const Gpus delta = s.step * steps;
      if (queues_.LimitExceededBy(s.queue, delta)) continue;
      if (!s.preemptible && queues_.Borrows(s.queue, delta)) continue;
      PlaceRequest req;
      req.task_gpus = s.task_gpus;
      req.tasks = delta.value() / s.task_gpus;
      req.max_tasks_per_node = s.max_tasks_per_node;
      req.within = std::make_pair(span, topo_->group_of(job.placement.tasks.front().node, span));
      cs.attempts++;
      PlaceOutcome out = PlaceBeside(pool, req, job.placement.tasks);
      if (!std::holds_alternative<Placed>(out)) {
        req.within.reset();
        if (s.required_tier >= 0) req.max_level = s.required_tier + 1;
        out = PlaceBeside(pool, req, job.placement.tasks);
      }
      if (auto* placed = std::get_if<Placed>(&out)) grown = std::move(*placed);
    }
    if (!grown) continue;
    Placed* placed = &*grown;
    Placement p;  // the job's slices plus the new ones, in node order
    p.tasks = job.placement.tasks;
    MergeInNodeOrder(p.tasks, std::move(placed->placement.tasks));
    ScorePlacement(*topo_, p);
    Commit(job, p, job.partition, cs.now);
  }
}

}  // namespace unipool::sched
