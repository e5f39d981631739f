#include "core/sched/scheduler.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <queue>
#include <tuple>

namespace unipool::sched {

const char* JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kPending:
      return "pending";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kPreempting:
      return "preempting";
    case JobPhase::kDone:
      return "done";
  }
  return "unknown";
}

// State of one Schedule() call.
struct Scheduler::CycleState {
  Time now;
  int64_t attempts = 0;
  int64_t examined = 0;             // pending jobs looked at by PlaceInOrder
  bool any_blocked = false;         // some job could not get GPUs
  bool reservation_active = false;  // jobs from here on respect it
  int preemption_attempts = 0;
  std::set<JobId> held_back;  // stopped victims of a preemptor still waiting
  // Placement failures already seen this cycle: (task_gpus, max_level,
  // partition, span, excluded) -> the fewest tasks that failed. Free space
  // only shrinks within a cycle, so a larger request fails as well.
  std::map<std::tuple<int32_t, int, int32_t, bool, bool>, std::pair<int64_t, PendingReason>> failed;
};

struct Scheduler::Attempt {
  std::optional<Placement> placement;
  int32_t partition = -1;
  PendingReason reason = reason::New{};
};

// ---- Construction ------------------------------------------------------------

Scheduler::Scheduler(const Topology& topo, SchedulerOptions options)
    : topo_(&topo),
      options_(options),
      global_(topo),
      placer_(options.placer == PlacerKind::kFirstFit
                  ? static_cast<const Placer&>(first_fit_placer_)
                  : topology_placer_) {
  const int32_t nodes = topo.num_nodes();
  const size_t parts = topo.partitions().size();
  if (parts > 1) {
    for (size_t p = 0; p < parts; ++p) {
      std::vector<bool> member(nodes);
      for (int32_t n = 0; n < nodes; ++n) member[n] = topo.node_partition(NodeId(n)) == int32_t(p);
      partitions_.push_back(std::make_unique<Pool>(topo, member));
    }
  }
  group_partition_.resize(topo.num_tiers());
  for (int t = 0; t < topo.num_tiers(); ++t) {
    group_partition_[t].assign(topo.num_groups(t), -2);  // -2: not seen yet
    for (int32_t n = 0; n < nodes; ++n) {
      int32_t& gp = group_partition_[t][topo.group_of(NodeId(n), t).value()];
      const int32_t p = topo.node_partition(NodeId(n));
      gp = (gp == -2 || gp == p) ? p : -1;
    }
  }
  // Largest GPUs of one partition inside one group, per tier.
  largest_group_.assign(topo.num_tiers(), std::vector<int64_t>(parts + 1, 0));
  for (int t = 0; t < topo.num_tiers(); ++t) {
    std::map<std::pair<int32_t, int32_t>, int64_t> sums;  // (group, partition)
    for (int32_t n = 0; n < nodes; ++n) {
      const NodeId id(n);
      sums[{topo.group_of(id, t).value(), topo.node_partition(id)}] += topo.node_gpus(id).value();
    }
    for (const auto& [key, gpus] : sums) {
      int64_t& best = largest_group_[t][key.second + 1];
      best = std::max(best, gpus);
    }
    for (int32_t g = 0; g < topo.num_groups(t); ++g) {
      largest_group_[t][0] = std::max(largest_group_[t][0], topo.group_gpus(t, GroupId(g)).value());
    }
  }
  node_jobs_.resize(nodes);
  node_failures_.resize(nodes);
  node_state_.resize(nodes);
  spare_.assign(nodes, false);
  for (int32_t n = 0; n < nodes; ++n) {
    node_state_[n] = topo.node_state(NodeId(n));
    for (const auto& [key, value] : topo.node_labels(NodeId(n))) {
      if (key == options_.spare_label && value == "true") spare_[n] = true;
    }
    if (spare_[n]) SetUsable(NodeId(n), false);
  }
  global_.Flush();
  for (auto& pool : partitions_) pool->Flush();
}

