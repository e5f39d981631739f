// ControlPlane, jobs: submit (with the queue's limits), read, cancel, and
// the agents' reports.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "io/quote.h"
#include "io/text.h"
#include "server/control.h"
#include "server/control_internal.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

// ---- Jobs ------------------------------------------------------------------

void ControlPlane::Activate(const JobRecord& job) {
  if (active_.insert(job.id).second) ++active_by_queue_[job.request.queue];
}

void ControlPlane::Deactivate(const JobRecord& job) {
  if (active_.erase(job.id) > 0) --active_by_queue_[job.request.queue];
  clearing_.erase(job.id);  // it runs no more: nothing to wait for
  ended_.emplace(job.finished.value(), job.id);
}

void ControlPlane::AwaitOldRun(JobRecord& job, const std::string& confirmed, bool skip_lost) {
  if (options_.assume_nodes_up) return;  // no agents: the reports are all there is
  for (const TaskView& t : job.tasks) {
    if (t.node == confirmed || job.stopped_nodes.contains(t.node)) continue;
    auto n = topo_.FindNode(t.node);
    if (skip_lost && (!n || !nodes_[n->value()].alive)) continue;  // fenced by its lease
    int64_t& g = job.clearing[t.node];
    g = std::max(g, job.generation);
  }
  if (!job.clearing.empty()) clearing_.insert(job.id);
}

void ControlPlane::ReleaseLostNodes(Txn& txn) {
  for (auto it = clearing_.begin(); it != clearing_.end();) {
    JobRecord& job = jobs_.at(*it++);  // (advanced first: the entry may be erased)
    const size_t before = job.clearing.size();
    std::erase_if(job.clearing, [&](const auto& e) {
      auto n = topo_.FindNode(e.first);
      return !n || !nodes_[n->value()].alive;  // lost (fenced), or gone from the cluster
    });
    if (job.clearing.size() == before) continue;
    if (job.clearing.empty()) clearing_.erase(job.id);
    txn.Put(JobKey(job.id), JobToJson(job).dump());
  }
}

Status ControlPlane::CheckLimits(const std::string& queue, const std::string& owner,
                                 size_t spec_bytes, Time now) {
  auto it = limits_.find(queue);
  const SubmitLimits limits = it == limits_.end() ? SubmitLimits{} : it->second;
  if (static_cast<int64_t>(spec_bytes) > limits.max_spec_bytes) {
    return ResourceExhausted("spec: " + std::to_string(spec_bytes) + " bytes; queue " + queue +
                             " takes specs of at most " + std::to_string(limits.max_spec_bytes) +
                             " (maxSpecBytes)");
  }
  if (active_by_queue_[queue] >= limits.max_jobs) {
    return ResourceExhausted("queue " + queue + " holds " + std::to_string(limits.max_jobs) +
                             " unfinished jobs (maxJobs); retry when some end, or cancel some");
  }
  // A token bucket per submitter: `submits_per_minute`, bursts of a tenth.
  const double rate = static_cast<double>(limits.submits_per_minute) / 60.0;
  const double burst = std::max(1.0, static_cast<double>(limits.submits_per_minute) / 10.0);
  Bucket& b = buckets_[queue + "\n" + owner];
  if (b.at.value() == 0) b.tokens = burst;
  b.tokens = std::min(burst, b.tokens + rate * ToSeconds(now - b.at));
  b.at = now;
  if (b.tokens < 1.0) {
    const int64_t wait = rate > 0 ? static_cast<int64_t>(std::ceil((1.0 - b.tokens) / rate)) : 60;
    return ResourceExhausted(owner + " submits to queue " + queue + " faster than " +
                             std::to_string(limits.submits_per_minute) +
                             " a minute (maxSubmitsPerMinute); retry in " + std::to_string(wait) +
                             " s");
  }
  b.tokens -= 1.0;
  return Status::Ok();
}

