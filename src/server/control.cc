#include "server/control.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "io/time_format.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

namespace {

const char* kStateNames[] = {"Pending",   "Running", "Preempting",
                             "Succeeded", "Failed",  "Cancelled"};

Status NoSuchJob(int64_t id) { return NotFound("job " + std::to_string(id) + " not found"); }

}  // namespace

const char* JobStateName(JobState s) { return kStateNames[static_cast<int>(s)]; }

std::optional<JobState> ParseJobState(const std::string& s) {
  for (int i = 0; i < 6; ++i) {
    std::string lower = kStateNames[i];
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (s == kStateNames[i] || s == lower) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

// Parses stored job records on every core: most of a restart's time.
static std::vector<std::optional<Result<JobRecord>>> ParseJobs(
    const std::vector<store::KeyValue>& kvs) {
  std::vector<std::optional<Result<JobRecord>>> out(kvs.size());
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < kvs.size(); i += threads) {
        out[i] = JobFromJson(Json::parse(kvs[i].value, nullptr, false));
      }
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

// ---- Open and recover ------------------------------------------------------

ControlPlane::ControlPlane(const Topology& topo, store::Store& store, ControlOptions options,
                           Metrics& metrics, Logger& log)
    : topo_(topo),
      store_(store),
      options_(std::move(options)),
      metrics_(metrics),
      log_(log),
      sched_(std::make_unique<sched::Scheduler>(topo, options_.sched)) {
  if (!options_.clock) options_.clock = io::WallClock;
  nodes_ = InitialNodes();
}

std::vector<NodeRecord> ControlPlane::InitialNodes() const {
  std::vector<NodeRecord> nodes(topo_.num_nodes());
  for (int32_t i = 0; i < topo_.num_nodes(); ++i) {
    const NodeId n(i);
    NodeRecord& r = nodes[i];
    r.name = topo_.node_name(n);
    r.gpus = static_cast<int32_t>(topo_.node_gpus(n).value());
    r.gpu_model = topo_.node_model(n).name;
    r.partition = topo_.partitions().empty() ? "" : topo_.partitions()[topo_.node_partition(n)];
    r.state = NodeState::kUp;  // as the scheduler starts; Recover sets the real state
  }
  return nodes;
}

void ControlPlane::RebuildLocked() {
  if (store_.failures() == rebuilt_failures_) return;
  rebuilt_failures_ = store_.failures();
  const std::vector<NodeRecord> old = std::move(nodes_);
  const int64_t next_id = next_id_;
  sched_ = std::make_unique<sched::Scheduler>(topo_, options_.sched);
  jobs_.clear();
  active_.clear();
  timed_.clear();
  backoff_.clear();
  node_tokens_.clear();
  nodes_ = InitialNodes();
  if (Status st = Recover(); !st.ok()) {
    log_.Error("control", "rebuilding from the store failed: " + st.message());
  }
  const Time now = Now();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    NodeRecord& n = nodes_[i];
    n.alive = old[i].alive;
    n.not_responding = old[i].not_responding;
    n.last_heartbeat = old[i].last_heartbeat;
    n.agent_secret = old[i].agent_secret;
    SetSchedNodeState(n, now);
  }
  next_id_ = std::max(next_id_, next_id);  // an id once given out is never given again
  dirty_ = true;
  metrics_.Add("unipool_store_write_failures_total", {});
  log_.Error("control", "a store write failed: memory rebuilt from the durable state; read-only "
                        "until the store can write",
             {{"revision", store_.revision()}, {"why", store_.Writable().message()}});
}

ControlPlane::~ControlPlane() = default;

Result<std::unique_ptr<ControlPlane>> ControlPlane::Open(const Topology& topo, store::Store& store,
                                                         ControlOptions options, Metrics& metrics,
                                                         Logger& log) {
  std::unique_ptr<ControlPlane> cp(new ControlPlane(topo, store, std::move(options), metrics, log));
  UNIPOOL_RETURN_IF_ERROR(cp->Recover());
  return cp;
}

// Phases: queues (parents first), nodes' admin states, jobs (running ones
// back where they ran, on every node as if up), then node states for real.
Status ControlPlane::Recover() {
  std::vector<sched::QueueSpec> queues;
  for (const store::KeyValue& kv : store_.Range("/queues/")) {
    Json j = Json::parse(kv.value, nullptr, false);
    Result<sched::QueueSpec> q = QueueSpecFromJson(j, kv.key);
    if (!q.ok()) return FailedPrecondition("store record " + kv.key + ": " + q.status().message());
    queues.push_back(*q);
  }
  if (std::none_of(queues.begin(), queues.end(), [](auto& q) { return q.name == "default"; })) {
    sched::QueueSpec def;
    def.name = "default";
    queues.insert(queues.begin(), def);
    Txn txn;
    txn.Put(QueueKey("default"), QueueToJson(QueueRecord{def}).dump());
    UNIPOOL_RETURN_IF_ERROR(store_.Commit(txn).status());
  }
  for (size_t added = 0, round = 0; added < queues.size() && round <= queues.size(); ++round) {
    for (const sched::QueueSpec& q : queues) {
      if (sched_->queues().Find(q.name)) continue;
      if (!q.parent.empty() && !sched_->queues().Find(q.parent)) continue;
      UNIPOOL_RETURN_IF_ERROR(sched_->queues().Add(q).status());
      ++added;
    }
  }

  for (const store::KeyValue& kv : store_.Range("/nodes/")) {
    Json j = Json::parse(kv.value, nullptr, false);
    auto n = topo_.FindNode(kv.key.substr(7));
    if (!n || !j.is_object()) continue;  // a node no longer in the cluster file
    NodeRecord& r = nodes_[n->value()];
    r.admin = j.value("admin", "");
    r.why = j.value("why", "");
    r.registered = j.value("registered", false);
    r.address = j.value("address", "");
    if (r.registered) r.health = j.value("health", r.health);
    r.agent_url = j.value("agentUrl", "");
  }
  for (const store::KeyValue& kv : store_.Range("/agents/")) {
    Json j = Json::parse(kv.value, nullptr, false);
    if (j.is_object() && j.contains("sha256") && j["sha256"].is_string()) {
      node_tokens_[j["sha256"].get<std::string>()] = kv.key.substr(8);
    }
  }
  if (auto next = store_.Get(kNextIdKey)) next_id_ = std::stoll(next->value);

  const Time now = Now();
  int64_t restored = 0;
  const std::vector<store::KeyValue> kvs = store_.Range("/jobs/");
  std::vector<std::optional<Result<JobRecord>>> parsed = ParseJobs(kvs);
  for (size_t i = 0; i < kvs.size(); ++i) {
    Result<JobRecord>& rec = *parsed[i];
    if (!rec.ok()) {
      return FailedPrecondition("store record " + kvs[i].key + ": " + rec.status().message());
    }
    if (JobKey(rec->id) != kvs[i].key) {
      return FailedPrecondition("store record " + kvs[i].key + ": holds job " +
                                std::to_string(rec->id) + " (damaged store)");
    }
    JobRecord& job = jobs_.emplace_hint(jobs_.end(), rec->id, std::move(rec).value())->second;
    next_id_ = std::max(next_id_, job.id + 1);
    if (Terminal(job.state)) continue;
    active_.insert(job.id);
    Status st = RecoverJob(job);
    if (st.ok() && job.state != JobState::kPending) {
      ++restored;
      if (job.request.time_limit.value() > 0) timed_.insert(job.id);
    }
    if (!st.ok()) {
      // The cluster file or queues changed under it: it can never run.
      Txn txn;
      job.state = JobState::kFailed;
      job.finished = now;
      job.tasks.clear();
      active_.erase(job.id);
      Write(job, "Failed", "cannot run on this cluster any more: " + st.message(), txn);
      UNIPOOL_RETURN_IF_ERROR(store_.Commit(txn).status());
    }
  }
  // Nodes an agent joined get one lease from now to come back.
  for (NodeRecord& n : nodes_) {
    n.alive = n.registered || options_.assume_nodes_up;
    n.last_heartbeat = now;
    SetSchedNodeState(n, now);
  }
  // Jobs restored on nodes that are down now are requeued: the first
  // Reconcile records those decisions.
  log_.Info("control", "recovered",
            {{"jobs", static_cast<int64_t>(jobs_.size())},
             {"active", static_cast<int64_t>(active_.size())},
             {"running", restored},
             {"revision", store_.revision()}});
  return Status::Ok();
}

// Hands a stored, unfinished job back to the scheduler: pending ones queue
// again, running ones are restored where they ran (or queue again when
// those GPUs are taken).
Status ControlPlane::RecoverJob(JobRecord& job) {
  Result<sched::JobSpec> spec = ToSchedSpec(job.id, job.request);
  if (!spec.ok()) return spec.status();
  if (job.state == JobState::kPending && job.retry_at.value() > 0) {
    backoff_.insert(job.id);  // queued again when its backoff ends
    return Status::Ok();
  }
  if (job.state != JobState::kPending) {
    Status st = sched_->Restore(*spec, ToPlacement(job.tasks), job.submitted, job.started,
                               job.last_checkpoint, job.restarts);
    if (st.ok() && job.state == JobState::kPreempting) {
      // Still stopping: the same deadline, then taken as gone if silent.
      st = sched_->RestorePreempting(sched::JobId(job.id), job.preempt_deadline);
    }
    if (st.ok()) return st;
    job.state = JobState::kPending;
    job.tasks.clear();
  }
  return sched_->Submit(*spec, job.submitted);
}

// ---- Helpers ---------------------------------------------------------------

int32_t ControlPlane::PriorityOf(const io::JobRequest& r) const {
  if (r.priority_class == "low") return -1000;
  if (r.priority_class == "normal") return 0;
  if (r.priority_class == "high") return 1000;
  return r.priority;
}

Result<sched::JobSpec> ControlPlane::ToSchedSpec(int64_t id, const io::JobRequest& r) const {
  sched::JobSpec s;
  s.id = JobId(id);
  s.name = r.name;
  auto q = sched_->queues().Find(r.queue);
  if (!q) return InvalidArgument("spec.queue: unknown queue '" + r.queue + "'");
  if (!sched_->queues().is_leaf(*q)) {
    return InvalidArgument("spec.queue: '" + r.queue + "' has child queues; submit to a leaf");
  }
  s.queue = *q;
  s.priority = PriorityOf(r);
  s.preemptible = r.preemptible;
  s.gpus = Gpus(r.gpus);
  s.task_gpus = r.gpus_per_node;
  s.min_gpus = Gpus(r.min_gpus);
  s.runtime_estimate = r.time_limit;
  if (r.gpus > topo_.num_gpus().value()) {
    return InvalidArgument("spec.gpus: " + std::to_string(r.gpus) +
                           " GPUs asked; the cluster has " +
                           std::to_string(topo_.num_gpus().value()));
  }
  if (!r.within.empty()) {
    auto t = topo_.FindTier(r.within);
    if (!t)
      return InvalidArgument("spec.topology.within: the cluster has no tier '" + r.within + "'");
    s.required_tier = *t;
  }
  auto partition = [&](const std::string& name, const char* field) -> Result<int32_t> {
    if (name.empty()) return -1;
    const auto& ps = topo_.partitions();
    auto it = std::find(ps.begin(), ps.end(), name);
    if (it == ps.end()) {
      return InvalidArgument(std::string(field) + ": the cluster has no partition '" + name + "'");
    }
    return static_cast<int32_t>(it - ps.begin());
  };
  Result<int32_t> p = partition(r.partition, "spec.partition");
  if (!p.ok()) return p.status();
  s.partition = *p;
  Result<int32_t> pref = partition(r.data_locality, "spec.dataLocality");
  if (!pref.ok()) return pref.status();
  s.preferred_partition = *pref;
  return s;
}

std::vector<TaskView> ControlPlane::ToTasks(const sched::Placement& p) const {
  std::vector<TaskView> out;
  for (const sched::Task& t : p.tasks) {
    TaskView v;
    v.node = topo_.node_name(t.node);
    for (int g = 0; g < 64; ++g) {
      if (t.gpus >> g & 1) v.gpus.push_back(g);
    }
    out.push_back(std::move(v));
  }
  return out;
}

sched::Placement ControlPlane::ToPlacement(const std::vector<TaskView>& tasks) const {
  sched::Placement p;
  for (const TaskView& v : tasks) {
    auto n = topo_.FindNode(v.node);
    if (!n) return sched::Placement{};  // a node gone from the cluster file
    GpuMask mask = 0;
    for (int g : v.gpus) {
      if (g >= 0 && g < 64) mask |= GpuMask{1} << g;
    }
    p.tasks.push_back(sched::Task{*n, mask});
  }
  std::sort(p.tasks.begin(), p.tasks.end(), [](auto& a, auto& b) { return a.node < b.node; });
  return p;
}

void ControlPlane::Write(JobRecord& job, const std::string& type, const std::string& message,
                         Txn& txn) {
  job.message = message;
  ++job.events;
  txn.Put(EventKey(job.id, job.events), EventToJson(JobEvent{Now(), type, message}).dump());
  txn.Put(JobKey(job.id), JobToJson(job).dump());
  log_.Info("control", message, {{"job", job.id}, {"event", type}});
}

void ControlPlane::WriteNode(const NodeRecord& n, Txn& txn) {
  txn.Put(NodeKey(n.name), NodeToJson(n).dump());
}

Result<int64_t> ControlPlane::ApplyLocked(const Txn& txn) {
  Result<int64_t> rev = store_.Apply(txn);
  if (!rev.ok() && rev.status().code() == StatusCode::kUnavailable) {
    log_.Error("store", "write failed: " + rev.status().message());
    // The caller changed memory for a change the store refused: undo it
    // all the one exact way, from the durable state.
    rebuilt_failures_ = -1;
    RebuildLocked();
  }
  return rev;
}

Status ControlPlane::SyncOrRebuild(int64_t revision) {
  Status st = store_.Sync(revision);
  if (!st.ok() && st.code() == StatusCode::kUnavailable) {
    std::lock_guard lock(mu_);
    RebuildLocked();
  }
  return st;
}

// ---- Jobs ------------------------------------------------------------------

Result<JobRecord> ControlPlane::Submit(const io::JobRequest& request, const std::string& owner) {
  int64_t rev = 0;
  JobRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
    const int64_t id = next_id_;
    Result<sched::JobSpec> spec = ToSchedSpec(id, request);
    if (!spec.ok()) return spec.status();
    const Time now = Now();
    UNIPOOL_RETURN_IF_ERROR(sched_->Submit(*spec, now));
    ++next_id_;
    JobRecord& job = jobs_[id];
    job.id = id;
    job.request = request;
    job.owner = owner;
    job.submitted = now;
    active_.insert(id);
    Txn txn;
    txn.Put(kNextIdKey, std::to_string(next_id_));
    Write(job, "Submitted",
          "submitted by " + owner + " to queue " + request.queue + ": " +
              std::to_string(request.gpus) + " GPUs",
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

Status ControlPlane::Validate(const io::JobRequest& request) const {
  std::lock_guard lock(mu_);
  return ToSchedSpec(next_id_, request).status();
}

Result<JobRecord> ControlPlane::Get(int64_t id, const Scope& scope) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !scope.Sees(it->second.request.queue)) return NoSuchJob(id);
  return it->second;
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
    bool labels = std::all_of(f.labels.begin(), f.labels.end(), [&](const auto& kv) {
      return std::find(j.request.labels.begin(), j.request.labels.end(), kv) !=
             j.request.labels.end();
    });
    if (!labels) continue;
    out.push_back(j);
    bytes += ApproxBytes(j);
  }
  return out;
}

