// ControlPlane, the reconcile pass: leases, time limits, backoff, the
// scheduler's decisions turned into record changes; gauges and metrics.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "server/control.h"
#include "server/control_internal.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

// ---- Reconcile -------------------------------------------------------------

Summary ControlPlane::GetSummary(const Scope& scope) const {
  std::lock_guard lock(mu_);
  Summary s;
  s.total = topo_.num_gpus();
  s.allocated = sched_->allocated_gpus();
  s.free = sched_->free_gpus();
  s.unavailable = s.total - s.allocated - s.free;
  s.nodes = topo_.num_nodes();
  for (const NodeRecord& n : nodes_) s.nodes_up += n.state == NodeState::kUp;
  for (int i = 0; i < 6; ++i) s.jobs[JobStateName(static_cast<JobState>(i))] = 0;
  for (const auto& [id, j] : jobs_) {
    if (scope.Sees(j.request.queue)) s.jobs[JobStateName(j.state)]++;
  }
  s.revision = store_.revision();
  return s;
}

void ControlPlane::WaitForWork(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  work_.wait_for(lock, timeout, [&] { return dirty_; });
}

bool ControlPlane::MostNodesSilent(Time now) {
  const Duration late = Duration(options_.node_lease.value() / 3);
  int64_t live = 0, silent = 0;
  for (const NodeRecord& n : nodes_) {
    if (!n.alive) continue;
    ++live;
    if (now - n.last_heartbeat > late) ++silent;
  }
  live_nodes_ = live;
  const bool outage = silent * 2 > live;
  if (outage != outage_) {
    outage_ = outage;
    if (outage) {
      log_.Warn("control",
                "more than half of the live nodes are silent: the control plane's network is the "
                "likelier fault; silent nodes are declared down only after the lease and the "
                "outage grace",
                {{"silent", silent}, {"live", live}});
    } else {
      // Each node still silent gets a whole lease from now: its agent
      // learns from its peers that the outage is over, and fences, well
      // within it.
      for (NodeRecord& n : nodes_) {
        if (n.alive && now - n.last_heartbeat > late) n.last_heartbeat = now;
      }
      log_.Info("control", "most nodes are back: leases run again", {{"live", live}});
    }
  }
  return outage;
}

void ControlPlane::ExpireLeases(Time now, Txn& txn) {
  if (options_.assume_nodes_up) return;
  const Duration late = Duration(options_.node_lease.value() / 3);
  const bool outage = options_.outage_grace.value() > 0 && MostNodesSilent(now);
  const Duration lease = outage ? options_.node_lease + options_.outage_grace : options_.node_lease;
  for (NodeRecord& n : nodes_) {
    if (!n.alive) continue;
    const Duration silent = now - n.last_heartbeat;
    // Not responding for a third of the lease: nothing new goes there (as
    // Slurm's NOT_RESPONDING), so a restart does not land on a dying node.
    if ((silent > late) != n.not_responding) {
      n.not_responding = silent > late;
      SetSchedNodeState(n, now);
      if (n.not_responding)
        metrics_.Add("unipool_heartbeats_missed_total", {{"partition", n.partition}});
    }
    if (silent <= lease) continue;
    n.alive = false;
    n.not_responding = false;
    SetSchedNodeState(n, now);
    WriteNode(n, txn);
    metrics_.Add("unipool_node_failures_total", {{"partition", n.partition}});
    log_.Warn("control", "node lease expired", {{"node", n.name}});
  }
}

// Looks only at jobs started with a time limit (`timed_`), dropping those
// that stopped running since.
void ControlPlane::EnforceTimeLimits(Time now, Txn& txn) {
  std::vector<int64_t> over;
  for (auto it = timed_.begin(); it != timed_.end();) {
    const JobRecord& j = jobs_.at(*it);
    if (j.state != JobState::kRunning) {
      it = timed_.erase(it);
      continue;
    }
    if (now - j.started > j.request.time_limit) over.push_back(j.id);
    ++it;
  }
  for (int64_t id : over) {
    (void)Finish(jobs_.at(id), JobState::kFailed, "TimeLimit", "ran past its time limit", txn);
  }
}