RunIdentity ControlPlane::IdentityOf(const std::string& queue, const Submitter& by) const {
  auto it = limits_.find(queue);
  const SubmitLimits limits = it == limits_.end() ? SubmitLimits{} : it->second;
  RunIdentity id;
  id.tenant = by.tenant;
  id.run_as = by.run_as;
  if (by.tenant && id.run_as.empty()) id.run_as = limits.run_as;
  id.allow_root = limits.allow_root;
  return id;
}

Result<JobRecord> ControlPlane::Submit(const io::JobRequest& in, const Submitter& by) {
  const std::string& owner = by.owner;
  io::JobRequest request = in;
  if (request.exclusive && request.gpus_per_node == 0) request.gpus_per_node = NodeShare(request);
  int64_t rev = 0;
  JobRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    const int64_t id = next_id_;
    Result<sched::JobSpec> spec = ToSchedSpec(id, request);
    if (!spec.ok()) return spec.status();
    const Time now = Now();
    if (by.tenant) UNIPOOL_RETURN_IF_ERROR(CheckLimits(request.queue, owner, by.spec_bytes, now));
    if (auto l = limits_.find(request.queue); l != limits_.end() && l->second.reject_infeasible) {
      if (std::optional<std::string> why = sched_->WhyNever(*spec)) {
        return FailedPrecondition("spec: can never run: " + *why + " (queue " + request.queue +
                                  " refuses such jobs: rejectInfeasible)");
      }
    }
    UNIPOOL_RETURN_IF_ERROR(sched_->Submit(*spec, now));
    ++next_id_;
    JobRecord& job = jobs_[id];
    job.id = id;
    job.request = request;
    job.owner = owner;
    job.identity = IdentityOf(request.queue, by);
    job.submitted = now;
    Activate(job);
    Txn txn;
    txn.Put(kNextIdKey, std::to_string(next_id_));
    if (!request.secret_env.empty()) txn.Put(SecretKey(id), SecretsToJson(request).dump());
    Write(job, "Submitted",
          "submitted by " + owner + " to queue " + request.queue + ": " +
              io::Count(request.gpus, "GPU"),
          txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    copy = job;
    dirty_ = true;
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  metrics_.Add("unipool_jobs_submitted_total", {{"queue", request.queue}});
  return copy;
}

Status ControlPlane::Validate(const io::JobRequest& in) const {
  io::JobRequest request = in;
  if (request.exclusive && request.gpus_per_node == 0) request.gpus_per_node = NodeShare(request);
  std::lock_guard lock(mu_);
  Result<sched::JobSpec> spec = ToSchedSpec(next_id_, request);
  if (!spec.ok()) return spec.status();
  if (std::optional<std::string> why = sched_->WhyNever(*spec)) {
    return FailedPrecondition("spec: can never run: " + *why);
  }
  return Status::Ok();
}

Result<JobRecord> ControlPlane::Get(int64_t id, const Scope& scope) const {
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      if (!scope.Sees(it->second.request.queue)) return NoSuchJob(id);
      return it->second;
    }
  }
  return FromHistory(id, scope, nullptr);  // (archived before it left memory)
}

// About the bytes a job's JSON takes: its strings plus a fixed part.
static size_t ApproxBytes(const JobRecord& j) {
  const io::JobRequest& r = j.request;
  size_t n = 1024 + r.name.size() + r.checkpoint_dir.size() + r.working_dir.size() +
             r.image.size() + j.message.size() + j.progress.size();
  for (const auto& [k, v] : r.labels) n += k.size() + v.size() + 8;
  for (const auto& [k, v] : r.env) n += k.size() + v.size() + 8;
  for (const std::string& s : r.command) n += s.size() + 4;
  for (const std::string& s : r.args) n += s.size() + 4;
  for (const std::string& s : r.volumes) n += s.size() + 4;
  return n;
}

std::vector<JobRecord> ControlPlane::List(const JobFilter& f, const Scope& scope,
                                          bool* more) const {
  std::vector<JobRecord> out = ListLive(f, scope, more);
  ListArchived(f, scope, out, more);
  return out;
}

