// ControlPlane: the server's state machine. It owns the core Scheduler, the
// records users see (jobs, nodes, queues), and writes every change through
// the Store before it is acknowledged. The HTTP layer (api.h) and the
// reconcile loop call it; it knows nothing of HTTP.
//
// Reconcile: Reconcile(now) expires node leases, runs one scheduling cycle
// and turns its decisions into record changes (started, preempted,
// requeued, failed), written in one store transaction.
//
// Durability: every mutating call applies its change to the store under
// the lock and waits for it to be durable after releasing the lock, so
// concurrent callers share disk flushes. A call that returned OK survives
// `kill -9`. Open() rebuilds everything from the store.
//
// Authorization is the caller's business (api.cc); calls that list take a
// Scope saying which queues the caller may see.
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/sched/scheduler.h"
#include "core/topology/topology.h"
#include "core/train/signals.h"
#include "io/job_spec.h"
#include "server/gpu_sample.h"
#include "server/log.h"
#include "server/metrics.h"
#include "store/history.h"
#include "store/store.h"

namespace unipool::server {

class JobPrefetch;

enum class JobState { kPending, kRunning, kPreempting, kSucceeded, kFailed, kCancelled };
const char* JobStateName(JobState s);
std::optional<JobState> ParseJobState(const std::string& s);
inline bool Terminal(JobState s) { return s >= JobState::kSucceeded; }

// One placed task as users and agents see it: a node and its GPU indices.
struct TaskView {
  std::string node;
  std::vector<int> gpus;
};

// Who a job's processes run as on the nodes, decided when it is submitted
// (the agent enforces it: docs/operations.md, "Security model").
struct RunIdentity {
  std::string run_as;       // "user" or "user:group"; "" = the agent's own user
  bool tenant = false;      // a tenant submitted it: tenant rules apply on the node
  bool allow_root = false;  // its queue lets a tenant's job run as root
};

struct JobRecord {
  int64_t id = 0;
  io::JobRequest request;
  std::string owner;  // the token name that submitted it
  RunIdentity identity;
  JobState state = JobState::kPending;
  Time submitted, started, finished, last_checkpoint;
  int32_t restarts = 0;     // after the job's own failures (limited by maxRestarts)
  int32_t disruptions = 0;  // restarts the job did not cause: a node lost, its agent fenced
  int32_t preemptions = 0;
  int64_t generation = 0;  // incremented at each start: one run of the job
  // The run's rendezvous version: 0 at its start, +1 at each in-place
  // resize of an elastic continue job (its processes go on with the new
  // membership; RendezvousJson in the agent's assignment).
  int64_t membership = 0;
  // The run's rendezvous port (MASTER_PORT), chosen when it starts (see
  // MasterPort); 0 in records written before it existed.
  int32_t master_port = 0;
  int64_t lost_gpu_seconds = 0;
  // GPU-seconds its runs held (allocated, as Slurm charges), counted up to
  // `accounted_to` (the end of the last run counted, or a resize); the
  // current run adds from max(started, accounted_to) on (RunningGpuSeconds).
  int64_t gpu_seconds = 0;
  Time accounted_to;
  // IT energy its runs drew (its GPUs' nvidia-smi power where the node
  // reports it, the power model otherwise, plus the host's share per GPU),
  // integrated at each reconcile pass up to `energy_to`; and, in memory,
  // what it draws now and from where ("nvidia-smi", "model" or "mixed").
  double energy_joules = 0;
  Time energy_to;
  double power_watts = 0;
  std::string power_source;
  // Checkpoints its runs reported, and what the last one said ("step 200").
  int64_t checkpoints = 0;
  std::string checkpoint_note;
  // Measured on its runs (0: not yet): the last checkpoint's write time (as
  // the job reports it) and size (as reported, else as its node's agent
  // found it on disk); the last run's start-up, from its start to its first
  // progress report; whether it was seen to checkpoint while being stopped.
  // The scheduler prices preempting it with these (SetMeasuredCosts).
  double checkpoint_seconds = 0;
  int64_t checkpoint_bytes = 0;
  double startup_seconds = 0;
  bool saves_on_stop = false;
  int64_t startup_generation = 0;  // in memory: the run start-up was measured for
  // How the last run's processes ended, like sacct's ExitCode (code:signal):
  // the exit code of the failed rank (0 when all succeeded), or the signal
  // that killed it; -1 / 0 when unknown (never ran, cancelled, hung).
  int32_t exit_code = -1;
  int32_t exit_signal = 0;
  std::vector<TaskView> tasks;  // of the current or last run (kept when it ends, for logs)
  // The run before the current one, or the last one once its tasks were
  // cleared (requeued, stopped): its generation and tasks, so that its logs
  // can be read (`unipool logs --previous`). 0: none kept.
  int64_t previous_generation = 0;
  std::vector<TaskView> previous_tasks;
  std::string message;                  // the last change, in words
  int64_t events = 0;                   // events written
  Time preempt_deadline;                // while preempting: stop by then
  Time retry_at;                        // pending after a failure: restarts at (backoff)
  std::string progress;                 // the job's last progress report (JSON object text)
  std::set<std::string> stopped_nodes;  // preempting: nodes whose processes are gone
  // Nodes where an earlier run's processes (up to that generation) may
  // still be alive: the job's next run is held until each node's agent
  // confirms they are gone or the node is lost (and so fenced). Never two
  // live copies of a rank.
  std::map<std::string, int64_t> clearing;
  // A run whose process failed because a peer went away (stored; the time
  // in memory): decided half a lease later (ControlPlane::DecidePeerFailures).
  int64_t peer_failure_generation = 0;  // 0: none
  Time peer_failure_at;
  std::string peer_failure_why;
  std::string peer_failure_node;
};

// job.gpu_seconds plus what its current tasks held since it was last
// counted (JobRecord::accounted_to), up to `now`.
int64_t GpuSecondsAt(const JobRecord& job, Time now);
// Adds that to job.gpu_seconds and counts up to `now`.
void AccountRun(JobRecord& job, Time now);

// The GPUs of task `t` the job's processes use: all of them, but an
// exclusive job's share (gpusPerNode) of the whole node it holds.
std::vector<int> UsedGpus(const JobRecord& job, const TaskView& t);

// The MASTER_PORT of the job's current run, in 20000-32767: below Linux's
// ephemeral ports (32768-60999 by default), where any outgoing connection
// of the node may hold one.
constexpr int32_t kFirstMasterPort = 20000, kLastMasterPort = 32767;
int32_t MasterPort(const JobRecord& job);

struct JobEvent {
  Time time;
  std::string type;  // Submitted, Started, Preempted, Requeued, Failed, ...
  std::string message;
};

struct NodeRecord {
  std::string name;
  int32_t gpus = 0;
  std::string partition;
  std::string gpu_model;
  std::string admin;  // "" | cordoned | drained | flaky (with `why`)
  std::string why;
  bool registered = false;      // an agent has joined as this node
  bool alive = false;           // heartbeats within the lease
  bool not_responding = false;  // alive, but silent for a third of the lease: no new work
  Time last_heartbeat;
  Time last_written;  // the last heartbeat change written; memory only
  std::string health = "unknown";
  std::string address;       // where other nodes reach it (MASTER_ADDR), from its agent
  std::string agent_url;     // the agent's own HTTP endpoint (logs)
  std::string agent_secret;  // presented to the agent when the server calls it; memory only
  std::vector<GpuSample> gpu_samples;  // from its last heartbeat; memory only
  std::vector<GpuXidCount> gpu_xids;   // since its agent started; memory only
  // The node's clock minus the server's, seconds (NaN: not measured), and
  // whether that is past the bound (ControlOptions::max_clock_offset, with
  // hysteresis: it clears under half of it); memory only.
  double clock_offset_s = std::nan("");
  bool clock_skewed = false;
  NodeState state = NodeState::kDown;  // what the scheduler uses
};

// What a queue admits from tenants (admins are not limited), like Slurm's
// MaxSubmitJobs and Kubernetes' ResourceQuota object counts. Past a limit a
// submission is refused with kResourceExhausted (HTTP 429, Retry-After).
struct SubmitLimits {
  int64_t max_jobs = 10000;            // unfinished jobs (pending or running) in the queue
  int64_t max_spec_bytes = 256 << 10;  // one spec's text
  int64_t submits_per_minute = 1200;   // per submitter; bursts of a tenth of it
  // Who tenants' jobs in the queue run as when their token names no runAs
  // ("" = none: such a job does not start on an agent running as root
  // unless allow_root).
  std::string run_as;
  bool allow_root = false;
  // Refuse a job that can never run as asked (Scheduler::WhyNever) at
  // submission, instead of keeping it pending with reason Infeasible.
  bool reject_infeasible = false;
};

struct QueueRecord {
  sched::QueueSpec spec;
  SubmitLimits limits;
  Gpus used;
  int64_t pending = 0, running = 0;
  Gpus pending_gpus;
  // Fair-share accounting, as Slurm's sshare shows it: the GPU-hours the
  // queue (and its children) used, each hour worth half as much every
  // ControlOptions::usage_half_life; its share of all top-level use (of its
  // siblings' for a child queue) against its share of their weights; and
  // Slurm's classic factor 2^(-usage share / weight share): 1 unused, 0.5
  // at its fair share, toward 0 past it. Memory only: a restarted (or new)
  // leader starts from 0.
  double usage_gpu_hours = 0;
  double usage_share = 0, weight_share = 0, fair_share = 1;
};

struct Summary {
  Gpus total, allocated, free, unavailable;
  int32_t nodes = 0, nodes_up = 0;
  std::map<std::string, int64_t> jobs;  // by state
  int64_t revision = 0;
};

// Which queues a caller may see; `all` for admins and read-only callers.
struct Scope {
  bool all = true;
  std::set<std::string> queues;
  bool Sees(const std::string& queue) const { return all || queues.contains(queue); }
};

struct JobFilter {
  std::optional<JobState> state;
  std::string queue;
  std::vector<std::pair<std::string, std::string>> labels;  // all must match
  int64_t before = 0;  // page: ids below this (0 = from the newest)
  Time since;          // > 0: only jobs not finished, or finished at or after this
  int32_t limit = 100;
  size_t max_bytes = 0;  // stop after about this many bytes of specs (0 = no cap)
};

struct ControlOptions {
  sched::SchedulerOptions sched;
  Duration node_lease = Seconds(30);
  // 0: off. Else, while more than half of the live nodes are silent for a
  // third of the lease (the control plane is more likely cut off than they
  // are), a silent node is declared down only after lease + outage_grace;
  // when that ends, every silent node gets a whole lease from then. Agents
  // keep their tasks through an outage of up to the grace only when a
  // majority of the cluster confirms it (agent.h), so a task is still dead
  // before its replacement starts.
  Duration outage_grace = Duration(0);
  // Interruptions per 1,000 node-days a job's checkpoint interval is sized
  // for (CheckpointIntervalSeconds): 3.79, Meta's Llama 3 run on H100 nodes
  // ("The Llama 3 Herd of Models", 2024, 3.3.4: 419 in 54 days on 2,048).
  double node_failures_per_1000_days = 3.79;
  // No agents: every node is up unless an operator says otherwise.
  bool assume_nodes_up = false;
  std::function<Time()> clock;  // wall clock (ns since the epoch)
  // Not null: a job that ended `history_retention` ago moves there (with
  // its events) out of the store and memory; Get, List and Events read
  // both. Not owned; outlives the ControlPlane.
  store::History* history = nullptr;
  Duration history_retention = Seconds(3600);
  // Not null: job records a follower parsed already (job_prefetch.h), used
  // by the rebuild where they match the store. Not owned.
  JobPrefetch* prefetch = nullptr;
  // The half-life of queues' fair-share usage (QueueRecord::usage_gpu_hours;
  // Slurm's PriorityDecayHalfLife, 7 days by default).
  Duration usage_half_life = Seconds(7 * 24 * 3600);
  // Per-node metrics (unipool_node_gpus, unipool_node_state) on clusters of
  // at most this many nodes: past it, a scrape would carry millions of lines.
  int32_t node_metrics_max = 10000;
  // A node whose clock is further than this from the server's is skewed:
  // an event on its running jobs, unipool_training_anomalies_total{kind=
  // "ClockSkew"}, and a cause in `unipool diagnose` (etcd warns at 1 s).
  Duration max_clock_offset = Seconds(1);
};

class ControlPlane {
 public:
  // Rebuilds the state kept in `store`. `topo` and `store` must outlive it.
  static Result<std::unique_ptr<ControlPlane>> Open(const Topology& topo, store::Store& store,
                                                    ControlOptions options, Metrics& metrics,
                                                    Logger& log);
  ~ControlPlane();