void ControlPlane::ChargeUsage(Time now) {
  if (usage_at_.value() > 0 && now > usage_at_) {
    const double dt = ToSeconds(now - usage_at_);
    const double decay = std::exp2(-dt / std::max(1.0, ToSeconds(options_.usage_half_life)));
    const sched::QueueTree& tree = sched_->queues();
    for (int32_t i = 0; i < tree.size(); ++i) {
      double& u = usage_[tree.spec(sched::QueueId(i)).name];
      u = u * decay + static_cast<double>(tree.used(sched::QueueId(i)).value()) * dt;
    }
  }
  usage_at_ = now;
}

std::pair<double, const char*> ControlPlane::JobPower(const JobRecord& job) const {
  double watts = 0;
  int64_t measured = 0, modelled = 0;
  for (const TaskView& t : job.tasks) {
    const std::optional<NodeId> n = topo_.FindNode(t.node);
    if (!n) continue;
    const GpuModel& m = topo_.node_model(*n);
    const NodeRecord& node = nodes_[n->value()];
    for (int gpu : t.gpus) {
      double w = -1;
      for (const GpuSample& g : node.gpu_samples) {
        if (node.alive && g.index == gpu) w = g.power_w;
      }
      w < 0 ? ++modelled : ++measured;
      watts += (w < 0 ? static_cast<double>(m.train_power.value()) : w) +
               static_cast<double>(m.host_power.value());
    }
  }
  return {watts, measured == 0 ? "model" : modelled == 0 ? "nvidia-smi" : "mixed"};
}

void ControlPlane::ChargeEnergy(Time now) {
  for (int64_t id : active_) {
    JobRecord& j = jobs_.at(id);
    if (j.tasks.empty() || (j.state != JobState::kRunning && j.state != JobState::kPreempting)) {
      continue;
    }
    const auto [watts, source] = JobPower(j);
    // At the last pass's rate; a run's first pass (or the first after a
    // restart of the server) has none yet and takes the current one.
    const double rate = j.power_watts > 0 ? j.power_watts : watts;
    const Time from = std::max(j.started, j.energy_to);
    if (from.value() > 0 && now > from) j.energy_joules += rate * ToSeconds(now - from);
    j.power_watts = watts;
    j.power_source = source;
    j.energy_to = now;
  }
}

void ControlPlane::WriteUsage(Time now, Txn& txn, bool force) {
  // Nothing used yet: nothing to keep.
  if (usage_.empty() || (!force && now - usage_written_ < Seconds(60))) return;
  Json by_queue = Json::object();
  for (const auto& [queue, gpu_seconds] : usage_) by_queue[queue] = gpu_seconds;
  txn.Put(UsageKey(), Json{{"at", usage_at_.value()}, {"gpuSeconds", by_queue}}.dump());
  usage_written_ = now;
}

void ControlPlane::RecoverUsage() {
  if (usage_at_.value() > 0) return;  // a rebuild: memory is newer
  std::optional<store::KeyValue> kv = store_.Get(UsageKey());
  if (!kv) return;
  const Json j = Json::parse(kv->value, nullptr, false);
  if (!j.is_object() || !j.value("at", Json()).is_number_integer() ||
      !j.value("gpuSeconds", Json()).is_object()) {
    log_.Warn("control", "store record /usage is not {at, gpuSeconds}: fair share starts afresh");
    return;
  }
  for (const auto& [queue, v] : j["gpuSeconds"].items()) {
    if (v.is_number() && v.get<double>() >= 0) usage_[queue] = v.get<double>();
  }
  usage_at_ = Time(j["at"].get<int64_t>());
}

Status ControlPlane::FlushUsage() {
  Txn txn;
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());
    const Time now = Now();
    ChargeUsage(now);
    WriteUsage(now, txn, /*force=*/true);
    if (txn.ops.empty()) return Status::Ok();
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  return SyncOrRebuild(rev);
}

void ControlPlane::RetryAfterBackoff(Time now, Txn& txn) {
  for (auto it = backoff_.begin(); it != backoff_.end();) {
    JobRecord& job = jobs_.at(*it);
    if (job.state != JobState::kPending || job.retry_at.value() == 0) {
      it = backoff_.erase(it);
      continue;
    }
    if (job.retry_at > now) {
      ++it;
      continue;
    }
    job.retry_at = Time(0);
    Result<sched::JobSpec> spec = ToSchedSpec(job.id, job.request);
    Status st = spec.ok() ? sched_->Submit(*spec, job.submitted, job.gpu_seconds) : spec.status();
    if (!st.ok()) {
      (void)Finish(job, JobState::kFailed, "Failed", "cannot restart: " + st.message(), txn);
    } else {
      PushMeasuredCosts(job);
      Write(job, "Requeued", "backoff over; queued to restart from " + ResumePoint(job), txn);
    }
    it = backoff_.erase(it);
  }
}