std::vector<JobRecord> ControlPlane::ListLive(const JobFilter& f, const Scope& scope,
                                              bool* more) const {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  size_t bytes = 0;
  auto it = f.before > 0 ? jobs_.lower_bound(f.before) : jobs_.end();
  if (more) *more = false;
  while (it != jobs_.begin()) {
    if (out.size() >= static_cast<size_t>(f.limit) || (f.max_bytes > 0 && bytes >= f.max_bytes)) {
      if (more) *more = true;
      break;
    }
    --it;
    const JobRecord& j = it->second;
    if (!scope.Sees(j.request.queue)) continue;
    if (f.state && j.state != *f.state) continue;
    if (!f.queue.empty() && j.request.queue != f.queue) continue;
    if (f.since.value() > 0 && Terminal(j.state) && j.finished < f.since) continue;
    if (!HasLabels(j, f)) continue;
    out.push_back(j);
    bytes += ApproxBytes(j);
  }
  return out;
}

Result<std::vector<JobEvent>> ControlPlane::Events(int64_t id, const Scope& scope) const {
  std::vector<JobEvent> out;
  bool live = false;
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      if (!scope.Sees(it->second.request.queue)) return NoSuchJob(id);
      live = true;
    }
  }
  if (!live) {
    std::string events;
    UNIPOOL_RETURN_IF_ERROR(FromHistory(id, scope, &events).status());
    Json all = Json::parse(events, nullptr, false);
    for (const Json& j : all.is_array() ? all : Json::array()) {
      Result<JobEvent> e = EventFromJson(j);
      if (e.ok()) out.push_back(*e);
    }
    return out;
  }
  for (const store::KeyValue& kv : store_.Range(EventKey(id, 0).substr(0, 21))) {
    Result<JobEvent> e = EventFromJson(Json::parse(kv.value, nullptr, false));
    if (e.ok()) out.push_back(*e);
  }
  return out;
}

Result<std::string> ControlPlane::Explain(int64_t id, const Scope& scope) const {
  std::unique_lock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    lock.unlock();
    Result<JobRecord> archived = FromHistory(id, scope, nullptr);
    if (!archived.ok()) return archived.status();
    return archived->message;
  }
  const JobRecord& job = it->second;
  if (!scope.Sees(job.request.queue)) return NoSuchJob(id);
  if (Terminal(job.state)) return std::string(job.message);
  if (job.state == JobState::kPending && job.retry_at.value() > 0) {
    return "pending: restarting after a failure; queued again at " + FormatTime(job.retry_at) +
           " (backoff)";
  }
  return sched_->Explain(JobId(id));
}

void ControlPlane::RecordProgress(int64_t id, Time now, const std::string& data) {
  const Json d = Json::parse(data, nullptr, false);
  if (!d.is_object()) return;
  auto num = [&](const char* key) {
    return d.contains(key) && d[key].is_number() ? d[key].get<double>() : std::nan("");
  };
  std::vector<ProgressPoint>& points = progress_[id];
  if (points.size() >= kProgressPoints) {  // keep every other one
    size_t kept = 0;
    for (size_t i = 0; i < points.size(); i += 2) points[kept++] = points[i];
    points.resize(kept);
  }
  points.push_back({now, num("step"), num("loss"), num("throughput"), num("gradNorm")});
}

Result<std::vector<ControlPlane::ProgressPoint>> ControlPlane::Progress(
    int64_t id, const Scope& scope) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !scope.Sees(it->second.request.queue)) return NoSuchJob(id);
  auto p = progress_.find(id);
  return p == progress_.end() ? std::vector<ProgressPoint>{} : p->second;
}

std::map<int64_t, ControlPlane::PendingView> ControlPlane::Pending(
    const std::vector<int64_t>& ids) const {
  std::map<int64_t, PendingView> out;
  std::lock_guard lock(mu_);
  for (int64_t id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.state != JobState::kPending) continue;
    if (it->second.retry_at.value() > 0) {
      out[id] = PendingView{"Backoff", Time(-1)};
    } else if (const sched::JobInfo* info = sched_->Find(JobId(id))) {
      out[id] = PendingView{sched::Scheduler::ReasonCode(info->reason),
                            sched::Scheduler::EstimatedStart(info->reason)};
    }
  }
  return out;
}

