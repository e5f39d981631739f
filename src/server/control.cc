// ControlPlane: opening and recovering from the store, rebuilding after a
// failed write, and the helpers the other parts share (control_jobs.cc,
// control_nodes.cc, control_reconcile.cc).
#include "server/control.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "io/time_format.h"
#include "server/control_internal.h"
#include "server/job_prefetch.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

namespace {

const char* kStateNames[] = {"Pending",   "Running", "Preempting",
                             "Succeeded", "Failed",  "Cancelled"};

}  // namespace

Status NoSuchJob(int64_t id) { return NotFound("job " + std::to_string(id) + " not found"); }

int64_t GpuSecondsAt(const JobRecord& j, Time now) {
  const Time from = std::max(j.started, j.accounted_to);
  if (j.tasks.empty() || from.value() <= 0 || now <= from) return j.gpu_seconds;
  int64_t gpus = 0;
  for (const TaskView& t : j.tasks) gpus += static_cast<int64_t>(t.gpus.size());
  return j.gpu_seconds + gpus * ((now - from).value() / 1000000000);
}

void AccountRun(JobRecord& j, Time now) {
  const int64_t counted = GpuSecondsAt(j, now);
  if (counted == j.gpu_seconds) return;
  j.gpu_seconds = counted;
  j.accounted_to = now;
}

void EndRun(JobRecord& j, Time now) {
  AccountRun(j, now);
  if (!j.tasks.empty()) {
    j.previous_generation = j.generation;
    j.previous_tasks = std::move(j.tasks);
  }
  j.tasks.clear();
}

std::string ResumePoint(const JobRecord& j) {
  if (j.checkpoints == 0) return "the beginning (no checkpoint yet)";
  return "its checkpoint of " + FormatTime(j.last_checkpoint) +
         (j.checkpoint_note.empty() ? "" : " (" + j.checkpoint_note + ")");
}