void Scheduler::SetUsable(NodeId node, bool usable) {
  if (usable) freed_since_grow_ = true;
  global_.SetUsable(node, usable);
  PoolFor(topo_->node_partition(node)).SetUsable(node, usable);
}

Scheduler::~Scheduler() = default;

Pool& Scheduler::PoolFor(int32_t partition) {
  return partition < 0 || partitions_.empty() ? global_ : *partitions_[partition];
}
const Pool& Scheduler::PoolFor(int32_t partition) const {
  return partition < 0 || partitions_.empty() ? global_ : *partitions_[partition];
}

Gpus Scheduler::free_gpus() const { return Gpus(global_.Free(topo_->top_tier(), GroupId(0))); }

// ---- Events -------------------------------------------------------------------

// Default task size: the largest divisor of the job's GPUs that fits the
// largest node (8 -> 8, 12 -> 6 on 8-GPU nodes, 24 -> 8, 3 -> 3).
int32_t Scheduler::TaskGpus(const JobSpec& spec) const {
  if (spec.task_gpus > 0) return spec.task_gpus;
  const int64_t gpus = std::max<int64_t>(1, spec.gpus.value());
  for (int64_t g = std::min<int64_t>(gpus, global_.max_node_gpus()); g > 1; --g) {
    if (gpus % g == 0) return static_cast<int32_t>(g);
  }
  return 1;
}

Status Scheduler::Check(const JobSpec& spec) const {
  const std::string job = "job " + std::to_string(spec.id.value());
  if (spec.id.value() < 0) return InvalidArgument(job + ": id must be >= 0");
  if (jobs_.count(spec.id)) return AlreadyExists(job + " already exists");
  if (!spec.queue.valid() || spec.queue.value() >= queues_.size()) {
    return NotFound(job + ": unknown queue");
  }
  if (!queues_.is_leaf(spec.queue)) {
    return InvalidArgument(job + ": queue '" + queues_.spec(spec.queue).name +
                           "' has child queues; submit to a leaf queue");
  }
  if (spec.gpus.value() < 1) return InvalidArgument(job + ": gpus must be >= 1");
  const int32_t g = TaskGpus(spec);
  if (g < 1 || g > global_.max_node_gpus()) {
    return InvalidArgument(job + ": " + std::to_string(g) +
                           " GPUs per task, but the largest node has " +
                           std::to_string(global_.max_node_gpus()));
  }
  if (spec.gpus.value() % g != 0) {
    return InvalidArgument(job + ": gpus (" + std::to_string(spec.gpus.value()) +
                           ") must be a multiple of GPUs per task (" + std::to_string(g) + ")");
  }
  if (spec.min_gpus.value() > 0) {
    const int64_t step = spec.step.value() > 0 ? spec.step.value() : g;
    if (step % g != 0 || spec.min_gpus.value() % g != 0 || spec.min_gpus > spec.gpus ||
        (spec.gpus.value() - spec.min_gpus.value()) % step != 0) {
      return InvalidArgument(job +
                             ": elastic sizes must run from min to max in steps that are "
                             "multiples of GPUs per task");
    }
  }
  if (spec.required_tier >= topo_->num_tiers()) {
    return InvalidArgument(job + ": required tier " + std::to_string(spec.required_tier) +
                           " does not exist");
  }
  const int32_t parts = static_cast<int32_t>(topo_->partitions().size());
  if (spec.partition >= parts || spec.preferred_partition >= parts) {
    return InvalidArgument(job + ": unknown partition");
  }
  return Status::Ok();
}

// A checked spec with its defaults filled in (task size, elastic step).
JobInfo Scheduler::NewJob(const JobSpec& spec, Time submitted) const {
  JobInfo info;
  info.spec = spec;
  info.spec.task_gpus = TaskGpus(spec);
  if (info.spec.min_gpus.value() > 0 && info.spec.step.value() == 0) {
    info.spec.step = Gpus(info.spec.task_gpus);
  }
  info.submitted = submitted;
  return info;
}