static std::string PreemptionWhy(const sched::PreemptJob& x) {
  return x.for_job.value() >= 0 ? "preempted for job " + std::to_string(x.for_job.value())
                                : "its node is being drained";
}

// A preempted run that was held (JobRecord::clearing) has no process to
// stop: it is stopped at once, and the earlier run's nodes still confirm.
void ControlPlane::StopHeldRun(JobRecord& job, const sched::PreemptJob& x, Time now, Txn& txn) {
  ++job.preemptions;
  metrics_.Add("unipool_preemptions_total", {{"queue", job.request.queue}});
  if (Status st = sched_->Stopped(JobId(job.id), now); !st.ok()) {
    log_.Error("control", "cannot stop a held run: " + st.message(), {{"job", job.id}});
    return;
  }
  job.state = JobState::kPending;
  EndRun(job, now);
  job.stopped_nodes.clear();
  Write(job, "Stopped",
        PreemptionWhy(x) + " before it started (it waited for its last run's nodes)", txn);
  dirty_ = true;
}

// An elastic continue job's new membership: the same run goes on, its
// processes re-form their group at the new size (the agents rewrite their
// rendezvous files; a node that left stops its processes, one that joined
// starts them). No work is lost: nothing restarts from the checkpoint.
void ControlPlane::ResizeInPlace(JobRecord& job, const sched::ResizeJob& x, Time now, Txn& txn) {
  AccountRun(job, now);
  job.tasks = ToTasks(x.placement);
  ++job.membership;
  job.master_port = PickMasterPort(job);  // a new store: the old one may linger
  const int64_t to = x.placement.gpus().value();
  std::string why = x.from.value() < to ? "grew" : "shrank";
  if (x.lost_node.valid()) {
    ++job.disruptions;
    why = "node " + topo_.node_name(x.lost_node) + " left; the others go on";
  }
  Write(job, "Resized",
        "from " + std::to_string(x.from.value()) + " to " + std::to_string(to) +
            " GPUs in place (" + why + ", membership " + std::to_string(job.membership) +
            "): no restart, no work lost",
        txn);
}