Status ControlPlane::Finish(JobRecord& job, JobState state, const std::string& type,
                            const std::string& message, Txn& txn) {
  if (!Terminal(job.state)) {
    Status st = job.state == JobState::kPending ? sched_->Cancel(JobId(job.id), Now())
                                                : sched_->Finish(JobId(job.id), Now());
    if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  }
  job.state = state;
  job.finished = Now();
  AccountRun(job, job.finished);
  job.clearing.clear();  // it runs no more: nothing waits
  Deactivate(job);
  signals_.erase(job.id);
  Write(job, type, message, txn);
  metrics_.Add("unipool_jobs_finished_total",
               {{"queue", job.request.queue}, {"state", JobStateName(state)}});
  if (job.started.value() > 0) {
    metrics_.Observe("unipool_job_run_seconds",
                     {{"queue", job.request.queue}, {"state", JobStateName(state)}},
                     ToSeconds(job.finished - job.started));
  }
  dirty_ = true;
  return Status::Ok();
}

Result<JobRecord> ControlPlane::Cancel(int64_t id, const Scope& scope) {
  int64_t rev = 0;
  JobRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !scope.Sees(it->second.request.queue)) return NoSuchJob(id);
    JobRecord& job = it->second;
    if (Terminal(job.state)) {
      return FailedPrecondition("job " + std::to_string(id) + " already ended (" +
                                JobStateName(job.state) + ")");
    }
    Txn txn;
    UNIPOOL_RETURN_IF_ERROR(Finish(job, JobState::kCancelled, "Cancelled", "cancelled", txn));
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    copy = job;
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return copy;
}

// The job's own failure: restarted from its checkpoint after the backoff,
// or Failed when its restarts are spent.
Status ControlPlane::FailRunLocked(JobRecord& job, const std::string& node, const std::string& why,
                                   const std::string& event, Time now, Txn& txn) {
  job.peer_failure_generation = 0;
  if (job.restarts >= job.request.restart.max_restarts) {
    return Finish(job, JobState::kFailed, "Failed",
                  "failed after " + std::to_string(job.restarts) + " restarts: " + why, txn);
  }
  // Out of the scheduler until the backoff ends, then queued again with
  // its first submit time (it keeps its place).
  UNIPOOL_RETURN_IF_ERROR(sched_->Finish(JobId(job.id), now));
  AwaitOldRun(job, node);
  ++job.restarts;
  // Doubled per restart, capped at a day (no overflow for any spec).
  const int64_t base =
      std::min<int64_t>(job.request.restart.backoff.value(), Seconds(86400).value());
  const Duration backoff =
      Duration(std::min<int64_t>(base << std::min(job.restarts - 1, 10), Seconds(86400).value()));
  job.state = JobState::kPending;
  job.retry_at = now + backoff;
  backoff_.insert(job.id);
  Write(job, event,
        why + "; restart " + std::to_string(job.restarts) + " of " +
            std::to_string(job.request.restart.max_restarts) + " in " +
            std::to_string(backoff.value() / 1000000000) + "s from its checkpoint",
        txn);
  return Status::Ok();
}

// A process of a gang on several nodes failed because a peer went away
// (the agent read it in its log): if that peer's node is being lost, the
// run ends as a disruption, not as the job's failure. The decision waits
// half a lease (DecidePeerFailures); a failure of the job's own, from any
// node, is charged at once meanwhile.
bool ControlPlane::PeerLostLocked(JobRecord& job, const std::string& node, const std::string& why,
                                  const std::string& data, Time now) {
  const Json d = Json::parse(data, nullptr, false);
  if (!d.is_object() || !d.value("peerLost", false) || job.state != JobState::kRunning) {
    return false;
  }
  std::set<std::string> nodes;
  for (const TaskView& t : job.tasks) nodes.insert(t.node);
  if (nodes.size() < 2) return false;
  if (job.peer_failure_generation != job.generation) {
    job.peer_failure_generation = job.generation;
    job.peer_failure_at = now;
    job.peer_failure_why = why;
    job.peer_failure_node = node;
    peer_failures_.insert(job.id);
  }
  return true;
}