  // ---- Jobs ---------------------------------------------------------------
  // Errors: kInvalidArgument naming the field (unknown queue, tier or
  // partition; a shape the cluster cannot hold).
  // A tenant's submission (of `spec_bytes` of text) is checked against the
  // queue's SubmitLimits first; its job runs as its token's runAs, else the
  // queue's (JobRecord::identity).
  struct Submitter {
    std::string owner;  // the token's name
    bool tenant = false;
    size_t spec_bytes = 0;
    std::string run_as;  // the token's; "" = none
  };
  Result<JobRecord> Submit(const io::JobRequest& request, const Submitter& by);
  // What Submit would refuse beyond the spec itself (queue, tier,
  // partition, size), without submitting.
  Status Validate(const io::JobRequest& request) const;
  // kNotFound also when the caller's scope does not see the job.
  Result<JobRecord> Get(int64_t id, const Scope& scope) const;
  // Newest first. *more: the page stopped at the limit or the byte cap.
  std::vector<JobRecord> List(const JobFilter& filter, const Scope& scope,
                              bool* more = nullptr) const;
  Result<std::vector<JobEvent>> Events(int64_t id, const Scope& scope) const;
  // Why pending, or where it runs and why there.
  Result<std::string> Explain(int64_t id, const Scope& scope) const;
  // What squeue shows of a pending job: the reason in one word
  // (Scheduler::ReasonCode, or Backoff while it waits to restart after a
  // failure) and, when the scheduler reserved GPUs for it, when it expects
  // to start it (else -1).
  struct PendingView {
    std::string reason;
    Time start = Time(-1);
  };
  // Of each job in `ids` that is pending (the others are left out).
  std::map<int64_t, PendingView> Pending(const std::vector<int64_t>& ids) const;
  // A job's progress reports over time, for charts: the numeric step, loss,
  // throughput and gradNorm of each (NaN where a report had none). Memory
  // only (a restarted or new leader starts empty), at most
  // kProgressPoints a job: when full, every other point is dropped, so the
  // whole run stays in view at half the resolution.
  struct ProgressPoint {
    Time time;
    double step, loss, throughput, grad_norm;
  };
  static constexpr size_t kProgressPoints = 256;
  Result<std::vector<ProgressPoint>> Progress(int64_t id, const Scope& scope) const;
  // The current run's latest per-rank step times (train::SignalWindow),
  // by rank; empty when it reported none. Memory only.
  std::map<int32_t, train::SignalWindow::RankState> RankSignals(int64_t id) const;
  // While the job is pending for a scheduler reason: what would let it
  // start (Scheduler::Unblock); "" otherwise.
  std::string Unblock(int64_t id) const;
  // The control plane's clock (ControlOptions::clock).
  Time Now() const { return options_.clock(); }
  // Moves the jobs that ended history_retention ago (a batch at a time) to
  // the history: archived durably first, then deleted from the store.
  // Errors: none that stop the control plane (logged, counted, retried).
  void ArchiveEnded();
  // Pending: removed. Running: its processes are told to stop.
  Result<JobRecord> Cancel(int64_t id, const Scope& scope);