Status Scheduler::Submit(const JobSpec& spec, Time now) {
  UNIPOOL_RETURN_IF_ERROR(Check(spec));
  auto [it, fresh] = jobs_.emplace(spec.id, NewJob(spec, now));
  MakePending(it->second, now);
  return Status::Ok();
}

Status Scheduler::Restore(const JobSpec& spec, const Placement& placement, Time submitted,
                          Time started, Time last_checkpoint, int32_t restarts) {
  UNIPOOL_RETURN_IF_ERROR(Check(spec));
  const std::string job = "job " + std::to_string(spec.id.value());
  if (placement.tasks.empty()) return InvalidArgument(job + ": empty placement");
  for (size_t i = 0; i < placement.tasks.size(); ++i) {
    const Task& t = placement.tasks[i];
    if (t.node.value() < 0 || t.node.value() >= topo_->num_nodes()) {
      return InvalidArgument(job + ": unknown node in its placement");
    }
    if (i > 0 && !(placement.tasks[i - 1].node < t.node)) {
      return InvalidArgument(job + ": placement not sorted by node");
    }
    if ((global_.free_mask(t.node) & t.gpus) != t.gpus) {
      return FailedPrecondition(job + ": GPUs on " + topo_->node_name(t.node) + " are not free");
    }
  }
  JobInfo& j = jobs_.emplace(spec.id, NewJob(spec, submitted)).first->second;
  j.restarts = restarts;
  Placement p = placement;
  ScorePlacement(*topo_, p);
  int32_t partition = topo_->node_partition(p.tasks.front().node);
  for (const Task& t : p.tasks) {
    if (topo_->node_partition(t.node) != partition) partition = -1;
  }
  Commit(j, p, partition, started);
  out_.pop_back();  // the StartJob Commit recorded: the job was already running
  j.started = started;
  j.last_checkpoint = std::max(last_checkpoint, started);
  return Status::Ok();
}

void Scheduler::MakePending(JobInfo& job, Time now) {
  job.phase = JobPhase::kPending;
  job.placement = Placement{};
  job.partition = -1;
  job.victims.clear();
  job.reason = reason::New{};
  if (pending_.size() < static_cast<size_t>(queues_.size())) pending_.resize(queues_.size());
  pending_[job.spec.queue.value()].insert(
      PendingKey{-job.spec.priority, job.submitted, job.spec.id});
  ++pending_count_;
}

static Status Unknown(JobId id) {
  return NotFound("job " + std::to_string(id.value()) + " is not known to the scheduler");
}

Status Scheduler::RestorePreempting(JobId id, Time deadline) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobInfo& job = it->second;
  if (job.phase != JobPhase::kRunning) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  job.phase = JobPhase::kPreempting;
  job.preempt_deadline = deadline;
  preempting_.insert(id);
  return Status::Ok();
}

Status Scheduler::Cancel(JobId id, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobInfo& job = it->second;
  if (job.phase == JobPhase::kPending) {
    pending_[job.spec.queue.value()].erase(PendingKey{-job.spec.priority, job.submitted, id});
    --pending_count_;
  } else {
    Release(job);
  }
  preemptors_.erase(id);
  if (reservation_ && reservation_->holder == id) reservation_.reset();
  jobs_.erase(it);
  return Status::Ok();
}

Status Scheduler::Finish(JobId id, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  if (it->second.phase == JobPhase::kPending) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  return Cancel(id, now);
}

Status Scheduler::Checkpointed(JobId id, Time at) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobInfo& job = it->second;
  if (job.phase == JobPhase::kPending) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  job.last_checkpoint = std::max(job.last_checkpoint, at);
  return Status::Ok();
}