void ControlPlane::DecidePeerFailures(Time now, Txn& txn) {
  for (auto it = peer_failures_.begin(); it != peer_failures_.end();) {
    auto j = jobs_.find(*it);
    if (j == jobs_.end()) {  // rebuilt from the store: memory-only state is gone
      it = peer_failures_.erase(it);
      continue;
    }
    JobRecord& job = j->second;
    if (job.state != JobState::kRunning || job.generation != job.peer_failure_generation) {
      it = peer_failures_.erase(it);  // decided otherwise: a disruption or another failure
      continue;
    }
    const bool waiting = now - job.peer_failure_at < Duration(options_.node_lease.value() / 2) ||
                         std::any_of(job.tasks.begin(), job.tasks.end(), [&](const TaskView& t) {
                           auto n = topo_.FindNode(t.node);
                           if (!n) return false;
                           const NodeRecord& r = nodes_[n->value()];
                           return !r.alive || r.not_responding;  // its lease decides
                         });
    if (waiting) {
      ++it;
      continue;
    }
    // Every node answers: no peer was lost to the cluster; the job failed.
    it = peer_failures_.erase(it);
    if (!FailRunLocked(job, job.peer_failure_node, job.peer_failure_why, "TaskFailed", now, txn)
             .ok()) {
      log_.Error("control", "cannot restart a failed job", {{"job", job.id}});
    }
  }
}

// The checkpoint's cost as its report gives it: {"seconds": write time,
// "bytes": size} (either may be absent; bad values are ignored, the
// report itself stands). One written while the job is being stopped shows
// that it saves on stop.
void ControlPlane::MeasureCheckpoint(JobRecord& job, const std::string& data) {
  if (job.state == JobState::kPreempting) job.saves_on_stop = true;
  const Json d = Json::parse(data, nullptr, false);
  const Json none;
  const Json& seconds = d.is_object() ? d.value("seconds", none) : none;
  const Json& bytes = d.is_object() ? d.value("bytes", none) : none;
  if (seconds.is_number() && seconds.get<double>() > 0 && seconds.get<double>() < 1e7) {
    job.checkpoint_seconds = seconds.get<double>();
  }
  if (bytes.is_number_integer() && bytes.get<int64_t>() >= 0) {
    job.checkpoint_bytes = bytes.get<int64_t>();
  }
  PushMeasuredCosts(job);
}

// A run's start-up: from its start to its first progress report.
void ControlPlane::MeasureStartUp(JobRecord& job, Time now) {
  if (job.startup_generation == job.generation || job.state != JobState::kRunning ||
      job.started.value() <= 0 || now < job.started) {
    return;
  }
  job.startup_generation = job.generation;
  job.startup_seconds = ToSeconds(now - job.started);  // stored with the record's next write
  PushMeasuredCosts(job);
}

void ControlPlane::PushMeasuredCosts(const JobRecord& job) {
  const auto nanos = [](double s) { return Nanoseconds(static_cast<int64_t>(s * 1e9)); };
  // (a job the scheduler no longer holds has nothing to price)
  (void)sched_->SetMeasuredCosts(sched::JobId(job.id), nanos(job.checkpoint_seconds),
                                 nanos(job.startup_seconds), job.saves_on_stop);
}