void ControlPlane::ApplyDecision(const sched::Decision& d, Time now, Txn& txn) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, sched::CordonNode>) {
          NodeRecord& n = nodes_[x.node.value()];
          n.admin = "flaky";
          n.why = x.why;
          n.state = NodeState::kFlaky;
          WriteNode(n, txn);
          log_.Warn("control", "node cordoned: " + x.why, {{"node", n.name}});
          return;
        } else {
          auto it = jobs_.find(x.job.value());
          if (it == jobs_.end()) return;
          JobRecord& job = it->second;
          if constexpr (std::is_same_v<T, sched::StartJob>) {
            if (job.generation == 0) {
              metrics_.Observe("unipool_job_wait_seconds", {{"queue", job.request.queue}},
                               ToSeconds(now - job.submitted));
            }
            job.state = JobState::kRunning;
            job.stopped_nodes.clear();
            EndRun(job, now);
            job.tasks = ToTasks(x.placement);
            job.started = now;  // (last_checkpoint stays: the one this run resumes from)
            ++job.generation;
            job.membership = 0;
            job.master_port = PickMasterPort(job);
            if (job.request.time_limit.value() > 0) timed_.insert(job.id);
            Write(job, "Started", DescribePlacement(topo_, x.placement) + ShapeNote(job), txn);
          } else if constexpr (std::is_same_v<T, sched::ResizeJob>) {
            if (x.in_place) return ResizeInPlace(job, x, now, txn);
            AwaitOldRun(job, "");
            EndRun(job, now);
            job.tasks = ToTasks(x.placement);
            ++job.generation;
            job.master_port = PickMasterPort(job);
            Write(job, "Resized",
                  "from " + std::to_string(x.from.value()) + " to " +
                      std::to_string(x.placement.gpus().value()) + " GPUs",
                  txn);
          } else if constexpr (std::is_same_v<T, sched::PreemptJob>) {
            if (!job.clearing.empty()) {  // held: this run never started anywhere
              StopHeldRun(job, x, now, txn);
              return;
            }
            job.state = JobState::kPreempting;
            job.preempt_deadline = x.deadline;
            ++job.preemptions;
            // Its lost work is counted when it stops: a checkpoint written
            // in its grace saves what it did until then.
            metrics_.Add("unipool_preemptions_total", {{"queue", job.request.queue}});
            const std::string why = PreemptionWhy(x);
            Write(job, "Preempted", why + "; checkpoint and stop by " + FormatTime(x.deadline),
                  txn);
          } else if constexpr (std::is_same_v<T, sched::RequeueJob>) {
            AwaitOldRun(job, "");  // (a lost node is no longer alive: fenced)
            job.state = JobState::kPending;
            EndRun(job, now);
            job.lost_gpu_seconds += x.lost_gpu_seconds;
            // A lost node is a disruption, not the job's failure: it does
            // not count against maxRestarts (Kubernetes' pod failure policy).
            if (x.failed_node.value() >= 0) ++job.disruptions;
            std::string why = !x.why.empty() ? x.why
                              : x.failed_node.value() >= 0
                                  ? "node " + topo_.node_name(x.failed_node) +
                                        " lost (no heartbeat within the lease: the node or its "
                                        "agent died, or the network cut it off)"
                              : job.message.empty() ? "stopped"
                                                    : job.message;
            Write(job, "Requeued", why + "; resumes from " + ResumePoint(job), txn);
          } else if constexpr (std::is_same_v<T, sched::FailJob>) {
            job.state = JobState::kFailed;
            job.finished = now;
            Deactivate(job);
            Write(job, "Failed", x.why, txn);
          }
        }
      },
      d);
}