Status Scheduler::Stopped(JobId id, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobInfo& job = it->second;
  if (job.phase == JobPhase::kPending) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  const int64_t lost = LostGpuSeconds(job, now);
  job.lost_gpu_seconds += lost;
  stats_.preempted_gpu_seconds += lost;
  Release(job);
  MakePending(job, now);
  return Status::Ok();
}

Status Scheduler::TaskFailed(JobId id, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  if (it->second.phase == JobPhase::kPending) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  Requeue(it->second, NodeId(), now);
  return Status::Ok();
}

int64_t Scheduler::LostGpuSeconds(const JobInfo& job, Time now) const {
  const Time since = std::max(job.last_checkpoint, job.started);
  const Duration lost = (now > since ? now - since : Duration(0)) + job.spec.restart_cost;
  return job.allocated().value() * (lost.value() / 1000000000);
}

void Scheduler::Requeue(JobInfo& job, NodeId failed, Time now) {
  const int64_t lost = LostGpuSeconds(job, now);
  job.lost_gpu_seconds += lost;
  stats_.failed_gpu_seconds += lost;
  stats_.requeues++;
  out_.push_back(RequeueJob{job.spec.id, failed, std::max(job.last_checkpoint, job.started), lost});
  Release(job);
  job.restarts++;
  MakePending(job, now);
}

Status Scheduler::SetNodeState(NodeId node, NodeState state, Time now) {
  return SetNodeStates({node}, state, now);
}

// Phases: states and pools first (so that no replacement lands on a node
// going down with the others), then each job hit restarts once, then drains.
Status Scheduler::SetNodeStates(const std::vector<NodeId>& nodes, NodeState state, Time now) {
  for (NodeId node : nodes) {
    if (!node.valid() || node.value() >= topo_->num_nodes()) {
      return NotFound("node " + std::to_string(node.value()) + " does not exist");
    }
  }
  std::vector<NodeId> failed;
  for (NodeId node : nodes) {
    const int32_t n = node.value();
    const NodeState old = node_state_[n];
    NodeState next = state;
    auto& fails = node_failures_[n];
    if (next == NodeState::kDown && old != NodeState::kDown) {
      fails.push_back(now);
      while (!fails.empty() && now - fails.front() > options_.flaky_window) fails.pop_front();
      failed.push_back(node);
      if (static_cast<int>(fails.size()) >= options_.flaky_failures) {
        out_.push_back(CordonNode{
            node, std::to_string(fails.size()) + " failures within " +
                      std::to_string(options_.flaky_window.value() / 1000000000) + " s"});
      }
    }
    // A node with too many recent failures comes back flaky, not up; an
    // operator's "up" on a flaky node clears its history.
    if (next == NodeState::kUp && old == NodeState::kDown &&
        static_cast<int>(fails.size()) >= options_.flaky_failures) {
      next = NodeState::kFlaky;
    }
    if (next == NodeState::kUp && old == NodeState::kFlaky) fails.clear();
    node_state_[n] = next;
    SetUsable(node, next == NodeState::kUp && !spare_[n]);
  }
  global_.Flush();
  for (auto& pool : partitions_) pool->Flush();
  std::set<JobId> hit;
  for (NodeId node : failed)
    hit.insert(node_jobs_[node.value()].begin(), node_jobs_[node.value()].end());
  for (JobId id : hit) RestartAfterFailure(jobs_.at(id), now);
  if (state == NodeState::kDrained) {
    for (NodeId node : nodes) {
      for (JobId id : node_jobs_[node.value()]) {
        JobInfo& job = jobs_.at(id);
        if (job.phase != JobPhase::kRunning || !job.spec.preemptible) continue;  // runs to its end
        job.phase = JobPhase::kPreempting;
        preempting_.insert(id);
        job.preempt_deadline = now + queues_.spec(job.spec.queue).grace;
        job.preemptions++;
        stats_.preemptions++;
        out_.push_back(PreemptJob{id, JobId(), job.preempt_deadline, LostGpuSeconds(job, now)});
      }
    }
  }
  return Status::Ok();
}