// A report of the job's current run; the changes go into `txn`.
Status ControlPlane::ApplyReportLocked(JobRecord& job, const std::string& kind,
                                       const std::string& why, const std::string& data,
                                       const std::string& node, Txn& txn) {
  const Time now = Now();
  const int64_t id = job.id;
  if (kind == "progress") {
    job.progress = data;  // memory only: the next write of the record keeps it
    RecordProgress(job.id, now, data);
    MeasureStartUp(job, now);
    LossLocked(job, data, now, txn);
    return Status::Ok();
  }
  if (kind == "signals") {
    SignalsLocked(job, data, now, txn);
    return Status::Ok();
  }
  dirty_ = true;
  const Json d = Json::parse(data, nullptr, false);
  // A final report carries the run's last progress: progress reports are
  // kept in memory only, and the one before the end may have gone to a
  // server that is no more (a failover), or been skipped (one a second).
  if (kind != "checkpoint") {
    if (d.is_object() && d.contains("progress") && d["progress"].is_object()) {
      job.progress = d["progress"].dump();
    }
    if (kind == "succeeded") job.exit_code = 0, job.exit_signal = 0;
    if (kind == "failed" && d.is_object()) {  // the failed rank's end, when the agent knows it
      const Json code = d.value("exitCode", Json()), sig = d.value("signal", Json());
      if (code.is_number_integer() && code.get<int64_t>() >= 0 && code.get<int64_t>() <= 255) {
        job.exit_code = code.get<int32_t>(), job.exit_signal = 0;
      } else if (sig.is_number_integer() && sig.get<int64_t>() > 0 && sig.get<int64_t>() <= 64) {
        job.exit_code = 0, job.exit_signal = sig.get<int32_t>();
      }
    }
  }
  // A rank that dies because its peers stopped for a preemption is not a
  // failure of the job: count it as that node having stopped.
  const bool stopping = job.state == JobState::kPreempting;
  // Hung (no progress for spec.progressTimeout): the job's own failure,
  // under an event of its own.
  const bool hung = kind == "hung";
  std::string k = hung ? "failed" : kind;
  if ((k == "failed" || k == "disrupted") && stopping) k = "stopped";
  // A collective that timed out (the agent read it in the log: data's
  // logCause) is also a training anomaly of its own: an event and a count.
  if (k == "failed" && d.is_object() && d.contains("logCause") && d["logCause"] == "CommTimeout") {
    metrics_.Add("unipool_training_anomalies_total",
                 {{"queue", job.request.queue}, {"kind", "CommTimeout"}});
    Write(job, "CommTimeout", why, txn);
  }
  if (k == "succeeded") {
    UNIPOOL_RETURN_IF_ERROR(Finish(job, JobState::kSucceeded, "Succeeded", "succeeded", txn));
  } else if (k == "failed" && !hung && PeerLostLocked(job, node, why, data, now)) {
    // Decided by the reconcile pass (DecidePeerFailures); stored first, so
    // a restart of the server decides it too.
    txn.Put(JobKey(job.id), JobToJson(job).dump());
  } else if (k == "failed") {
    UNIPOOL_RETURN_IF_ERROR(FailRunLocked(job, node, why, hung ? "Hung" : "TaskFailed", now, txn));
  } else if (k == "disrupted") {
    // Not the job's doing (its node's agent restarted, or fenced it): run
    // again at once, counted apart from maxRestarts.
    UNIPOOL_RETURN_IF_ERROR(sched_->Finish(JobId(id), now));
    AwaitOldRun(job, node);
    ++job.disruptions;
    job.state = JobState::kPending;
    job.retry_at = now;
    backoff_.insert(id);
    Write(job, "Disrupted", why + "; runs again from its checkpoint (not counted as a failure)",
          txn);
  } else if (k == "stopped") {
    if (job.state != JobState::kPreempting) {
      return FailedPrecondition("job " + std::to_string(id) + " was not asked to stop");
    }
    if (!node.empty()) {
      job.stopped_nodes.insert(node);
      const bool all = std::all_of(job.tasks.begin(), job.tasks.end(), [&](const TaskView& t) {
        return job.stopped_nodes.contains(t.node);
      });
      if (!all) {  // the others are still stopping: remember this one durably
        txn.Put(JobKey(job.id), JobToJson(job).dump());
      }
    }
    if (txn.ops.empty()) {
      // The work since its last checkpoint (one written in its grace counts)
      // is lost: the scheduler's count of it grows by that.
      const sched::JobInfo* info = sched_->Find(JobId(id));
      const int64_t lost_before = info ? info->lost_gpu_seconds : 0;
      UNIPOOL_RETURN_IF_ERROR(sched_->Stopped(JobId(id), now));
      info = sched_->Find(JobId(id));
      const int64_t lost = info ? std::max<int64_t>(0, info->lost_gpu_seconds - lost_before) : 0;
      job.lost_gpu_seconds += lost;
      metrics_.Add("unipool_preempted_gpu_seconds_total", {{"queue", job.request.queue}},
                   static_cast<double>(lost));
      AwaitOldRun(job, node);  // an admin's word for the nodes: they still confirm
      job.state = JobState::kPending;
      EndRun(job, now);
      job.stopped_nodes.clear();
      Write(job, "Stopped", "stopped; resumes from " + ResumePoint(job), txn);
    }
  } else if (k == "checkpoint") {
    UNIPOOL_RETURN_IF_ERROR(sched_->Checkpointed(JobId(id), now));
    job.last_checkpoint = now;
    ++job.checkpoints;
    job.checkpoint_note = io::Truncate(why, 200);
    MeasureCheckpoint(job, data);
    Write(job, "Checkpointed", "checkpoint written" + (why.empty() ? "" : ": " + why), txn);
  } else {
    return InvalidArgument("kind: expected succeeded, failed, stopped or checkpoint, got " +
                           io::Quote(kind));
  }
  return Status::Ok();
}

