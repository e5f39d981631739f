// The scheduler's construction and events (submit, restore, cancel, finish,
// stop, failures, node states), with the bookkeeping they share.
#include "core/sched/scheduler.h"

#include <algorithm>
#include <map>

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

// ---- Construction ------------------------------------------------------------

Scheduler::Scheduler(const Topology& topo, SchedulerOptions options)
    : topo_(&topo),
      options_(options),
      global_(topo),
      placer_(options.placer == PlacerKind::kFirstFit
                  ? static_cast<const Placer&>(first_fit_placer_)
                  : topology_placer_),
      power_(topo) {
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
  group_slot_.resize(topo.num_tiers());
  for (int t = 0; t < topo.num_tiers(); ++t) group_slot_[t].assign(topo.num_groups(t), kUnseen);
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
  RefreshPower();
}

void Scheduler::SetUsable(NodeId node, bool usable) {
  usable = usable && !power_.hidden(node);
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
  if (spec.max_tasks_per_node < 0 || spec.max_tasks_per_node > 1) {
    return InvalidArgument(job + ": max_tasks_per_node must be 0 (any) or 1 (a node per task)");
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

Status Scheduler::Submit(const JobSpec& spec, Time now, int64_t attained_gpu_seconds) {
  UNIPOOL_RETURN_IF_ERROR(Check(spec));
  auto [it, fresh] = jobs_.emplace(spec.id, NewJob(spec, now));
  it->second.attained_gpu_seconds = std::max<int64_t>(0, attained_gpu_seconds);
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
  j.attained_since = started;
  j.last_checkpoint = std::max(last_checkpoint, started);
  return Status::Ok();
}

void Scheduler::MakePending(JobInfo& job, Time now) {
  job.phase = JobPhase::kPending;
  job.placement = Placement{};
  job.partition = -1;
  job.victims.clear();
  job.reason = reason::New{};
  job.order_rank = OrderRank(job);
  if (pending_.size() < static_cast<size_t>(queues_.size())) pending_.resize(queues_.size());
  pending_[job.spec.queue.value()].insert(KeyOf(job));
  ++pending_count_;
}

int64_t Scheduler::OrderRank(const JobInfo& job) const {
  switch (queues_.spec(job.spec.queue).order) {
    case QueueOrder::kShortestFirst: {
      const int64_t estimate = job.spec.runtime_estimate.value();
      return estimate > 0 ? estimate : INT64_MAX;
    }
    case QueueOrder::kLeastAttained:
      return job.attained_gpu_seconds;
    case QueueOrder::kSubmission:
      break;
  }
  return 0;
}

void Scheduler::ApplyQueueOrders() {
  pending_.resize(queues_.size());
  pending_order_.resize(queues_.size(), QueueOrder::kSubmission);
  for (size_t q = 0; q < pending_.size(); ++q) {
    const QueueOrder order = queues_.spec(QueueId(static_cast<int32_t>(q))).order;
    if (pending_order_[q] == order) continue;
    pending_order_[q] = order;
    std::set<PendingKey> sorted;
    for (const PendingKey& k : pending_[q]) {
      JobInfo& job = jobs_.at(k.id);
      job.order_rank = OrderRank(job);
      sorted.insert(KeyOf(job));
    }
    pending_[q].swap(sorted);
  }
}

void Scheduler::Accrue(JobInfo& job, Time now) {
  const int64_t held_ns = std::max<int64_t>(0, (now - job.attained_since).value());
  job.attained_gpu_seconds += job.allocated().value() * (held_ns / 1000000000);
  job.energy_joules += RunningWatts(job) * (held_ns * 1e-9);
  job.attained_since = now;
}

int64_t Scheduler::RunningWatts(const JobInfo& job) const {
  int64_t w = 0;
  for (const Task& t : job.placement.tasks) {
    const GpuModel& m = topo_->node_model(t.node);
    w += CountGpus(t.gpus) * (m.train_power + m.host_power).value();
  }
  return w;
}

double Scheduler::EnergyJoules(const JobInfo& job, Time now) const {
  if (job.phase != JobPhase::kRunning && job.phase != JobPhase::kPreempting) {
    return job.energy_joules;
  }
  const int64_t held_ns = std::max<int64_t>(0, (now - job.attained_since).value());
  return job.energy_joules + RunningWatts(job) * (held_ns * 1e-9);
}

void Scheduler::RefreshPower() {
  if (!topo_->has_power_caps() || !options_.power_caps || !power_dirty_) return;
  power_dirty_ = false;
  std::optional<std::pair<int, GroupId>> first;
  if (reservation_ && reservation_->tier >= 0) {
    first = std::make_pair(reservation_->tier, reservation_->group);
  }
  const std::vector<NodeId> changed =
      power_.Refresh([this](NodeId n) { return Eligible(n); }, first);
  for (NodeId n : changed) SetUsable(n, Eligible(n));
  if (changed.empty()) return;
  global_.Flush();
  for (auto& pool : partitions_) pool->Flush();
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
    pending_[job.spec.queue.value()].erase(KeyOf(job));
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
  Accrue(job, now);
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

Status Scheduler::Replace(JobId id, NodeId node, const std::string& why, Time now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobInfo& job = it->second;
  if (job.phase != JobPhase::kRunning) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " is not running");
  }
  std::vector<Task> on_node;
  for (const Task& t : job.placement.tasks) {
    if (t.node == node) on_node.push_back(t);
  }
  if (on_node.empty()) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " has no task on node " +
                              std::to_string(node.value()));
  }
  if (ContinueWithout(job, on_node, now)) return Status::Ok();  // Grow swaps the node in
  Requeue(job, node, now);
  std::get<RequeueJob>(out_.back()).why = why;
  return Status::Ok();
}