// A job lost the slices on nodes that are now down. A running job restarts
// from its last checkpoint in place: the lost slices are replaced by a hot
// spare (one lost node) or by free GPUs inside the group the job already
// spans, and only those slices change hands. Otherwise it is requeued.
void Scheduler::RestartAfterFailure(JobInfo& job, Time now) {
  std::vector<Task> lost, kept;
  for (const Task& t : job.placement.tasks) {
    (node_state_[t.node.value()] == NodeState::kDown ? lost : kept).push_back(t);
  }
  const NodeId failed = lost.empty() ? NodeId() : lost.front().node;
  if (job.phase != JobPhase::kRunning || lost.empty() || !options_.restart_in_place) {
    return Requeue(job, failed, now);
  }
  int64_t lost_gpus = 0;
  for (const Task& t : lost) lost_gpus += CountGpus(t.gpus);
  std::vector<Task> fresh;
  std::optional<NodeId> spare =
      lost.size() == 1 ? FindSpare(job, failed, static_cast<int32_t>(lost_gpus)) : std::nullopt;
  if (spare) {
    // The spare stops being one; the failed node, once repaired, is the new spare.
    spare_[spare->value()] = false;
    spare_[failed.value()] = true;
    SetUsable(*spare, true);
    fresh.push_back(Task{*spare, AllGpus(static_cast<int32_t>(lost_gpus))});
  } else {
    PlaceRequest req;
    req.task_gpus = job.spec.task_gpus;
    req.tasks = lost_gpus / job.spec.task_gpus;
    const int span = std::max(job.placement.score.span_tier, 0);
    req.within = std::make_pair(span, topo_->group_of(failed, span));
    PlaceOutcome out = placer_.Place(PoolFor(job.partition), req);
    auto* placed = std::get_if<Placed>(&out);
    if (!placed) return Requeue(job, failed, now);
    fresh = std::move(placed->placement.tasks);
  }
  const int64_t lost_work = LostGpuSeconds(job, now);
  job.lost_gpu_seconds += lost_work;
  stats_.failed_gpu_seconds += lost_work;
  stats_.requeues++;
  out_.push_back(
      RequeueJob{job.spec.id, failed, std::max(job.last_checkpoint, job.started), lost_work});
  for (const Task& t : lost) {
    auto& on = node_jobs_[t.node.value()];
    on.erase(std::remove(on.begin(), on.end(), job.spec.id), on.end());
  }
  ApplyToPools(lost, /*take=*/false);  // the nodes are out: their GPUs wait hidden
  ApplyToPools(fresh, /*take=*/true);
  std::map<NodeId, GpuMask> merged;
  for (const Task& t : kept) merged[t.node] |= t.gpus;
  for (const Task& t : fresh) {
    merged[t.node] |= t.gpus;
    auto& on = node_jobs_[t.node.value()];
    if (std::find(on.begin(), on.end(), job.spec.id) == on.end()) on.push_back(job.spec.id);
  }
  job.placement.tasks.clear();
  for (const auto& [node, mask] : merged) job.placement.tasks.push_back(Task{node, mask});
  ScorePlacement(*topo_, job.placement);
  job.restarts++;
  job.started = now;
  job.last_checkpoint = now;
  stats_.placements++;
  out_.push_back(StartJob{job.spec.id, job.placement, job.partition});
}