Result<std::vector<JobEvent>> ControlPlane::Events(int64_t id, const Scope& scope) const {
  UNIPOOL_RETURN_IF_ERROR(Get(id, scope).status());
  std::vector<JobEvent> out;
  for (const store::KeyValue& kv : store_.Range(EventKey(id, 0).substr(0, 21))) {
    Result<JobEvent> e = EventFromJson(Json::parse(kv.value, nullptr, false));
    if (e.ok()) out.push_back(*e);
  }
  return out;
}

Result<std::string> ControlPlane::Explain(int64_t id, const Scope& scope) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !scope.Sees(it->second.request.queue)) return NoSuchJob(id);
  if (Terminal(it->second.state)) return std::string(it->second.message);
  return sched_->Explain(JobId(id));
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
  active_.erase(job.id);
  Write(job, type, message, txn);
  metrics_.Add("unipool_jobs_finished_total",
               {{"queue", job.request.queue}, {"state", JobStateName(state)}});
  dirty_ = true;
  return Status::Ok();
}

Result<JobRecord> ControlPlane::Cancel(int64_t id, const Scope& scope) {
  int64_t rev = 0;
  JobRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
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

Status ControlPlane::Report(int64_t id, int64_t generation, const std::string& kind,
                            const std::string& why, const std::string& data,
                            const std::string& node) {
  if (kind != "succeeded" && kind != "failed" && kind != "stopped" && kind != "checkpoint" &&
      kind != "progress") {
    return InvalidArgument(
        "kind: expected succeeded, failed, stopped, checkpoint or progress, got '" + kind + "'");
  }
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return NoSuchJob(id);
    JobRecord& job = it->second;
    if (job.generation != generation || Terminal(job.state) || job.state == JobState::kPending) {
      return FailedPrecondition("job " + std::to_string(id) + " run " + std::to_string(generation) +
                                " is not current (run " + std::to_string(job.generation) + ", " +
                                JobStateName(job.state) + ")");
    }
    const Time now = Now();
    Txn txn;
    if (kind == "progress") {
      job.progress = data;  // memory only: the next write of the record keeps it
      return Status::Ok();
    }
    // A rank that dies because its peers stopped for a preemption is not a
    // failure of the job: count it as that node having stopped.
    const std::string k = kind == "failed" && job.state == JobState::kPreempting ? "stopped" : kind;
    if (k == "succeeded") {
      UNIPOOL_RETURN_IF_ERROR(Finish(job, JobState::kSucceeded, "Succeeded", "succeeded", txn));
    } else if (k == "failed" && job.restarts >= job.request.restart.max_restarts) {
      UNIPOOL_RETURN_IF_ERROR(
          Finish(job, JobState::kFailed, "Failed",
                 "failed after " + std::to_string(job.restarts) + " restarts: " + why, txn));
    } else if (k == "failed") {
      // Out of the scheduler until the backoff ends, then queued again with
      // its first submit time (it keeps its place).
      UNIPOOL_RETURN_IF_ERROR(sched_->Finish(JobId(id), now));
      ++job.restarts;
      // Doubled per restart, capped at a day (no overflow for any spec).
      const int64_t base =
          std::min<int64_t>(job.request.restart.backoff.value(), Seconds(86400).value());
      const Duration backoff = Duration(
          std::min<int64_t>(base << std::min(job.restarts - 1, 10), Seconds(86400).value()));
      job.state = JobState::kPending;
      job.retry_at = now + backoff;
      backoff_.insert(id);
      Write(job, "TaskFailed",
            why + "; restart " + std::to_string(job.restarts) + " of " +
                std::to_string(job.request.restart.max_restarts) + " in " +
                std::to_string(backoff.value() / 1000000000) + "s from its checkpoint",
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
        UNIPOOL_RETURN_IF_ERROR(sched_->Stopped(JobId(id), now));
        job.state = JobState::kPending;
        job.tasks.clear();
        job.stopped_nodes.clear();
        Write(job, "Stopped",
              "stopped; resumes from its checkpoint of " + FormatTime(job.last_checkpoint), txn);
      }
    } else if (k == "checkpoint") {
      UNIPOOL_RETURN_IF_ERROR(sched_->Checkpointed(JobId(id), now));
      job.last_checkpoint = now;
      Write(job, "Checkpointed", "checkpoint written" + (why.empty() ? "" : ": " + why), txn);
    } else {
      return InvalidArgument("kind: expected succeeded, failed, stopped or checkpoint, got '" +
                             kind + "'");
    }
    dirty_ = true;  // (progress returned early; the kinds were checked on entry)
    if (txn.ops.empty()) return Status::Ok();
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  work_.notify_one();
  return SyncOrRebuild(rev);
}

// ---- Nodes -----------------------------------------------------------------

std::vector<NodeRecord> ControlPlane::Nodes() const {
  std::lock_guard lock(mu_);
  return nodes_;
}

Result<NodeRecord> ControlPlane::Node(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto n = topo_.FindNode(name);
  if (!n) return NotFound("node '" + name + "' not found");
  return nodes_[n->value()];
}

void ControlPlane::SetSchedNodeState(NodeRecord& n, Time now) {
  NodeState s = NodeState::kUp;
  if (!n.alive)
    s = NodeState::kDown;
  else if (n.admin == "drained")
    s = NodeState::kDrained;
  else if (n.admin == "cordoned" || n.not_responding)
    s = NodeState::kCordoned;
  else if (n.admin == "flaky")
    s = NodeState::kFlaky;
  if (s == n.state) return;
  n.state = s;
  (void)sched_->SetNodeState(*topo_.FindNode(n.name), s, now);
  dirty_ = true;
}

Result<NodeRecord> ControlPlane::SetNodeAdmin(const std::string& name, const std::string& action,
                                              const std::string& why) {
  int64_t rev = 0;
  NodeRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' not found");
    NodeRecord& n = nodes_[id->value()];
    if (action == "cordon")
      n.admin = "cordoned";
    else if (action == "drain")
      n.admin = "drained";
    else if (action == "uncordon")
      n.admin = "";
    else
      return InvalidArgument("action: expected cordon, drain or uncordon, got '" + action + "'");
    n.why = action == "uncordon" ? "" : why;
    SetSchedNodeState(n, Now());
    Txn txn;
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    copy = n;
    log_.Info("control", "node " + action, {{"node", name}, {"why", why}});
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return copy;
}

Status ControlPlane::Heartbeat(const std::string& name, const HeartbeatInfo& info) {
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' not found");
    NodeRecord& n = nodes_[id->value()];
    const Time now = Now();
    n.last_heartbeat = now;
    n.agent_secret = info.agent_secret;
    const bool sick = info.health != "ok" && n.admin.empty();
    const bool changed = !n.alive || sick || n.not_responding || n.health != info.health ||
                         n.address != info.address || n.agent_url != info.agent_url;
    if (!changed) return Status::Ok();  // the common case: memory only
    // A change is written; while the store is read-only, the lease above
    // is renewed all the same and the change waits for the next beat.
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());
    // At most one durable change a second per node: an agent that flips
    // its address on every beat cannot flood the store and its watchers.
    if (n.alive && !sick && !n.not_responding && now - n.last_written < Seconds(1)) {
      return ResourceExhausted("node " + name +
                               ": its heartbeat changes state more than once a second; the "
                               "lease is renewed, send the change again later");
    }
    n.last_written = now;
    n.health = info.health;
    if (!info.address.empty()) n.address = info.address;
    if (!info.agent_url.empty()) n.agent_url = info.agent_url;
    n.not_responding = false;
    if (sick) {
      n.admin = "drained";
      n.why = "health check: " + info.health;
      metrics_.Add("unipool_node_failures_total", {{"partition", n.partition}});
      log_.Warn("control", "node drained by its health check",
                {{"node", name}, {"health", info.health}});
    }
    if (!n.alive) log_.Info("control", "node up", {{"node", name}});
    n.alive = true;
    SetSchedNodeState(n, now);
    Txn txn;
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  work_.notify_one();
  return SyncOrRebuild(rev);
}