bool Scheduler::HasRoomWithout(JobId id, NodeId node) const {
  const JobInfo* job = Find(id);
  if (!job || job->phase != JobPhase::kRunning) return false;
  int64_t held = 0;
  for (const Task& t : job->placement.tasks) {
    if (t.node != node) held += CountGpus(t.gpus);
  }
  const int64_t free_off = free_gpus().value() - (global_.usable(node) ? global_.free(node) : 0);
  const Gpus needs = job->spec.min_gpus.value() > 0 ? job->spec.min_gpus : job->spec.gpus;
  return held + free_off >= needs.value();
}

// What a stop at `now` costs: the work since the last checkpoint, which is
// done again, and the restart that redoing it begins with (restart_cost).
// A run's own start-up was counted with the stop that caused it, so the
// work counts from the start-up's end: stopped within its start-up, a run
// loses the time it ran and no more. So the losses of a job add up to at
// most the time it held its GPUs.
int64_t Scheduler::LostGpuSeconds(const JobInfo& job, Time now) const {
  const Time since = std::max(job.last_checkpoint, job.started + job.spec.restart_cost);
  const Duration lost = (now - since) + job.spec.restart_cost;  // >= now - started
  return job.allocated().value() * (std::max<int64_t>(0, lost.value()) / 1000000000);
}

int64_t Scheduler::PreemptionCost(const JobInfo& job, Time now) const {
  const JobSpec& s = job.spec;
  const Duration ckpt = s.checkpoint_cost;
  if (!s.saves_on_stop || ckpt.value() <= 0 || ckpt > queues_.spec(s.queue).grace) {
    return LostGpuSeconds(job, now);
  }
  const Time since = std::max(job.last_checkpoint, job.started + s.restart_cost);
  const Duration unsaved = std::max(Duration(0), now - since);
  const Duration lost = std::min(unsaved, ckpt) + s.restart_cost;
  return job.allocated().value() * (lost.value() / 1000000000);
}

Status Scheduler::SetMeasuredCosts(JobId id, Duration checkpoint_cost, Duration restart_cost,
                                   bool saves_on_stop) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Unknown(id);
  JobSpec& s = it->second.spec;
  if (checkpoint_cost.value() > 0) s.checkpoint_cost = checkpoint_cost;
  if (restart_cost.value() > 0) s.restart_cost = restart_cost;
  s.saves_on_stop = s.saves_on_stop || saves_on_stop;
  return Status::Ok();
}

void Scheduler::Requeue(JobInfo& job, NodeId failed, Time now) {
  const int64_t lost = LostGpuSeconds(job, now);
  job.lost_gpu_seconds += lost;
  stats_.failed_gpu_seconds += lost;
  stats_.requeues++;
  out_.push_back(RequeueJob{job.spec.id, failed, std::max(job.last_checkpoint, job.started), lost});
  Accrue(job, now);
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
    SetUsable(node, Eligible(node));
  }
  global_.Flush();
  for (auto& pool : partitions_) pool->Flush();
  power_dirty_ = true;
  RefreshPower();  // before any replacement is placed
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
  const auto down = [&](const Task& t) { return node_state_[t.node.value()] == NodeState::kDown; };
  std::vector<Task> lost;
  for (const Task& t : job.placement.tasks) {
    if (down(t)) lost.push_back(t);
  }
  const NodeId failed = lost.empty() ? NodeId() : lost.front().node;
  if (job.phase == JobPhase::kRunning && !lost.empty() && ContinueWithout(job, lost, now)) return;
  if (job.phase != JobPhase::kRunning || lost.empty() || !options_.restart_in_place) {
    return Requeue(job, failed, now);
  }
  std::optional<std::vector<Task>> fresh = Replacements(job, lost);
  if (!fresh) return Requeue(job, failed, now);
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
  ApplyToPools(*fresh, /*take=*/true);
  for (const Task& t : *fresh) {
    auto& on = node_jobs_[t.node.value()];
    if (std::find(on.begin(), on.end(), job.spec.id) == on.end()) on.push_back(job.spec.id);
  }
  // Only the lost slices change: O(tasks) moves, no rebuild of the gang.
  std::vector<Task>& tasks = job.placement.tasks;
  tasks.erase(std::remove_if(tasks.begin(), tasks.end(), down), tasks.end());
  MergeInNodeOrder(tasks, std::move(*fresh));
  ScorePlacement(*topo_, job.placement);
  job.restarts++;
  job.started = now;
  job.last_checkpoint = now;
  stats_.placements++;
  out_.push_back(StartJob{job.spec.id, job.placement, job.partition});
}