// A hot spare for a job's failed node: up, idle, with enough GPUs, in the
// failed node's scale-up domain, else its leaf (tier 1).
std::optional<NodeId> Scheduler::FindSpare(const JobInfo& job, NodeId failed, int32_t gpus) const {
  // Stay within the job's required tier and, unless it may span them, its partition.
  int tiers = std::min(2, topo_->num_tiers());
  if (job.spec.required_tier >= 0) tiers = std::min(tiers, job.spec.required_tier + 1);
  const int32_t partition = job.spec.span_partitions ? -1 : topo_->node_partition(failed);
  for (int tier = 0; tier < tiers; ++tier) {
    const GroupId g = topo_->group_of(failed, tier);
    const NodeId first = topo_->group_first_node(tier, g);
    for (int32_t n = first.value(); n < first.value() + topo_->group_num_nodes(tier, g); ++n) {
      if (spare_[n] && node_state_[n] == NodeState::kUp && node_jobs_[n].empty() &&
          topo_->node_gpus(NodeId(n)).value() >= gpus &&
          (partition < 0 || topo_->node_partition(NodeId(n)) == partition)) {
        return NodeId(n);
      }
    }
  }
  return std::nullopt;
}

// ---- Commit and release ----------------------------------------------------

void Scheduler::Commit(JobInfo& job, const Placement& p, int32_t partition, Time now) {
  const Gpus before = job.allocated();
  // Both placements are sorted by node: walk them together to find the
  // GPUs that are new (all of them for a start, the growth for a resize).
  std::vector<Task> fresh;
  fresh.reserve(p.tasks.size());
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
    out_.push_back(ResizeJob{job.spec.id, p, before});
    return;
  }
  job.phase = JobPhase::kRunning;
  job.started = now;
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
  if (!take) freed_since_grow_ = true;
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
  StopOverdue(now);
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
      pending_[job.spec.queue.value()].erase(
          PendingKey{-job.spec.priority, job.submitted, job.spec.id});
      --pending_count_;
    }
  }
}