Status ControlPlane::Reconcile() {
  const auto t0 = std::chrono::steady_clock::now();
  int64_t rev = 0;
  size_t decisions = 0;
  {
    std::lock_guard lock(mu_);
    // Read-only (a failed write): nothing is decided that could not be
    // kept; agents keep their leases in memory meanwhile.
    if (!WritableLocked().ok()) return Status::Ok();
    dirty_ = false;
    const Time now = Now();
    Txn txn;
    ExpireLeases(now, txn);
    ReleaseLostNodes(txn);
    DecidePeerFailures(now, txn);
    ReportClockSkew(txn);
    EnforceTimeLimits(now, txn);
    ChargeUsage(now);
    ChargeEnergy(now);
    WriteUsage(now, txn);
    RetryAfterBackoff(now, txn);
    const std::vector<sched::Decision> out = sched_->Schedule(now);
    decisions = out.size();
    for (const sched::Decision& d : out) ApplyDecision(d, now, txn);
    if (!txn.ops.empty()) {
      Result<int64_t> r = ApplyLocked(txn);
      if (!r.ok()) return store::IsFailure(r.status()) ? Status::Ok() : r.status();
      rev = *r;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  metrics_.Observe("unipool_scheduling_cycle_seconds", {}, secs);
  if (decisions > 0) {
    metrics_.Observe("unipool_scheduling_decision_seconds", {}, secs / decisions);
    metrics_.Add("unipool_scheduling_decisions_total", {}, static_cast<double>(decisions));
  }
  if (rev == 0) return Status::Ok();
  if (Status st = SyncOrRebuild(rev); !st.ok() && !store::IsFailure(st)) return st;
  return Status::Ok();  // a failed write made the store read-only: keep serving reads
}

// A node's GPUs' own readings from its last heartbeat (none from virtual
// GPUs): one sample per GPU and reading it gives.
void ControlPlane::SetGpuGauges(const NodeRecord& n) {
  constexpr double kMiB = 1 << 20;
  for (const GpuSample& g : n.gpu_samples) {
    const Labels l = {{"node", n.name}, {"gpu", std::to_string(g.index)}};
    for (auto [metric, v] :
         {std::pair{"unipool_gpu_utilization_ratio", g.utilization < 0 ? -1 : g.utilization / 100},
          {"unipool_gpu_memory_used_bytes", g.memory_used_mib < 0 ? -1 : g.memory_used_mib * kMiB},
          {"unipool_gpu_memory_total_bytes",
           g.memory_total_mib < 0 ? -1 : g.memory_total_mib * kMiB},
          {"unipool_gpu_temperature_celsius", g.temperature_c},
          {"unipool_gpu_power_watts", g.power_w},
          {"unipool_gpu_ecc_uncorrected_errors", static_cast<double>(g.ecc_uncorrected)}}) {
      if (v >= 0) metrics_.Set(metric, l, v);
    }
  }
  for (const GpuXidCount& x : n.gpu_xids) {
    metrics_.Set("unipool_gpu_xid_errors_total",
                 {{"node", n.name},
                  {"gpu", x.gpu < 0 ? "unknown" : std::to_string(x.gpu)},
                  {"xid", std::to_string(x.xid)}},
                 static_cast<double>(x.count));
  }
}

// The cluster's IT power by the power model, and each capped power
// domain's draw and cap (the scheduler keeps the one under the other).
void ControlPlane::SetPowerGauges() {
  const sched::PowerBudget& power = sched_->power();
  metrics_.Set("unipool_power_it_watts", {{"source", "model"}},
               static_cast<double>(power.draw().value()));
  for (const sched::PowerBudget::Domain& d : power.Domains()) {
    const Labels l = {{"tier", topo_.tier(d.tier).name},
                      {"group", topo_.group_name(d.tier, d.group)}};
    metrics_.Set("unipool_power_domain_watts", l, static_cast<double>(d.draw.value()));
    metrics_.Set("unipool_power_domain_cap_watts", l, static_cast<double>(d.cap.value()));
  }
}

void ControlPlane::UpdateGauges() {
  metrics_.Set("unipool_store_read_only", {}, store_.Writable().ok() ? 0 : 1);
  const Summary s = GetSummary();
  std::vector<QueueRecord> queues = Queues(Scope{});
  std::lock_guard lock(mu_);
  for (const char* g : {"unipool_gpus",
                        "unipool_jobs",
                        "unipool_queue_pending_gpus",
                        "unipool_queue_used_gpus",
                        "unipool_queue_guarantee_gpus",
                        "unipool_queue_limit_gpus",
                        "unipool_nodes",
                        "unipool_largest_free_block_gpus",
                        "unipool_node_gpus",
                        "unipool_node_state",
                        "unipool_node_clock_offset_seconds",
                        "unipool_gpu_utilization_ratio",
                        "unipool_gpu_memory_used_bytes",
                        "unipool_gpu_memory_total_bytes",
                        "unipool_gpu_temperature_celsius",
                        "unipool_gpu_power_watts",
                        "unipool_gpu_ecc_uncorrected_errors",
                        "unipool_gpu_xid_errors_total",
                        "unipool_job_power_watts",
                        "unipool_job_energy_joules",
                        "unipool_job_checkpoint_seconds",
                        "unipool_job_checkpoint_bytes",
                        "unipool_job_startup_seconds",
                        "unipool_job_straggler_ratio",
                        "unipool_job_host_memory_bytes",
                        "unipool_power_domain_watts",
                        "unipool_power_domain_cap_watts"}) {
    metrics_.Reset(g);
  }
  // GPUs and nodes by partition and state; per node on clusters of at most
  // node_metrics_max nodes.
  const std::vector<NodeUsage> usage = UsageLocked();
  const bool per_node = topo_.num_nodes() <= options_.node_metrics_max;
  std::map<std::pair<std::string, std::string>, int64_t> gpus, nodes;
  for (int32_t i = 0; i < topo_.num_nodes(); ++i) {
    const NodeRecord& n = nodes_[i];
    const int64_t used = usage[i].allocated, free = usage[i].free;
    gpus[{n.partition, "allocated"}] += used;
    gpus[{n.partition, "free"}] += free;
    gpus[{n.partition, "unavailable"}] += n.gpus - used - free;
    nodes[{n.partition, NodeStateName(n.state)}]++;
    if (!per_node) continue;
    for (auto [state, v] :
         {std::pair{"allocated", used}, {"free", free}, {"unavailable", n.gpus - used - free}}) {
      metrics_.Set("unipool_node_gpus", {{"node", n.name}, {"state", state}},
                   static_cast<double>(v));
    }
    for (int st = 0; st <= static_cast<int>(NodeState::kDown); ++st) {
      const char* name = NodeStateName(static_cast<NodeState>(st));
      metrics_.Set("unipool_node_state", {{"node", n.name}, {"state", name}},
                   n.state == static_cast<NodeState>(st) ? 1 : 0);
    }
    if (n.alive) SetGpuGauges(n);
    if (n.alive && !std::isnan(n.clock_offset_s)) {
      metrics_.Set("unipool_node_clock_offset_seconds", {{"node", n.name}}, n.clock_offset_s);
    }
  }
  for (const auto& [key, v] : gpus) {
    metrics_.Set("unipool_gpus", {{"partition", key.first}, {"state", key.second}},
                 static_cast<double>(v));
  }
  for (const auto& [key, v] : nodes) {
    metrics_.Set("unipool_nodes", {{"partition", key.first}, {"state", key.second}},
                 static_cast<double>(v));
  }
  // The largest free block at each tier: what a gang confined to one group
  // of that tier can get now.
  for (int t = 0; t < topo_.num_tiers(); ++t) {
    metrics_.Set("unipool_largest_free_block_gpus", {{"tier", topo_.tier(t).name}},
                 static_cast<double>(sched_->pool().MaxFree(topo_.top_tier(), GroupId(0), t + 1)));
  }
  std::map<std::pair<std::string, std::string>, int64_t> jobs;
  for (const auto& [id, j] : jobs_) jobs[{j.request.queue, JobStateName(j.state)}]++;
  for (const auto& [key, v] : jobs) {
    metrics_.Set("unipool_jobs", {{"queue", key.first}, {"state", key.second}},
                 static_cast<double>(v));
  }
  // Counters start at 0 for every label set that exists, so that rates and
  // alerts see them before the first event (Prometheus' advice).
  metrics_.Add("unipool_store_write_failures_total", {}, 0);
  for (const auto& [key, v] : nodes) {
    metrics_.Add("unipool_node_failures_total", {{"partition", key.first}}, 0);
    metrics_.Add("unipool_heartbeats_missed_total", {{"partition", key.first}}, 0);
  }
  for (const QueueRecord& q : queues) {
    const Labels l = {{"queue", q.spec.name}};
    for (const char* counter : {"unipool_jobs_submitted_total", "unipool_preemptions_total",
                                "unipool_preempted_gpu_seconds_total"}) {
      metrics_.Add(counter, l, 0);
    }
    metrics_.Set("unipool_queue_pending_gpus", l, static_cast<double>(q.pending_gpus.value()));
    metrics_.Set("unipool_queue_used_gpus", l, static_cast<double>(q.used.value()));
    metrics_.Set("unipool_queue_guarantee_gpus", l, static_cast<double>(q.spec.guarantee.value()));
    metrics_.Set("unipool_queue_limit_gpus", l, static_cast<double>(q.spec.limit.value()));
  }
  metrics_.Set("unipool_store_revision", {}, static_cast<double>(s.revision));
  SetPowerGauges();
  // The framework layer: what running jobs report of themselves.
  static const std::pair<const char*, const char*> kProgress[] = {
      {"step", "unipool_job_step"},
      {"loss", "unipool_job_loss"},
      {"throughput", "unipool_job_throughput"},
      {"gradNorm", "unipool_job_grad_norm"}};
  for (int64_t id : active_) {
    const JobRecord& j = jobs_.at(id);
    if (j.state != JobState::kRunning) continue;
    const Labels l = {
        {"job", std::to_string(id)}, {"name", j.request.name}, {"queue", j.request.queue}};
    metrics_.Set("unipool_job_restarts", l, j.restarts);
    metrics_.Set("unipool_job_energy_joules", l, j.energy_joules);
    if (j.checkpoint_seconds > 0)
      metrics_.Set("unipool_job_checkpoint_seconds", l, j.checkpoint_seconds);
    if (j.checkpoint_bytes > 0) {
      metrics_.Set("unipool_job_checkpoint_bytes", l, static_cast<double>(j.checkpoint_bytes));
    }
    if (j.startup_seconds > 0) metrics_.Set("unipool_job_startup_seconds", l, j.startup_seconds);
    if (!j.power_source.empty()) {
      Labels ls = l;
      ls.emplace_back("source", j.power_source);
      metrics_.Set("unipool_job_power_watts", ls, j.power_watts);
    }
    if (auto w = signals_.find(id); w != signals_.end() && w->second.generation == j.generation) {
      double worst = 0;
      for (const auto& [rank, r] : w->second.window.ranks()) {
        const Duration median = w->second.window.MedianBusyExcept(rank);
        if (median.value() > 0) {
          worst = std::max(worst, static_cast<double>(r.busy.value()) / median.value());
        }
      }
      if (worst > 0) metrics_.Set("unipool_job_straggler_ratio", l, worst);
      int64_t rss = 0;
      for (const auto& [rank, r] : w->second.window.ranks())
        rss += std::max<int64_t>(0, r.rss.value());
      if (rss > 0) metrics_.Set("unipool_job_host_memory_bytes", l, static_cast<double>(rss));
    }
    if (j.progress.empty()) continue;
    const Json p = Json::parse(j.progress, nullptr, false);
    for (const auto& [field, metric] : kProgress) {
      if (p.is_object() && p.contains(field) && p[field].is_number()) {
        metrics_.Set(metric, l, p[field].get<double>());
      }
    }
  }
}

void ControlPlane::DeclareMetrics(Metrics& m) {
  using T = Metrics::Type;
  m.Declare("unipool_store_read_only", T::kGauge,
            "1 while the store refuses writes after a failed one (full or broken disk).");
  m.Declare("unipool_store_write_failures_total", T::kCounter,
            "Store writes that failed and were undone (memory rebuilt from the durable state).");
  m.Declare("unipool_gpus", T::kGauge,
            "GPUs by partition and state (allocated, free, unavailable).");
  m.Declare("unipool_nodes", T::kGauge, "Nodes by partition and state.");
  m.Declare("unipool_largest_free_block_gpus", T::kGauge,
            "Most free GPUs inside one group of the tier.");
  m.Declare("unipool_jobs", T::kGauge, "Jobs by queue and state.");
  m.Declare("unipool_queue_pending_gpus", T::kGauge, "GPUs asked for by pending jobs.");
  m.Declare("unipool_queue_used_gpus", T::kGauge, "GPUs held by the queue's running jobs.");
  m.Declare("unipool_queue_guarantee_gpus", T::kGauge, "The queue's guaranteed GPUs (0: none).");
  m.Declare("unipool_queue_limit_gpus", T::kGauge, "The queue's GPU limit (0: none).");
  m.Declare("unipool_store_revision", T::kGauge, "The store's current revision.");
  m.Declare("unipool_job_step", T::kGauge, "A running job's last reported training step.");
  m.Declare("unipool_job_loss", T::kGauge, "A running job's last reported loss.");
  m.Declare("unipool_job_throughput", T::kGauge,
            "A running job's last reported throughput (its unit, e.g. samples/s).");
  m.Declare("unipool_job_grad_norm", T::kGauge, "A running job's last reported gradient norm.");
  m.Declare("unipool_job_restarts", T::kGauge, "A running job's restarts after failures.");
  m.Declare("unipool_job_straggler_ratio", T::kGauge,
            "A running job's slowest rank: its busy time per step (step less communication) "
            "over the median of the other ranks' (1: even; see Straggler events).");
  m.Declare("unipool_job_host_memory_bytes", T::kGauge,
            "A running job's resident host memory: its ranks' process trees' RSS, summed, as "
            "its agents read it (see MemoryGrowth events).");
  m.Declare("unipool_training_anomalies_total", T::kCounter,
            "Training anomalies found in running jobs' reports, by kind: Straggler, "
            "DataStraggler, NonFiniteLoss, GradientSpike, MemoryGrowth, CommTimeout, "
            "ClockSkew.");
  m.Declare(
      "unipool_job_power_watts", T::kGauge,
      "A running job's IT power: its GPUs' nvidia-smi power draw where its nodes report it "
      "(source nvidia-smi), the power model otherwise (model), plus the host's share per GPU.");
  m.Declare("unipool_job_energy_joules", T::kGauge,
            "IT energy a running job's runs have drawn so far (its power integrated).");
  m.Declare("unipool_job_checkpoint_seconds", T::kGauge,
            "How long a running job's last checkpoint took to write, as the job reported it.");
  m.Declare("unipool_job_checkpoint_bytes", T::kGauge,
            "The size of a running job's last checkpoint (reported, else measured on disk by "
            "the agent).");
  m.Declare("unipool_job_startup_seconds", T::kGauge,
            "A running job's last start-up: from its run's start to its first progress report.");
  m.Declare("unipool_power_it_watts", T::kGauge,
            "IT power the cluster draws by the power model: idle + host W of every GPU, plus "
            "train - idle W per allocated GPU.");
  m.Declare("unipool_power_domain_watts", T::kGauge,
            "A capped power domain's IT draw by the power model (spec.power.caps).");
  m.Declare("unipool_power_domain_cap_watts", T::kGauge,
            "A power domain's cap (spec.power.caps); no work starts that would exceed it.");
  m.Declare("unipool_jobs_submitted_total", T::kCounter, "Jobs submitted.");
  m.Declare("unipool_jobs_finished_total", T::kCounter, "Jobs ended, by final state.");
  m.Declare("unipool_jobs_archived_total", T::kCounter,
            "Ended jobs moved from the store to the history (--history-retention after they "
            "ended).");
  m.Declare("unipool_history_failures_total", T::kCounter,
            "Rounds in which ended jobs could not be written to the history (retried).");
  m.Declare("unipool_preemptions_total", T::kCounter, "Jobs preempted.");
  m.Declare("unipool_preempted_gpu_seconds_total", T::kCounter,
            "Work lost to preemptions: GPU-seconds since the victims' last checkpoints.");
  m.Declare("unipool_node_failures_total", T::kCounter, "Nodes that went down.");
  m.Declare("unipool_heartbeats_missed_total", T::kCounter,
            "Nodes that stopped responding (silent for a third of the lease).");
  m.Declare("unipool_scheduling_decisions_total", T::kCounter, "Scheduling decisions made.");
  m.Declare("unipool_scheduling_cycle_seconds", T::kHistogram, "Time of one reconcile pass.",
            Metrics::LatencyBuckets());
  m.Declare("unipool_scheduling_decision_seconds", T::kHistogram,
            "Reconcile time per decision made.", Metrics::LatencyBuckets());
  m.Declare("unipool_job_wait_seconds", T::kHistogram,
            "Time from submission to a job's first start, by queue.", Metrics::JobBuckets());
  m.Declare("unipool_job_run_seconds", T::kHistogram,
            "Time from a job's last start to its end, by queue and final state.",
            Metrics::JobBuckets());
  m.Declare("unipool_node_gpus", T::kGauge,
            "A node's GPUs by state: allocated, free (placeable) or unavailable (down, cordoned, "
            "unhealthy); off past --node-metrics-max nodes.");
  m.Declare("unipool_gpu_utilization_ratio", T::kGauge,
            "A GPU's utilization (0 to 1) from nvidia-smi on its node, by node and gpu index.");
  m.Declare("unipool_gpu_memory_used_bytes", T::kGauge, "A GPU's memory in use (nvidia-smi).");
  m.Declare("unipool_gpu_memory_total_bytes", T::kGauge, "A GPU's memory (nvidia-smi).");
  m.Declare("unipool_gpu_temperature_celsius", T::kGauge, "A GPU's temperature (nvidia-smi).");
  m.Declare("unipool_gpu_power_watts", T::kGauge, "A GPU's power draw (nvidia-smi).");
  m.Declare("unipool_gpu_ecc_uncorrected_errors", T::kGauge,
            "A GPU's volatile uncorrected ECC errors (nvidia-smi); the node is drained when > 0.");
  m.Declare("unipool_gpu_xid_errors_total", T::kCounter,
            "Xid errors the GPU driver logged for a GPU since its node's agent started, by xid "
            "code; one that needs a GPU reset (48, 79, 95...) drains the node.");
  m.Declare("unipool_node_clock_offset_seconds", T::kGauge,
            "The node's clock minus the server's, as its agent measures it at each heartbeat.");
  m.Declare("unipool_node_state", T::kGauge,
            "1 for the node's scheduling state (up, cordoned, drained, flaky, down), like "
            "kube-state-metrics' node conditions.");
}

}  // namespace unipool::server