  // ---- Reports from agents ------------------------------------------------
  // kind: succeeded | failed | hung | disrupted | stopped | checkpoint |
  // progress | signals | gone. `generation` must be the job's current run (stale
  // reports are refused: kFailedPrecondition), except for "gone": `node`'s
  // processes of the job's runs up to `generation` are dead. Any final
  // report or "gone" from a node the job's next run waits for
  // (JobRecord::clearing) releases that wait, even when it is refused.
  // `data`: a progress report's metrics (a JSON object's text) or "".
  // `node`: the reporting agent's node ("" for an admin). A preempted job
  // is stopped once every node of it reported "stopped" (or an admin did).
  Status Report(int64_t id, int64_t generation, const std::string& kind, const std::string& why,
                const std::string& data = "", const std::string& node = "");

  // ---- Nodes --------------------------------------------------------------
  std::vector<NodeRecord> Nodes() const;
  Result<NodeRecord> Node(const std::string& name) const;
  // action: cordon | drain | uncordon.
  Result<NodeRecord> SetNodeAdmin(const std::string& name, const std::string& action,
                                  const std::string& why);
  // An agent's heartbeat: renews the node's lease. A health other than
  // "ok" drains the node (like Slurm's HealthCheckProgram); `address` and
  // `agent_url` say where the node and its agent are reached.
  struct HeartbeatInfo {
    std::string health = "ok";
    std::string address;
    std::string agent_url;
    std::string agent_secret;
    std::vector<GpuSample> gpus;  // its GPUs' readings; none from virtual GPUs
    std::vector<GpuXidCount> xids;  // its GPUs' Xid errors since its agent started
    // Its clock minus the server's, seconds, as its agent measured it from
    // the last reply's serverTimeMs; NaN: not measured.
    double clock_offset_s = std::nan("");
  };
  Status Heartbeat(const std::string& name, const HeartbeatInfo& info);
  // The common heartbeat, for the event loop: when the node is live and the
  // beat changes nothing, renews the lease and returns true. Never waits:
  // false when the lock is taken (a scheduling pass) or the beat has
  // something to write; then send it through Heartbeat.
  bool RenewLease(const std::string& name, const HeartbeatInfo& info);
  // An agent joined as `name`: records the hash of its new token (the old
  // one stops working). `live_ok` false (a join token): kFailedPrecondition
  // when the node's agent is live (registered, a heartbeat within the
  // lease), so a stolen join token cannot take over a running node.
  Status Register(const std::string& name, const std::string& token_hash, bool live_ok);
  // The node whose agent token hashes to `token_hash`, if any.
  std::optional<std::string> NodeOfToken(const std::string& token_hash) const;
  // Live nodes other than `name` whose agents can be reached (their URL),
  // at most `limit`; *live: how many nodes are live in all.
  std::vector<std::pair<std::string, std::string>> Peers(const std::string& name, size_t limit,
                                                         int64_t* live) const;
  // Live nodes at the last reconcile (counted with an outage grace only).
  int64_t LiveNodes() const { return live_nodes_.load(); }
  // Running jobs with tasks on `name`, and jobs waiting for `name` to
  // confirm that an earlier run's processes are gone (JobRecord::clearing).
  std::vector<JobRecord> Assignments(const std::string& name) const;
  // Job ids with tasks on `name` (scoped).
  std::vector<int64_t> JobsOn(const std::string& name, const Scope& scope) const;
  // A node's GPUs now: held by running (or stopping) jobs, and free for the
  // scheduler to place on (0 on a node it may not use).
  struct NodeUsage {
    int32_t allocated = 0, free = 0;
    std::vector<std::pair<int64_t, std::string>> jobs;  // running there: id, queue
  };
  // By node name.
  std::map<std::string, NodeUsage> Usage() const;