// An elastic continue job goes on without its lost slices, in place, when
// its survivors, cut to whole steps from the end, are still at least its
// minimum: no work is lost and nothing is requeued (M13). The scheduler
// grows it back (Grow) when GPUs come free. False: it restarts as any job.
bool Scheduler::ContinueWithout(JobInfo& job, const std::vector<Task>& lost, Time now) {
  const JobSpec& s = job.spec;
  if (!s.continue_on_resize || s.min_gpus.value() == 0) return false;
  std::vector<Task> keep, give = lost;
  int64_t kept = 0;
  for (const Task& t : job.placement.tasks) {
    if (std::any_of(lost.begin(), lost.end(), [&](const Task& l) { return l.node == t.node; })) {
      continue;
    }
    keep.push_back(t);
    kept += CountGpus(t.gpus);
  }
  std::vector<Task> cut;  // whole steps only: the last survivors leave too
  while (!keep.empty() && (kept - s.min_gpus.value()) % s.step.value() != 0) {
    kept -= CountGpus(keep.back().gpus);
    cut.push_back(keep.back());
    keep.pop_back();
  }
  if (keep.empty() || kept < s.min_gpus.value()) return false;
  ApplyToPools(lost, /*take=*/false);  // (a down node's GPUs wait hidden)
  std::reverse(cut.begin(), cut.end());
  ApplyToPools(cut, /*take=*/false);
  give.insert(give.end(), cut.begin(), cut.end());
  stats_.placements++;
  DropSlices(job, std::move(keep), give, lost.front().node, now);
  return true;
}

PlaceOutcome Scheduler::PlaceBeside(Pool& pool, const PlaceRequest& req,
                                    const std::vector<Task>& have) {
  if (req.max_tasks_per_node == 0) return placer_.Place(pool, req);
  std::vector<NodeId> hidden;
  for (const Task& t : have) {
    if (pool.member(t.node) && pool.usable(t.node)) {
      pool.SetUsable(t.node, false);
      hidden.push_back(t.node);
    }
  }
  pool.Flush();
  PlaceOutcome out = placer_.Place(pool, req);
  for (NodeId n : hidden) pool.SetUsable(n, true);
  pool.Flush();
  return out;
}

// Slices in place of a running job's lost ones: a hot spare (one lost
// node) or free GPUs inside the group the job already spans; nullopt when
// neither is there.
std::optional<std::vector<Task>> Scheduler::Replacements(const JobInfo& job,
                                                         const std::vector<Task>& lost) {
  const NodeId failed = lost.front().node;
  int64_t lost_gpus = 0;
  for (const Task& t : lost) lost_gpus += CountGpus(t.gpus);
  std::optional<NodeId> spare =
      lost.size() == 1 ? FindSpare(job, failed, static_cast<int32_t>(lost_gpus)) : std::nullopt;
  if (spare) {
    // The spare stops being one; the failed node, once repaired, is the new spare.
    spare_[spare->value()] = false;
    spare_[failed.value()] = true;
    power_.Unhide(*spare);
    SetUsable(*spare, true);
    return std::vector<Task>{Task{*spare, AllGpus(static_cast<int32_t>(lost_gpus))}};
  }
  PlaceRequest req;
  req.task_gpus = job.spec.task_gpus;
  req.tasks = lost_gpus / job.spec.task_gpus;
  req.max_tasks_per_node = job.spec.max_tasks_per_node;
  const int span = std::max(job.placement.score.span_tier, 0);
  req.within = std::make_pair(span, topo_->group_of(failed, span));
  PlaceOutcome out = PlaceBeside(PoolFor(job.partition), req, job.placement.tasks);
  auto* placed = std::get_if<Placed>(&out);
  if (!placed) return std::nullopt;
  return std::move(placed->placement.tasks);
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

}  // namespace unipool::sched