bool HasLabels(const JobRecord& j, const JobFilter& f) {
  return std::all_of(f.labels.begin(), f.labels.end(), [&](const auto& kv) {
    return std::find(j.request.labels.begin(), j.request.labels.end(), kv) !=
           j.request.labels.end();
  });
}

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
    const std::vector<store::KeyValue>& kvs, JobPrefetch* prefetch) {
  std::vector<std::optional<Result<JobRecord>>> out(kvs.size());
  if (prefetch != nullptr) {
    for (size_t i = 0; i < kvs.size(); ++i) {
      if (std::optional<JobRecord> r = prefetch->Take(kvs[i])) out[i] = std::move(*r);
    }
  }
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < kvs.size(); i += threads) {
        if (!out[i]) out[i] = JobFromJson(Json::parse(kvs[i].value, nullptr, false));
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

Status ControlPlane::WritableLocked() {
  Status st = store_.Writable();
  if (st.ok() && store_.failures() != rebuilt_failures_) RebuildLocked(/*failed=*/false);
  return st;
}

void ControlPlane::RebuildLocked(bool failed) {
  if (store_.failures() == rebuilt_failures_) return;
  rebuilt_failures_ = store_.failures();
  const std::vector<NodeRecord> old = std::move(nodes_);
  const int64_t next_id = next_id_;
  sched_ = std::make_unique<sched::Scheduler>(topo_, options_.sched);
  jobs_.clear();
  active_.clear();
  ended_.clear();
  active_by_queue_.clear();
  limits_.clear();
  timed_.clear();
  backoff_.clear();
  clearing_.clear();
  peer_failures_.clear();
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
  if (!failed) {
    log_.Info("control", "the store is writable again: memory rebuilt from what it holds",
              {{"revision", store_.revision()}, {"jobs", static_cast<int64_t>(jobs_.size())}});
    return;
  }
  metrics_.Add("unipool_store_write_failures_total", {});
  log_.Error("control",
             "a store write failed: memory rebuilt from the durable state; read-only "
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
    Result<SubmitLimits> limits = SubmitLimitsFromJson(j, kv.key);
    if (!limits.ok()) {
      return FailedPrecondition("store record " + kv.key + ": " + limits.status().message());
    }
    if (q.ok()) limits_[q->name] = *limits;
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
  std::vector<std::optional<Result<JobRecord>>> parsed = ParseJobs(kvs, options_.prefetch);
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
    if (!job.request.secret_env.empty()) {
      const std::optional<store::KeyValue> kv = store_.Get(SecretKey(job.id));
      Status st = kv ? FillSecrets(Json::parse(kv->value, nullptr, false), job.request)
                     : InvalidArgument("no secret values");
      if (!st.ok()) {
        return FailedPrecondition("store record " + SecretKey(job.id) + ": " + st.message());
      }
    }
    if (Terminal(job.state)) {
      ended_.emplace(job.finished.value(), job.id);
      continue;
    }
    Activate(job);
    if (!job.clearing.empty()) clearing_.insert(job.id);
    if (job.peer_failure_generation > 0) {  // decided half a lease from now
      job.peer_failure_at = now;
      peer_failures_.insert(job.id);
    }
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
      EndRun(job, now);
      Deactivate(job);
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
  RecoverUsage();
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
                                job.last_checkpoint, job.restarts + job.disruptions);
    if (st.ok() && job.state == JobState::kPreempting) {
      // Still stopping: the same deadline, then taken as gone if silent.
      st = sched_->RestorePreempting(sched::JobId(job.id), job.preempt_deadline);
    }
    if (st.ok()) {
      PushMeasuredCosts(job);
      return st;
    }
    // Its processes may run on: the next run waits for every node of this
    // one (liveness is not known yet; a lost node is swept later).
    AwaitOldRun(job, "", /*skip_lost=*/false);
    job.state = JobState::kPending;
    EndRun(job, Now());
  }
  UNIPOOL_RETURN_IF_ERROR(sched_->Submit(*spec, job.submitted, GpuSecondsAt(job, Now())));
  PushMeasuredCosts(job);
  return Status::Ok();
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
  UNIPOOL_RETURN_IF_ERROR(SetShape(r, s));
  s.min_gpus = Gpus(r.min_gpus);
  s.continue_on_resize = r.elastic_continue && r.min_gpus > 0;
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
  if (r.prefer == "any") {
    s.compact_max_wait = Duration(0);
  } else if (!r.prefer.empty()) {
    auto t = topo_.FindTier(r.prefer);
    if (!t) {
      return InvalidArgument("spec.topology.prefer: the cluster has no tier '" + r.prefer +
                             "' (or say any)");
    }
    s.preferred_tier = *t;
  }
  if (r.max_wait.value() >= 0 && r.prefer != "any") s.compact_max_wait = r.max_wait;
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
  // dataLocality: a partition, or a storage system (its partition; one
  // the whole cluster reaches alike prefers none).
  for (const StorageSpec& st : topo_.storage()) {
    if (!r.data_locality.empty() && st.name == r.data_locality) {
      s.preferred_partition = st.partition_index;
      return s;
    }
  }
  Result<int32_t> pref = partition(r.data_locality, "spec.dataLocality");
  if (!pref.ok()) {
    return InvalidArgument("spec.dataLocality: the cluster has no partition or storage system '" +
                           r.data_locality + "'");
  }
  s.preferred_partition = *pref;
  return s;
}

// The spec's shape (io/job_spec.h) as the scheduler's tasks: GPUs per node
// are tasks of a node each; an exclusive job takes whole nodes (tasks of
// the largest node's GPUs) and uses its share of each (UsedGpus).
Status ControlPlane::SetShape(const io::JobRequest& r, sched::JobSpec& s) const {
  const int32_t k = sched_->pool().max_node_gpus();
  const int32_t share = NodeShare(r);
  if (share > k) {
    return InvalidArgument("spec.gpusPerNode: " + std::to_string(share) +
                           " GPUs on a node, but the largest node has " + std::to_string(k));
  }
  if (r.exclusive) {
    s.task_gpus = k;
    s.max_tasks_per_node = 1;
    s.gpus = Gpus(r.gpus / share * k);
  } else if (r.gpus_per_node > 0) {
    s.task_gpus = r.gpus_per_node;
    s.max_tasks_per_node = 1;
  } else {
    s.task_gpus = r.gpus_per_task;
    s.max_tasks_per_node = r.spread == io::Spread::kSpread ? 1 : 0;
  }
  return Status::Ok();
}