  // ---- Queues -------------------------------------------------------------
  std::vector<QueueRecord> Queues(const Scope& scope) const;
  // Creates or updates. Errors: bad values, unknown parent, a changed parent.
  Result<QueueRecord> SetQueue(const sched::QueueSpec& spec, const SubmitLimits& limits = {});

  // The checkpoint grace of `queue`'s preempted jobs, in seconds.
  int64_t GraceSeconds(const std::string& queue) const;
  // How often the job should checkpoint, in seconds (0: no advice): its
  // spec.checkpoint.interval, else Daly's interval for its last measured
  // checkpoint write and the MTBF of its nodes at
  // ControlOptions::node_failures_per_1000_days. Agents pass it to the job
  // as UNIPOOL_CHECKPOINT_INTERVAL.
  double CheckpointIntervalSeconds(const JobRecord& job) const;

  // What the dashboard draws of the topology: group `group` of tier `tier`
  // (the top tier's one group: the whole cluster) and its children, groups
  // of the tier below, or its nodes for tier 0; each with its GPUs held,
  // free and unavailable, and with `job` > 0 those that job holds.
  struct GroupUsage {
    std::string name;
    int tier = -1;      // -1: a node
    int32_t index = 0;  // the group's (or node's) index
    int32_t nodes = 0, nodes_down = 0;
    int64_t gpus = 0, allocated = 0, free = 0, job_gpus = 0;
    // The GPUs' power draw from the agents' last readings (nvidia-smi):
    // the sum, over power_gpus GPUs that gave one (0: none, virtual GPUs).
    double power_w = 0;
    int64_t power_gpus = 0;
    std::string state;  // nodes only
  };
  // [0] is the group itself. Errors: kNotFound for no such tier or group.
  Result<std::vector<GroupUsage>> GroupView(int tier, int32_t group, int64_t job) const;