Status ControlPlane::Register(const std::string& name, const std::string& token_hash) {
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' is not in the cluster file");
    NodeRecord& n = nodes_[id->value()];
    n.registered = true;
    std::erase_if(node_tokens_, [&](const auto& kv) { return kv.second == name; });
    node_tokens_[token_hash] = name;
    Txn txn;
    txn.Put(AgentKey(name), Json{{"sha256", token_hash}}.dump());
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  return SyncOrRebuild(rev);
}

std::optional<std::string> ControlPlane::NodeOfToken(const std::string& token_hash) const {
  std::lock_guard lock(mu_);
  auto it = node_tokens_.find(token_hash);
  if (it == node_tokens_.end()) return std::nullopt;
  return it->second;
}

std::vector<JobRecord> ControlPlane::Assignments(const std::string& name) const {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  auto id = topo_.FindNode(name);
  if (!id) return out;
  for (JobId j : sched_->JobsOn(*id)) out.push_back(jobs_.at(j.value()));
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

std::vector<int64_t> ControlPlane::JobsOn(const std::string& name, const Scope& scope) const {
  std::vector<int64_t> out;
  for (const JobRecord& j : Assignments(name)) {
    if (scope.Sees(j.request.queue)) out.push_back(j.id);
  }
  return out;
}

// ---- Queues ----------------------------------------------------------------

std::vector<QueueRecord> ControlPlane::Queues(const Scope& scope) const {
  std::lock_guard lock(mu_);
  const sched::QueueTree& tree = sched_->queues();
  std::vector<QueueRecord> out(tree.size());
  for (int32_t i = 0; i < tree.size(); ++i) {
    out[i].spec = tree.spec(sched::QueueId(i));
    out[i].used = tree.used(sched::QueueId(i));
  }
  for (int64_t id : active_) {
    const JobRecord& j = jobs_.at(id);
    auto q = tree.Find(j.request.queue);
    if (!q) continue;
    if (j.state == JobState::kPending) {
      out[q->value()].pending++;
      out[q->value()].pending_gpus += Gpus(j.request.gpus);
    } else {
      out[q->value()].running++;
    }
  }
  std::erase_if(out, [&](const QueueRecord& q) { return !scope.Sees(q.spec.name); });
  return out;
}

Result<QueueRecord> ControlPlane::SetQueue(const sched::QueueSpec& spec) {
  int64_t rev = 0;
  QueueRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());  // read-only: change nothing
    sched::QueueTree& tree = sched_->queues();
    if (spec.name.empty() || spec.name.size() > 63) {
      return InvalidArgument("name: a queue needs a name of 1 to 63 characters");
    }
    if (auto q = tree.Find(spec.name)) {
      if (tree.spec(*q).parent != spec.parent) {
        return InvalidArgument("parent: queue '" + spec.name + "' has parent '" +
                               tree.spec(*q).parent + "'; a parent cannot change");
      }
      UNIPOOL_RETURN_IF_ERROR(tree.Update(*q, spec));
    } else {
      if (!spec.parent.empty() && !tree.Find(spec.parent)) {
        return InvalidArgument("parent: no queue named '" + spec.parent + "'");
      }
      Result<sched::QueueId> added = tree.Add(spec);
      if (!added.ok()) return added.status();
    }
    copy.spec = spec;
    copy.used = tree.used(*tree.Find(spec.name));
    Txn txn;
    txn.Put(QueueKey(spec.name), QueueToJson(QueueRecord{spec}).dump());
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    dirty_ = true;
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return copy;
}