// GPUs the job uses on each of its nodes: gpusPerNode; else for an
// exclusive job the largest share of its GPUs a node holds (in whole
// tasks); 0 when tasks may share nodes.
int32_t ControlPlane::NodeShare(const io::JobRequest& r) const {
  if (r.gpus_per_node > 0 || !r.exclusive) return r.gpus_per_node;
  const int32_t task = std::max(1, r.gpus_per_task);
  for (int64_t d = std::min<int64_t>(r.gpus, sched_->pool().max_node_gpus()); d > task; --d) {
    if (r.gpus % d == 0 && d % task == 0) return static_cast<int32_t>(d);
  }
  return task;
}

std::string ControlPlane::ShapeNote(const JobRecord& job) const {
  const io::JobRequest& r = job.request;
  if (r.gpus_per_node > 0 || r.gpus_per_task > 0 || r.nodes > 0 || job.tasks.size() < 2) return "";
  const sched::JobInfo* info = sched_->Find(JobId(job.id));
  if (info == nullptr) return "";
  const int32_t task = info->spec.task_gpus;
  return "; " + std::to_string(r.gpus) + " GPUs in tasks of " + std::to_string(task) +
         ", the largest share of " + std::to_string(r.gpus) + " that one node (of at most " +
         std::to_string(sched_->pool().max_node_gpus()) +
         " GPUs) holds: set spec.gpusPerNode, gpusPerTask or nodes to choose";
}

std::vector<int> UsedGpus(const JobRecord& job, const TaskView& t) {
  if (!job.request.exclusive || job.request.gpus_per_node <= 0) return t.gpus;
  const size_t share = std::min<size_t>(t.gpus.size(), job.request.gpus_per_node);
  return std::vector<int>(t.gpus.begin(), t.gpus.begin() + static_cast<ptrdiff_t>(share));
}

int32_t MasterPort(const JobRecord& job) {
  if (job.master_port > 0) return job.master_port;
  // Records written before the port was stored: as it was derived then.
  constexpr int64_t kSpan = kLastMasterPort - kFirstMasterPort + 1;
  return kFirstMasterPort + static_cast<int32_t>((job.id * 131 + job.generation * 17) % kSpan);
}

// A run's MASTER_PORT: random, so that clusters sharing hosts (tests, two
// `unipool up`) rarely meet on one, and never the port of another job whose
// first task is on the same node, nor this job's previous run's (whose
// sockets may linger). REQUIRES: mu_ held; job.tasks are the new run's.
int32_t ControlPlane::PickMasterPort(const JobRecord& job) {
  std::set<int32_t> taken{MasterPort(job)};
  const std::string& first = job.tasks.empty() ? std::string() : job.tasks.front().node;
  auto take = [&](int64_t id) {
    const JobRecord& other = jobs_.at(id);
    if (id != job.id && !other.tasks.empty() && other.tasks.front().node == first) {
      taken.insert(MasterPort(other));
    }
  };
  if (auto node = topo_.FindNode(first)) {
    for (JobId j : sched_->JobsOn(*node)) take(j.value());
  }
  for (int64_t id : clearing_) take(id);
  std::uniform_int_distribution<int32_t> port(kFirstMasterPort, kLastMasterPort);
  while (true) {
    const int32_t p = port(ports_);
    if (!taken.contains(p)) return p;
  }
}

std::vector<TaskView> ControlPlane::ToTasks(const sched::Placement& p) const {
  std::vector<TaskView> out;
  for (const sched::Task& t : p.tasks) {
    TaskView v;
    v.node = topo_.node_name(t.node);
    for (int g = 0; g < kMaxGpusPerNode; ++g) {
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
      if (g >= 0 && g < kMaxGpusPerNode) mask |= GpuMask{1} << g;
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
  if (!rev.ok() && store::IsFailure(rev.status())) {
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
  if (!st.ok() && store::IsFailure(st)) {
    std::lock_guard lock(mu_);
    RebuildLocked();
  }
  return st;
}

}  // namespace unipool::server