  // ---- Cluster ------------------------------------------------------------
  // Job counts only of the queues `scope` sees.
  Summary GetSummary(const Scope& scope = {}) const;
  // Writes the queues' fair-share usage now (at a clean stop). Errors: the
  // store's (read-only, deposed): the usage of the last minute is lost.
  Status FlushUsage();
  // One reconcile pass (the server's loop calls it every few hundred ms and
  // when woken by a change).
  Status Reconcile();
  // Blocks up to `timeout` until a change asks for a reconcile pass.
  void WaitForWork(std::chrono::milliseconds timeout);
  // Fills the gauges of `metrics` (at scrape time).
  void UpdateGauges();
  // Declares every metric the control plane writes. Once per Metrics.
  static void DeclareMetrics(Metrics& m);

  // False while the store is read-only after a failed write (a full or
  // broken disk): /readyz answers 503 with WhyNotWritable(). Writes resume
  // by themselves when the store can write again.
  bool Writable() const { return store_.Writable().ok(); }
  std::string WhyNotWritable() const { return store_.Writable().message(); }

  const Topology& topology() const { return topo_; }
  store::Store& store() { return store_; }

 private:
  ControlPlane(const Topology& topo, store::Store& store, ControlOptions options, Metrics& metrics,
               Logger& log);
  Status Recover();
  Status RecoverJob(JobRecord& job);
  Result<sched::JobSpec> ToSchedSpec(int64_t id, const io::JobRequest& r) const;
  Status SetShape(const io::JobRequest& r, sched::JobSpec& s) const;
  int32_t NodeShare(const io::JobRequest& r) const;
  // How a job whose spec gave no shape was split ("" when it gave one or
  // runs on one node): said when it starts. REQUIRES: mu_, job.tasks set.
  std::string ShapeNote(const JobRecord& job) const;
  int32_t PriorityOf(const io::JobRequest& r) const;
  // Appends the record and an event to `txn`.
  void Write(JobRecord& job, const std::string& type, const std::string& message, store::Txn& txn);
  void WriteNode(const NodeRecord& node, store::Txn& txn);
  // Applies `txn` to the store. When the store fails, the memory state is
  // rebuilt from what is durable (the callers changed memory first).
  Result<int64_t> ApplyLocked(const store::Txn& txn);
  // store_.Sync, and the same rebuild when the write failed.
  Status SyncOrRebuild(int64_t revision);
  // REQUIRES: mu_. Rebuilds jobs, nodes, queues and the scheduler from the
  // store after a failed write, or after the store read its backend again
  // (once per store failure or reset); node liveness, which is never
  // stored, is kept. `failed`: a write failed (logged and counted as such).
  void RebuildLocked(bool failed = true);
  // REQUIRES: mu_. The store's writability; first, when the store is
  // writable again after reading its backend anew (a lost quorum's
  // recovery, which brings in any write whose answer was lost and that
  // landed), memory is rebuilt from it, so no change is built on stale
  // memory. Every mutation checks this before it changes memory.
  Status WritableLocked();
  std::vector<NodeRecord> InitialNodes() const;
  // REQUIRES: mu_. Usage of every node, by node index.
  std::vector<NodeUsage> UsageLocked() const;
  void Activate(const JobRecord& job);
  void Deactivate(const JobRecord& job);
  // REQUIRES: mu_. Who `by`'s job in `queue` runs as.
  RunIdentity IdentityOf(const std::string& queue, const Submitter& by) const;
  // REQUIRES: mu_. kResourceExhausted when `owner`'s submission to `queue`
  // is over a limit; takes a rate token otherwise.
  Status CheckLimits(const std::string& queue, const std::string& owner, size_t spec_bytes,
                     Time now);
  Status Finish(JobRecord& job, JobState state, const std::string& type, const std::string& message,
                store::Txn& txn);
  void ApplyDecision(const sched::Decision& d, Time now, store::Txn& txn);
  // Training signals (control_signals.cc). REQUIRES: mu_. A "signals"
  // report's ranks and a progress report's loss and gradient norm feed the
  // job's window; each finding becomes an event and a counted metric, and
  // a straggler of a job with onStraggler: replace moves it off its node.
  void SignalsLocked(JobRecord& job, const std::string& data, Time now, store::Txn& txn);
  void LossLocked(JobRecord& job, const std::string& progress, Time now, store::Txn& txn);
  train::SignalWindow& WindowLocked(const JobRecord& job);
  void ActOnFinding(JobRecord& job, const train::Finding& f, Time now, store::Txn& txn);
  void NoteClockLocked(NodeRecord& n, double offset_s);
  void ReportClockSkew(store::Txn& txn);
  void ResizeInPlace(JobRecord& job, const sched::ResizeJob& x, Time now, store::Txn& txn);
  void StopHeldRun(JobRecord& job, const sched::PreemptJob& x, Time now, store::Txn& txn);
  void ExpireLeases(Time now, store::Txn& txn);
  // The job's own failure, reported from `node` ("" when none): restarted
  // after its backoff, or Failed when its restarts are spent.
  Status FailRunLocked(JobRecord& job, const std::string& node, const std::string& why,
                       const std::string& event, Time now, store::Txn& txn);
  // The job's current run ends while its processes may live on: every node
  // of it but `confirmed` (whose agent reported the end) and nodes already
  // lost goes into job.clearing.
  // `skip_lost`: nodes already lost (or unknown) are not waited for; off
  // while recovering, before liveness is known (ReleaseLostNodes sweeps).
  void AwaitOldRun(JobRecord& job, const std::string& confirmed, bool skip_lost = true);
  // REQUIRES: mu_. Adds a progress report's numbers to progress_.
  void RecordProgress(int64_t id, Time now, const std::string& data);
  // REQUIRES: mu_. The costs measured on a job's runs (JobRecord), and
  // handing them to the scheduler.
  void MeasureCheckpoint(JobRecord& job, const std::string& data);
  void MeasureStartUp(JobRecord& job, Time now);
  void PushMeasuredCosts(const JobRecord& job);
  // Report's work for the job's current run (REQUIRES: mu_).
  Status ApplyReportLocked(JobRecord& job, const std::string& kind, const std::string& why,
                           const std::string& data, const std::string& node, store::Txn& txn);
  // A final report or "gone" from `node` ("" for an admin's "gone": every
  // node) releases its entries of job.clearing up to `generation`; true
  // when it released one.
  bool ReleasedBy(JobRecord& job, const std::string& kind, int64_t generation,
                  const std::string& node);
  // A lost node is fenced, and a node gone from the cluster file has no
  // agent: each reconcile pass drops them from every job's clearing (also
  // after a failed write rebuilt the jobs from the store).
  void ReleaseLostNodes(store::Txn& txn);
  bool PeerLostLocked(JobRecord& job, const std::string& node, const std::string& why,
                      const std::string& data, Time now);
  void DecidePeerFailures(Time now, store::Txn& txn);
  // ExpireLeases' view of an outage (see ControlOptions::outage_grace).
  bool MostNodesSilent(Time now);
  void EnforceTimeLimits(Time now, store::Txn& txn);
  // REQUIRES: mu_. The unipool_gpu_* gauges of `n`'s GPUs.
  void SetGpuGauges(const NodeRecord& n);
  // Decays every queue's usage to `now` and adds what it holds meanwhile.
  void ChargeUsage(Time now);
  // Adds what each running job drew since its last pass (JobRecord::
  // energy_joules) and notes what it draws now.
  void ChargeEnergy(Time now);
  void SetPowerGauges();
  // W a job's GPUs draw now and the source of the figure.
  std::pair<double, const char*> JobPower(const JobRecord& job) const;
  // Puts the queues' usage in `txn` (UsageKey) when a minute has passed
  // since it was last written: a restart or a failover keeps fair share's
  // history (losing at most that minute after a kill -9).
  void WriteUsage(Time now, store::Txn& txn, bool force = false);
  // REQUIRES: mu_. Takes the usage a former run wrote, once, at start.
  void RecoverUsage();
  void SyncPreempted(store::Txn& txn);
  void SetSchedNodeState(NodeRecord& n, Time now);
  // Whether a healthy beat has something to write (the node comes up or
  // back, or its health, address or agent URL changed).
  static bool BeatChanges(const NodeRecord& n, const HeartbeatInfo& info);
  void RetryAfterBackoff(Time now, store::Txn& txn);
  std::vector<TaskView> ToTasks(const sched::Placement& p) const;
  int32_t PickMasterPort(const JobRecord& job);
  sched::Placement ToPlacement(const std::vector<TaskView>& tasks) const;
  std::vector<JobRecord> ListLive(const JobFilter& f, const Scope& scope, bool* more) const;
  // History (control_history.cc).
  Result<JobRecord> FromHistory(int64_t id, const Scope& scope, std::string* events) const;
  void ListArchived(const JobFilter& f, const Scope& scope, std::vector<JobRecord>& out,
                    bool* more) const;
  struct Archived {  // a job copied to the history
    int64_t id = 0;
    int64_t events = 0;             // its events then (more since: archived again first)
    std::vector<std::string> keys;  // its keys in the store, the record last
  };
  std::vector<Archived> ArchiveBatchLocked(Time now, std::vector<store::ArchivedJob>& batch) const;
  void DropArchived(const std::vector<Archived>& jobs);