int64_t ControlPlane::GraceSeconds(const std::string& queue) const {
  std::lock_guard lock(mu_);
  auto q = sched_->queues().Find(queue);
  return q ? sched_->queues().spec(*q).grace.value() / 1000000000 : 120;
}

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
  for (const char* name : kStateNames) s.jobs[name] = 0;
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

void ControlPlane::ExpireLeases(Time now, Txn& txn) {
  if (options_.assume_nodes_up) return;
  const Duration late = Duration(options_.node_lease.value() / 3);
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
    if (silent <= options_.node_lease) continue;
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
    Status st = spec.ok() ? sched_->Submit(*spec, job.submitted) : spec.status();
    if (!st.ok()) {
      (void)Finish(job, JobState::kFailed, "Failed", "cannot restart: " + st.message(), txn);
    } else {
      Write(job, "Requeued",
            "backoff over; queued to restart from its checkpoint of " +
                FormatTime(job.last_checkpoint),
            txn);
    }
    it = backoff_.erase(it);
  }
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
            job.state = JobState::kRunning;
            job.stopped_nodes.clear();
            job.tasks = ToTasks(x.placement);
            job.started = now;
            job.last_checkpoint = now;
            ++job.generation;
            if (job.request.time_limit.value() > 0) timed_.insert(job.id);
            Write(job, "Started", DescribePlacement(topo_, x.placement), txn);
          } else if constexpr (std::is_same_v<T, sched::ResizeJob>) {
            job.tasks = ToTasks(x.placement);
            ++job.generation;
            Write(job, "Resized",
                  "from " + std::to_string(x.from.value()) + " to " +
                      std::to_string(x.placement.gpus().value()) + " GPUs",
                  txn);
          } else if constexpr (std::is_same_v<T, sched::PreemptJob>) {
            job.state = JobState::kPreempting;
            job.preempt_deadline = x.deadline;
            ++job.preemptions;
            job.lost_gpu_seconds += x.lost_gpu_seconds;
            metrics_.Add("unipool_preemptions_total", {{"queue", job.request.queue}});
            metrics_.Add("unipool_preempted_gpu_seconds_total", {{"queue", job.request.queue}},
                         static_cast<double>(x.lost_gpu_seconds));
            const std::string why = x.for_job.value() >= 0
                                        ? "preempted for job " + std::to_string(x.for_job.value())
                                        : "its node is being drained";
            Write(job, "Preempted", why + "; checkpoint and stop by " + FormatTime(x.deadline),
                  txn);
          } else if constexpr (std::is_same_v<T, sched::RequeueJob>) {
            job.state = JobState::kPending;
            job.tasks.clear();
            job.lost_gpu_seconds += x.lost_gpu_seconds;
            if (x.failed_node.value() >= 0) ++job.restarts;  // a lost node: a failure
            std::string why = x.failed_node.value() >= 0
                                  ? "node " + topo_.node_name(x.failed_node) +
                                        " lost (no heartbeat within the lease: the node or its "
                                        "agent died, or the network cut it off)"
                              : job.message.empty() ? "stopped"
                                                    : job.message;
            Write(job, "Requeued",
                  why + "; resumes from its checkpoint of " + FormatTime(x.from_checkpoint), txn);
          } else if constexpr (std::is_same_v<T, sched::FailJob>) {
            job.state = JobState::kFailed;
            job.finished = now;
            active_.erase(job.id);
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
    if (!store_.Writable().ok()) return Status::Ok();
    dirty_ = false;
    const Time now = Now();
    Txn txn;
    ExpireLeases(now, txn);
    EnforceTimeLimits(now, txn);
    RetryAfterBackoff(now, txn);
    const std::vector<sched::Decision> out = sched_->Schedule(now);
    decisions = out.size();
    for (const sched::Decision& d : out) ApplyDecision(d, now, txn);
    if (!txn.ops.empty()) {
      Result<int64_t> r = ApplyLocked(txn);
      if (!r.ok()) return r.status().code() == StatusCode::kUnavailable ? Status::Ok() : r.status();
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
  if (Status st = SyncOrRebuild(rev); !st.ok() && st.code() != StatusCode::kUnavailable) return st;
  return Status::Ok();  // a failed write made the store read-only: keep serving reads
}

void ControlPlane::UpdateGauges() {
  metrics_.Set("unipool_store_read_only", {}, store_.Writable().ok() ? 0 : 1);
  const Summary s = GetSummary();
  std::vector<QueueRecord> queues = Queues(Scope{});
  std::lock_guard lock(mu_);
  for (const char* g :
       {"unipool_gpus", "unipool_jobs", "unipool_queue_pending_gpus", "unipool_queue_used_gpus",
        "unipool_queue_guarantee_gpus", "unipool_queue_limit_gpus", "unipool_nodes",
        "unipool_largest_free_block_gpus"}) {
    metrics_.Reset(g);
  }
  // GPUs and nodes by partition and state.
  std::map<std::string, int64_t> allocated;  // by node
  for (int64_t id : active_) {
    const JobRecord& j = jobs_.at(id);
    if (j.state != JobState::kRunning && j.state != JobState::kPreempting) continue;
    for (const TaskView& t : j.tasks) allocated[t.node] += t.gpus.size();
  }
  std::map<std::pair<std::string, std::string>, int64_t> gpus, nodes;
  for (int32_t i = 0; i < topo_.num_nodes(); ++i) {
    const NodeRecord& n = nodes_[i];
    const int64_t free = sched_->pool().free(NodeId(i));
    auto a = allocated.find(n.name);
    const int64_t used = a == allocated.end() ? 0 : a->second;
    gpus[{n.partition, "allocated"}] += used;
    gpus[{n.partition, "free"}] += free;
    gpus[{n.partition, "unavailable"}] += n.gpus - used - free;
    nodes[{n.partition, NodeStateName(n.state)}]++;
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
  for (const QueueRecord& q : queues) {
    const Labels l = {{"queue", q.spec.name}};
    metrics_.Set("unipool_queue_pending_gpus", l, static_cast<double>(q.pending_gpus.value()));
    metrics_.Set("unipool_queue_used_gpus", l, static_cast<double>(q.used.value()));
    metrics_.Set("unipool_queue_guarantee_gpus", l, static_cast<double>(q.spec.guarantee.value()));
    metrics_.Set("unipool_queue_limit_gpus", l, static_cast<double>(q.spec.limit.value()));
  }
  metrics_.Set("unipool_store_revision", {}, static_cast<double>(s.revision));
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
  m.Declare("unipool_jobs_submitted_total", T::kCounter, "Jobs submitted.");
  m.Declare("unipool_jobs_finished_total", T::kCounter, "Jobs ended, by final state.");
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
}

}  // namespace unipool::server