Status ControlPlane::Report(int64_t id, int64_t generation, const std::string& kind,
                            const std::string& why, const std::string& data,
                            const std::string& node) {
  if (kind != "succeeded" && kind != "failed" && kind != "hung" && kind != "disrupted" &&
      kind != "stopped" && kind != "checkpoint" && kind != "progress" && kind != "signals" &&
      kind != "gone") {
    return InvalidArgument(
        "kind: expected succeeded, failed, hung, disrupted, stopped, checkpoint, progress, "
        "signals or gone, got " +
        io::Quote(kind));
  }
  int64_t rev = 0;
  Status answer = Status::Ok();  // refused, after what the report released
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NoSuchJob(id);
    JobRecord& job = it->second;
    const bool current =
        job.generation == generation && !Terminal(job.state) && job.state != JobState::kPending;
    const bool in_run =
        node.empty() || std::any_of(job.tasks.begin(), job.tasks.end(),
                                    [&](const TaskView& t) { return t.node == node; });
    const bool cleared = ReleasedBy(job, kind, generation, node);
    Txn txn;
    if (kind == "gone") {
      // Only a release (above).
    } else if (!current) {
      answer =
          FailedPrecondition("job " + std::to_string(id) + " run " + std::to_string(generation) +
                             " is not current (run " + std::to_string(job.generation) + ", " +
                             JobStateName(job.state) + ")");
    } else if (!in_run) {
      answer = PermissionDenied("job " + std::to_string(id) + " run " + std::to_string(generation) +
                                " has no task on node " + node);
    } else {
      answer = ApplyReportLocked(job, kind, why, data, node, txn);
      if (!answer.ok()) txn = Txn();  // nothing of it, but what was released
    }
    if (cleared && txn.ops.empty()) txn.Put(JobKey(job.id), JobToJson(job).dump());
    if (txn.ops.empty()) return answer;
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return answer;
}

// A node's end of a run (a final report of any run, or "gone": none of its
// processes of the runs up to `generation` is alive) releases the node from
// the job's clearing; an admin's "gone" releases every node. True when it
// released one.
bool ControlPlane::ReleasedBy(JobRecord& job, const std::string& kind, int64_t generation,
                              const std::string& node) {
  if (kind == "checkpoint" || kind == "progress" || kind == "signals" || Terminal(job.state) ||
      generation > job.generation || job.clearing.empty()) {
    return false;
  }
  if (node.empty() && kind != "gone") return false;
  const size_t n = std::erase_if(job.clearing, [&](const auto& e) {
    return (node.empty() || e.first == node) && e.second <= generation;
  });
  if (job.clearing.empty()) clearing_.erase(job.id);
  return n > 0;
}

}  // namespace unipool::server