  const Topology& topo_;
  store::Store& store_;
  ControlOptions options_;
  Metrics& metrics_;
  Logger& log_;

  mutable std::mutex mu_;
  std::condition_variable work_;
  bool dirty_ = true;
  bool outage_ = false;                 // MostNodesSilent at the last reconcile
  std::atomic<int64_t> live_nodes_{0};  // counted by MostNodesSilent
  std::set<int64_t> peer_failures_;     // jobs with a peer_failure_generation
  struct JobSignals {
    int64_t generation = 0;
    int64_t membership = 0;  // the ranks change with it: a new window
    train::SignalWindow window;
  };
  std::map<int64_t, JobSignals> signals_;  // running jobs' training signals (memory only)
  std::vector<int32_t> clock_onsets_;      // nodes newly skewed, for the next reconcile
  std::set<int64_t> clearing_;          // active jobs with a non-empty JobRecord::clearing
  std::unique_ptr<sched::Scheduler> sched_;
  std::map<int64_t, JobRecord> jobs_;
  std::map<int64_t, std::vector<ProgressPoint>> progress_;  // by job (Progress)
  std::map<std::string, double> usage_;          // decayed GPU-seconds, by queue (ChargeUsage)
  Time usage_at_;                                // when usage_ was last charged
  Time usage_written_;                           // when usage_ was last put in the store
  std::set<int64_t> active_;                     // not terminal
  std::set<std::pair<int64_t, int64_t>> ended_;  // terminal: (finished, id), for the history
  std::map<std::string, int64_t> active_by_queue_;
  std::map<std::string, SubmitLimits> limits_;  // by queue
  struct Bucket {
    double tokens = 0;
    Time at;
  };
  std::map<std::string, Bucket> buckets_;  // by queue and submitter
  std::set<int64_t> timed_;                // running (or recently) with a time limit
  std::set<int64_t> backoff_;              // failed, waiting to restart (JobRecord::retry_at)
  std::vector<NodeRecord> nodes_;
  std::map<std::string, std::string> node_tokens_;  // token hash -> node
  int64_t next_id_ = 1;
  std::mt19937_64 ports_{std::random_device{}()};  // for PickMasterPort
  int64_t rebuilt_failures_ = 0;                   // store_.failures() at the last rebuild
};

}  // namespace unipool::server