// Hierarchical fair share between queues; priority, then age, within one.
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
  if (global_.uniform_nodes()) most = most / k * (k / s.task_gpus * s.task_gpus);
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
  for (int32_t p : CandidatePartitions(job)) {
    const Pool& pool = PoolFor(p);
    const int level =
        options_.placer == PlacerKind::kTopology
            ? topology_placer_.LowestLevel(pool, req)
            : (pool.TasksIn(topo_->top_tier(), GroupId(0), req.task_gpus) >= req.tasks ? 0 : -1);
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
  if (most_free < gpus.value()) {
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
  if (s.required_tier >= 0) base.max_level = s.required_tier + 1;
  // Plan: respect the reservation of the job ahead.
  bool in_the_way = false;
  const bool reserved_for_other =
      cs.reservation_active && reservation_ && reservation_->holder != s.id;
  if (reserved_for_other) {
    const bool ends_before = s.runtime_estimate.value() > 0 && reservation_->at.value() >= 0 &&
                             cs.now + s.runtime_estimate <= reservation_->at;
    if (!ends_before && !s.preemptible && reservation_->tier >= 0 && !base.exclude) {
      base.exclude = std::make_pair(reservation_->tier, reservation_->group);
    }
    in_the_way = !ends_before && s.preemptible;
  }
  // Largest size first for elastic jobs, down to the minimum.
  const Gpus step = s.min_gpus.value() > 0 ? s.step : s.gpus;
  std::optional<PendingReason> first_failure;
  for (Gpus gpus = s.gpus; gpus >= floor; gpus -= step) {
    if (queues_.LimitExceededBy(s.queue, gpus)) continue;
    if (!s.preemptible && queues_.Borrows(s.queue, gpus)) continue;
    const auto key = std::make_tuple(s.task_gpus, base.max_level, s.partition, s.span_partitions,
                                     base.exclude.has_value());
    const int64_t tasks = gpus.value() / s.task_gpus;
    auto seen = cs.failed.find(key);
    if (seen != cs.failed.end() && seen->second.first <= tasks) {
      if (!first_failure) first_failure = seen->second.second;
      continue;
    }
    cs.attempts++;
    stats_.attempts++;
    Attempt a = Search(job, gpus, base);
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

// ---- Preemption ----------------------------------------------------------------

bool Scheduler::MayPreempt(const JobInfo& p, const JobInfo& v, Time now) const {
  if (v.phase != JobPhase::kRunning || !v.spec.preemptible || v.spec.id == p.spec.id) return false;
  if (now - v.started < options_.min_runtime) return false;
  const bool lower = v.spec.priority < p.spec.priority;
  if (lower && (v.spec.queue == p.spec.queue || queues_.Borrowing(v.spec.queue))) return true;
  const Gpus need = p.spec.min_gpus.value() > 0 ? p.spec.min_gpus : p.spec.gpus;
  if (v.spec.queue != p.spec.queue && queues_.Borrowing(v.spec.queue) &&
      queues_.WithinGuarantee(p.spec.queue, need)) {
    return true;  // reclaim lent quota
  }
  return reservation_ && reservation_->holder == p.spec.id && v.backfilled &&
         v.spec.priority <= p.spec.priority;
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
      for (const auto& [c, gpus] : list) {  // list is in cost order
        if (have >= need.value()) break;
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
      req.within = std::make_pair(span, topo_->group_of(job.placement.tasks.front().node, span));
      cs.attempts++;
      PlaceOutcome out = placer_.Place(pool, req);
      if (!std::holds_alternative<Placed>(out)) {
        req.within.reset();
        if (s.required_tier >= 0) req.max_level = s.required_tier + 1;
        out = placer_.Place(pool, req);
      }
      if (auto* placed = std::get_if<Placed>(&out)) grown = std::move(*placed);
    }
    if (!grown) continue;
    const Placed* placed = &*grown;
    // Merge: the job's slices plus the new ones, in node order.
    std::map<NodeId, GpuMask> merged;
    for (const Task& t : job.placement.tasks) merged[t.node] |= t.gpus;
    for (const Task& t : placed->placement.tasks) merged[t.node] |= t.gpus;
    Placement p;
    for (const auto& [node, mask] : merged) p.tasks.push_back(Task{node, mask});
    ScorePlacement(*topo_, p);
    Commit(job, p, job.partition, cs.now);
  }
}

// ---- Queries -------------------------------------------------------------------

const JobInfo* Scheduler::Find(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

static std::string At(Time t) {
  return t.value() < 0 ? "an unknown time (running jobs give no estimates)"
                       : "t=" + std::to_string(t.value() / 1000000000) + "s";
}

std::string Scheduler::ExplainReason(const PendingReason& r) const {
  struct Visitor {
    const Scheduler& s;
    std::string operator()(const reason::New&) { return "waiting for the next scheduling cycle"; }
    std::string operator()(const reason::OverLimit& o) {
      return "queue '" + s.queues_.spec(o.queue).name +
             "' is at its limit: " + std::to_string(o.used.value()) + " of " +
             std::to_string(o.limit.value()) + " GPUs in use";
    }
    std::string operator()(const reason::NoBorrowing& o) {
      return "queue '" + s.queues_.spec(o.queue).name +
             "' has no guaranteed GPUs left and non-preemptible jobs may not borrow idle ones";
    }
    std::string operator()(const reason::NotEnoughGpus& o) {
      return "not enough free GPUs: needs " + std::to_string(o.need.value()) + ", " +
             std::to_string(o.free.value()) + " free";
    }
    std::string operator()(const reason::NoContiguousBlock& o) {
      return "no contiguous block: needs " + std::to_string(o.need.value()) + " GPUs within one " +
             s.topo_->tier(o.tier).name + ", the largest free block is " +
             std::to_string(o.largest.value());
    }
    std::string operator()(const reason::BehindFifoHead& o) {
      return "queue is strict FIFO: waiting behind job " + std::to_string(o.head.value());
    }
    std::string operator()(const reason::WaitingForReservation& o) {
      return "GPUs are reserved for job " + std::to_string(o.holder.value()) + " from " + At(o.at) +
             "; this job would delay it (give a runtime estimate that ends before then, or make "
             "it preemptible, to backfill)";
    }
    std::string operator()(const reason::HoldsReservation& o) {
      std::string where = o.tier >= 0 ? " in " + s.topo_->tier(o.tier).name + " " +
                                            s.topo_->group_name(o.tier, o.group)
                                      : "";
      return "next to run: GPUs" + where + " are reserved for it from " + At(o.at);
    }
    std::string operator()(const reason::WaitingForPreemption& o) {
      std::string ids;
      for (JobId v : o.victims) ids += (ids.empty() ? "" : ", ") + std::to_string(v.value());
      return "preempting job(s) " + ids +
             " to make room; they have their grace period to checkpoint";
    }
    std::string operator()(const reason::Infeasible& o) { return "can never run: " + o.why; }
  };
  return std::visit(Visitor{*this}, r);
}

std::string Scheduler::Explain(JobId id) const {
  const JobInfo* job = Find(id);
  if (!job) return "unknown job";
  switch (job->phase) {
    case JobPhase::kPending:
      return "pending: " + ExplainReason(job->reason);
    case JobPhase::kPreempting:
      return "preempting: must stop by " + At(job->preempt_deadline);
    default:
      break;
  }
  std::string out = "running on " + DescribePlacement(*topo_, job->placement);
  if (job->partition >= 0 && topo_->partitions().size() > 1) {
    out += "; partition " + topo_->partitions()[job->partition];
  }
  out += "; the lowest tier with room, best-fit at each tier";
  if (job->borrowing) out += "; beyond its queue's guarantee, so other queues may reclaim it";
  return out;
}

Status Scheduler::CheckInvariants() const {
  std::vector<GpuMask> used(topo_->num_nodes(), 0);
  std::vector<int64_t> queue_used(queues_.size(), 0);
  for (JobId id : running_) {
    const JobInfo& j = jobs_.at(id);
    const int64_t gpus = j.allocated().value();
    const bool size_ok = j.spec.min_gpus.value() > 0
                             ? gpus >= j.spec.min_gpus.value() && gpus <= j.spec.gpus.value()
                             : gpus == j.spec.gpus.value();
    if (!size_ok)
      return Status(StatusCode::kInternal, "job " + std::to_string(id.value()) + " holds " +
                                               std::to_string(gpus) + " GPUs");
    for (const Task& t : j.placement.tasks) {
      if (used[t.node.value()] & t.gpus) {
        return Status(StatusCode::kInternal,
                      "a GPU on node " + topo_->node_name(t.node) + " is allocated twice");
      }
      used[t.node.value()] |= t.gpus;
      if (global_.free_mask(t.node) & t.gpus) {
        return Status(StatusCode::kInternal,
                      "node " + topo_->node_name(t.node) + " shows allocated GPUs as free");
      }
    }
    for (QueueId q = j.spec.queue; q.valid(); q = queues_.parent(q)) queue_used[q.value()] += gpus;
  }
  for (int32_t q = 0; q < queues_.size(); ++q) {
    const QueueSpec& spec = queues_.spec(QueueId(q));
    if (queue_used[q] != queues_.used(QueueId(q)).value()) {
      return Status(StatusCode::kInternal, "queue '" + spec.name + "' usage is out of step");
    }
    if (spec.limit.value() > 0 && queue_used[q] > spec.limit.value()) {
      return Status(StatusCode::kInternal, "queue '" + spec.name + "' is over its limit");
    }
  }
  size_t pending = 0;
  for (const auto& set : pending_) {
    for (const PendingKey& k : set) {
      if (jobs_.at(k.id).phase != JobPhase::kPending) {
        return Status(StatusCode::kInternal,
                      "job " + std::to_string(k.id.value()) + " is queued but not pending");
      }
      ++pending;
    }
  }
  if (pending != pending_count_)
    return Status(StatusCode::kInternal, "pending count is out of step");
  return Status::Ok();
}

}  // namespace unipool::sched
