// Scheduler: the one pure, deterministic scheduler that both the server and
// the simulator drive. It is told what happened (events, each with an
// explicit `now`) and, on Schedule(now), returns what to do (decisions).
//
// Three decisions are kept apart:
//   order  (who goes next)  - hierarchical fair share between queues,
//                             priority then submit time within a queue;
//   place  (where)          - the global level picks a partition, the
//                             partition's Pool and the TopologyPlacer pick GPUs;
//   plan   (when)           - a reservation for the first job that cannot
//                             start, from running jobs' runtime estimates;
//                             later jobs backfill only around it.
// When a job cannot fit, checkpoint-aware preemption may free GPUs for it.
//
// A cycle (Schedule) runs in named phases: StopOverdue, PlacePreemptors,
// PlaceInOrder (with Shrink, Preempt and Reserve on failure), Grow.
//
// Determinism: same events in the same order give the same decisions. No
// clocks, threads or randomness; ties broken by ids.
//
// Ownership: holds a copy of nothing big; `topo` must outlive the scheduler,
// and node state changes go through SetNodeState, not the Topology.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/sched/job.h"
#include "core/sched/placer.h"
#include "core/sched/pool.h"
#include "core/sched/power.h"
#include "core/sched/queues.h"

namespace unipool::sched {

enum class PlacerKind {
  kTopology,  // TopologyPlacer: the default
  kFirstFit,  // FirstFitPlacer: a topology-unaware baseline for comparisons
};

struct SchedulerOptions {
  PlacerKind placer = PlacerKind::kTopology;
  // How Explain writes a time: the server's clock is wall time and says
  // 2026-12-01T10:00:00.000Z; the simulator's starts at 0 (null: "t=3600s").
  std::string (*format_time)(Time) = nullptr;
  // A job runs at least this long after it starts before it may be
  // preempted again (no thrash).
  Duration min_runtime = Seconds(300);
  // Checkpoint-aware preemption on or off.
  bool preemption = true;
  // Backfill around the first blocked job's reservation.
  bool backfill = true;
  // A job whose preemption attempt found no victims waits this long before
  // trying again (each attempt looks at every running job).
  Duration preemption_retry = Seconds(30);
  // Preemption searches per cycle (each looks at every running job); jobs
  // past the limit try again in a later cycle.
  int max_preemption_attempts_per_cycle = 4;
  // A preempted job not reported stopped this long after its deadline is
  // taken as gone (its driver was told to kill it at the deadline).
  Duration stop_timeout = Seconds(60);
  // How often a standing reservation is recomputed (it is always recomputed
  // when its holder changes).
  Duration reservation_refresh = Seconds(30);
  // A node that fails `flaky_failures` times within `flaky_window` is
  // cordoned automatically (state flaky).
  int flaky_failures = 3;
  Duration flaky_window = Seconds(24 * 3600);
  // A running job that loses nodes restarts from its checkpoint in place:
  // only the lost slices are replaced (by a hot spare, or free GPUs inside
  // the group it spans); off: it is requeued and placed again from scratch.
  bool restart_in_place = true;
  // Nodes labelled spare_label=true are hot spares: kept out of placement,
  // they replace a failed node of a running job in the same scale-up domain
  // (else the same leaf), so the job restarts in place. The repaired node
  // becomes the spare.
  std::string spare_label = "unipool.io/spare";
  // Start-or-wait for compact gangs: a gang that fits now only across
  // more groups than it needs (a 16-node job over two leaves) waits for a
  // compact place when the expected wait, from running jobs' estimates, is
  // shorter than the spread would cost it (its run time x the slowdown of
  // its collectives at the crossed tier's bandwidth x comm_share), and
  // never longer than this (Philly relaxed locality after a timer). The
  // group that frees first is reserved for it. 0: start as soon as it fits.
  Duration compact_max_wait = Seconds(60);
  // The share of a gang's step spent in collectives when placed compactly,
  // for jobs that give none (JobSpec::comm_share). Measured LLM training
  // spends 20% to over 50% of an iteration communicating (Analyzing
  // Communication Predictability in LLM Training, arXiv 2512, 2025), more
  // where links are oversubscribed; the default errs toward compact, as
  // compact_max_wait bounds what waiting can cost, and sits on the plateau
  // of the measured curve (0.85 to 1 place the same; docs/scheduling.md).
  double comm_share = 0.9;
  // Keep capped power domains within their caps (Topology::power_cap);
  // off: the caps are only reported (a "what would the cap cost" baseline).
  bool power_caps = true;
  // Fail jobs that can never run instead of keeping them pending.
  bool fail_infeasible = false;
  // Upper bound on placement attempts in one cycle (pending jobs beyond it
  // wait for the next cycle with their previous reason).
  int64_t max_attempts_per_cycle = 100000;
  // Upper bound on pending jobs looked at in one cycle, placement attempt
  // or not (0 = no bound). A job whose shape already failed this cycle costs
  // no attempt, so without this bound a queue of 100,000 alike jobs on a
  // full cluster is walked whole every cycle (Slurm's default_queue_depth
  // counts every job it tests, too).
  int64_t max_jobs_examined_per_cycle = 0;
};

// What the scheduler knows of one job.
struct JobInfo {
  JobSpec spec;
  JobPhase phase = JobPhase::kPending;
  Time submitted;
  Time started;          // of the current run
  Time last_checkpoint;  // of the current run; = started until one is reported
  Time preempt_deadline;
  Placement placement;  // while running or preempting
  int32_t partition = -1;
  int32_t restarts = 0;
  int32_t preemptions = 0;
  int64_t lost_gpu_seconds = 0;  // over all interruptions
  bool borrowing = false;        // started beyond its queue's guarantee
  bool backfilled = false;       // started in a reservation's way
  PendingReason reason = reason::New{};
  std::vector<JobId> victims;  // preemptions under way for this job
  Time last_preempt_attempt = Time(-1);
  Time compact_since = Time(-1);  // first chose to wait for a compact place
  // GPU-seconds its runs have held, up to attained_since (the last start
  // or resize) for a running job: a QueueOrder::kLeastAttained queue's key.
  int64_t attained_gpu_seconds = 0;
  Time attained_since;
  double energy_joules = 0;  // up to attained_since, as attained_gpu_seconds
  int64_t order_rank = 0;  // while pending: its rank in its queue's order
  Gpus allocated() const { return placement.gpus(); }
};

struct SchedulerStats {
  int64_t cycles = 0;
  int64_t placements = 0;  // StartJob + ResizeJob decisions
  int64_t attempts = 0;    // placement searches
  int64_t preemptions = 0;
  int64_t preemption_searches = 0;  // looks at every running job for victims
  int64_t reservations = 0;         // reservation computations
  int64_t requeues = 0;
  int64_t preempted_gpu_seconds = 0;
  int64_t failed_gpu_seconds = 0;
};

class Scheduler {
 public:
  Scheduler(const Topology& topo, SchedulerOptions options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const Topology& topology() const { return *topo_; }
  const SchedulerOptions& options() const { return options_; }
  QueueTree& queues() { return queues_; }
  const QueueTree& queues() const { return queues_; }

  // ---- Events --------------------------------------------------------------
  // Errors: unknown or non-leaf queue, duplicate id, bad shape
  // (gpus not a multiple of task_gpus, task larger than any node, ...).
  // `attained_gpu_seconds`: what its earlier runs held, for a job the
  // driver queues again (a restart after a backoff, a server's recovery).
  Status Submit(const JobSpec& spec, Time now, int64_t attained_gpu_seconds = 0);
  // Takes back a job that was running at `placement` before its driver
  // restarted (the server recovering from its store). No decision is made.
  // Errors: as Submit, plus a GPU of the placement not free or not usable.
  Status Restore(const JobSpec& spec, const Placement& placement, Time submitted, Time started,
                 Time last_checkpoint, int32_t restarts);
  // A restored job was being preempted: it stops by `deadline` (or is taken
  // as gone stop_timeout after it). Errors: unknown or not running.
  Status RestorePreempting(JobId job, Time deadline);
  // Removes a pending job, or releases a running one's GPUs at once.
  Status Cancel(JobId job, Time now);
  // A running job ended (success or a terminal failure): its GPUs are free.
  Status Finish(JobId job, Time now);
  // A running job wrote a checkpoint at `at`.
  Status Checkpointed(JobId job, Time at);
  // Costs measured on the job's runs replace its spec's: how long a
  // checkpoint takes to write, how long a run takes to start working
  // (0: keep the spec's), and whether it saves when told to stop. They
  // price preempting it (PreemptionCost). Errors: unknown job.
  Status SetMeasuredCosts(JobId job, Duration checkpoint_cost, Duration restart_cost,
                          bool saves_on_stop);
  // A preempted job's processes are gone: its GPUs are free and the job is
  // pending again, to resume from its last checkpoint.
  Status Stopped(JobId job, Time now);
  // A task of a running job failed (not the node): the gang is requeued
  // from its last checkpoint on the next cycle.
  Status TaskFailed(JobId job, Time now);
  // A running job leaves `node` (a straggler's, which the caller cordons):
  // the gang is requeued from its last checkpoint like after a lost node
  // (RequeueJob with `why`), a disruption, not the job's failure. Errors:
  // unknown job, not running, not on `node`. An elastic continue job that
  // stays at least its minimum without the node drops it in place instead
  // (ResizeJob in_place) and grows onto another (Grow).
  Status Replace(JobId job, NodeId node, const std::string& why, Time now);
  // Whether a running job has GPUs enough without `node`: the ones it
  // holds elsewhere and the free usable ones off the node reach its
  // smallest size (min_gpus when elastic). A count, not a placement:
  // topology may still keep it waiting. Callers ask before cordoning a
  // straggler's node, so that a slow node is not traded for no node.
  // False for an unknown or not running job.
  bool HasRoomWithout(JobId job, NodeId node) const;
  // Node up/down/cordoned/drained/flaky. Down requeues its jobs (lost work
  // accounted), but an elastic continue job goes on without it in place; drained preempts them with
  // their queue's grace period; cordoned lets them run but places nothing new.
  Status SetNodeState(NodeId node, NodeState state, Time now);
  // The same for several nodes that change together (a switch or power
  // domain failing): every job hit restarts once.
  Status SetNodeStates(const std::vector<NodeId>& nodes, NodeState state, Time now);

  // ---- Decisions -------------------------------------------------------------
  // Runs one cycle; returns the decisions of the events since the last call
  // and of this cycle, in order.
  std::vector<Decision> Schedule(Time now);

  // ---- Queries ---------------------------------------------------------------
  const JobInfo* Find(JobId job) const;
  // Why a job of `spec` could never run as asked (more GPUs than its queue's
  // limit, or than the cluster or the asked group holds with every node up
  // and idle), in words; nullopt when it could. REQUIRES: Check(spec) ok
  // but for the id.
  std::optional<std::string> WhyNever(const JobSpec& spec) const;
  // The task size a job of `spec` gets: its task_gpus, else the largest
  // divisor of its GPUs that fits the largest node (8 -> 8, 12 -> 6 on
  // 8-GPU nodes, 24 -> 8, 3 -> 3).
  int32_t TaskGpus(const JobSpec& spec) const;
  // A sentence a user understands: why pending, or why placed where it is.
  std::string Explain(JobId job) const;
  std::string ExplainReason(const PendingReason& r) const;
  // What would let a job pending for `r` start, in words a user can act on
  // (which limit to wait for or raise, which size fits now, when a
  // reservation begins); `spec` is the pending job's.
  std::string Unblock(const PendingReason& r, const JobSpec& spec) const;
  // The reason in one word, as squeue's REASON column gives it: Resources,
  // Priority, QueueLimit, NoGuarantee, Topology, Reserved, Preempting,
  // Power, Infeasible or New.
  static const char* ReasonCode(const PendingReason& r);
  // When a pending job holding a reservation expects to start; -1 when it
  // holds none or the time is unknown.
  static Time EstimatedStart(const PendingReason& r);
  const SchedulerStats& stats() const { return stats_; }
  int64_t pending_count() const { return static_cast<int64_t>(pending_count_); }
  int64_t running_count() const { return static_cast<int64_t>(running_.size()); }
  Gpus allocated_gpus() const { return allocated_; }
  // Jobs with GPUs on `node`.
  const std::vector<JobId>& JobsOn(NodeId node) const { return node_jobs_[node.value()]; }
  NodeState node_state(NodeId node) const { return node_state_[node.value()]; }
  // The free-capacity index of the whole cluster (read-only).
  const Pool& pool() const { return global_; }
  // Free usable GPUs in the whole cluster.
  Gpus free_gpus() const;
  // IT power by the GPUs' power model, and the capped power domains.
  const PowerBudget& power() const { return power_; }
  // Energy a job's runs have drawn up to `now` (IT energy: its GPUs at
  // training power plus their share of the host), joules.
  double EnergyJoules(const JobInfo& job, Time now) const;
  // Checks the scheduler's invariants (no GPU twice, gangs whole, limits
  // kept, every pending job has a reason); the first violation or OK.
  Status CheckInvariants() const;

 private:
  // A queue's pending order: priority, then the queue's order (the job's
  // order_rank), then submission, then id.
  struct PendingKey {
    int32_t neg_priority;
    int64_t rank;
    Time submitted;
    JobId id;
    auto operator<=>(const PendingKey&) const = default;
  };
  struct Reservation {
    JobId holder;
    Time at;  // < 0: unknown (no estimates)
    int tier = -1;
    GroupId group;
    Time computed;
    // For a compact gang: every job that would not end before `at` is kept
    // out of the group (others keep out of a reservation only when they
    // are not preemptible).
    bool hard = false;
  };
  struct CycleState;

  // Phases.
  void StopOverdue(Time now);
  void PlacePreemptors(CycleState& cs);
  void PlaceInOrder(CycleState& cs);
  bool TryPlace(JobInfo& job, CycleState& cs);
  void Grow(CycleState& cs);

  // Place.
  struct Attempt;
  Attempt Search(const JobInfo& job, Gpus gpus, const PlaceRequest& base) const;
  std::vector<int32_t> CandidatePartitions(const JobInfo& job) const;
  Pool& PoolFor(int32_t partition);
  const Pool& PoolFor(int32_t partition) const;
  void Commit(JobInfo& job, const Placement& p, int32_t partition, Time now);
  void Release(JobInfo& job);
  void ApplyToPools(const std::vector<Task>& tasks, bool take);

  // Preempt and plan.
  bool TryShrink(JobInfo& job, const PlaceRequest& base, CycleState& cs);
  void DropSlices(JobInfo& job, std::vector<Task> keep, const std::vector<Task>& give, NodeId lost,
                  Time now);
  bool ContinueWithout(JobInfo& job, const std::vector<Task>& lost, Time now);
  bool TryPreempt(JobInfo& job, CycleState& cs);
  struct Victim;
  struct VictimSet;
  struct VictimSets;
  std::vector<Victim> PreemptionCandidates(const JobInfo& job, Time now) const;
  void CheapestVictimSets(const JobSpec& s, Gpus need, VictimSets& sets);
  bool PreemptFirstThatFits(JobInfo& job, Gpus need, const VictimSets& sets, Time now);
  bool MayPreempt(const JobInfo& preemptor, const JobInfo& victim, Time now) const;
  void Reserve(JobInfo& job, CycleState& cs);

  // Start or wait (scheduler_compact.cc).
  struct Excess {
    int tier = -1;  // the lowest tier where a placement uses more groups than needed
    int64_t min_groups = 0, used_groups = 0;
  };
  struct CompactPlace {
    Time at = Time(-1);
    int tier = -1;  // the group to reserve
    GroupId group;
  };
  bool WaitForCompact(JobInfo& job, const Placement& spread, CycleState& cs);
  Excess ExcessOf(const JobSpec& spec, const Placement& spread) const;
  double SpreadSlowdown(const JobSpec& spec, const Placement& spread, const Excess& e) const;
  CompactPlace EarliestCompact(const JobSpec& spec, const Placement& spread, const Excess& e,
                               Time now) const;

  // Bookkeeping.
  Status Check(const JobSpec& spec) const;
  JobInfo NewJob(const JobSpec& spec, Time submitted) const;
  void MakePending(JobInfo& job, Time now);
  PendingKey KeyOf(const JobInfo& job) const {
    return PendingKey{-job.spec.priority, job.order_rank, job.submitted, job.spec.id};
  }
  int64_t OrderRank(const JobInfo& job) const;
  // Re-sorts the pending jobs of every queue whose order changed
  // (QueueTree::Update) since its jobs were sorted.
  void ApplyQueueOrders();
  // Adds what the job's GPUs held since attained_since to its attained
  // service, counting on from `now`. Before its placement changes.
  void Accrue(JobInfo& job, Time now);
  void Requeue(JobInfo& job, NodeId failed, Time now);
  void RestartAfterFailure(JobInfo& job, Time now);
  std::optional<std::vector<Task>> Replacements(const JobInfo& job, const std::vector<Task>& lost);
  // The placer's answer for more tasks of a job that runs `have`; a job
  // with a node per task (req.max_tasks_per_node 1) gets none of them on
  // the nodes it already has (they are hidden from `pool` meanwhile).
  PlaceOutcome PlaceBeside(Pool& pool, const PlaceRequest& req, const std::vector<Task>& have);
  std::optional<NodeId> FindSpare(const JobInfo& job, NodeId failed, int32_t gpus) const;
  // `usable`: up and not a spare; a node power keeps hidden stays hidden.
  void SetUsable(NodeId node, bool usable);
  bool Eligible(NodeId node) const {
    return node_state_[node.value()] == NodeState::kUp && !spare_[node.value()];
  }
  // Re-decides which nodes power hides (PowerBudget::Refresh) when GPUs
  // came free or nodes changed since the last time.
  void RefreshPower();
  // W a job's GPUs draw while it runs (training + host per GPU).
  int64_t RunningWatts(const JobInfo& job) const;
  int64_t LostGpuSeconds(const JobInfo& job, Time now) const;
  // What preempting it at `now` would cost, in GPU-seconds: LostGpuSeconds,
  // or for a job that saves on stop within its grace, the write (at most
  // the work since its checkpoint) and the restart.
  int64_t PreemptionCost(const JobInfo& job, Time now) const;
  std::optional<std::string> Infeasible(const JobInfo& job) const;

  const Topology* topo_;
  SchedulerOptions options_;
  QueueTree queues_;
  Pool global_;                                        // every node
  std::vector<std::unique_ptr<Pool>> partitions_;      // one per partition
  std::vector<std::vector<int32_t>> group_partition_;  // [tier][group]: -1 mixed
  // [tier][group]: CheapestVictimSets' scratch, kUnseen between calls.
  static constexpr int32_t kUnseen = -1;
  std::vector<std::vector<int32_t>> group_slot_;
  TopologyPlacer topology_placer_;
  FirstFitPlacer first_fit_placer_;
  const Placer& placer_;

  std::unordered_map<JobId, JobInfo> jobs_;
  std::vector<std::set<PendingKey>> pending_;  // [queue]
  std::vector<QueueOrder> pending_order_;      // [queue] the order pending_ is in
  size_t pending_count_ = 0;
  std::set<JobId> running_;                      // running and preempting
  std::vector<std::vector<JobId>> node_jobs_;    // [node]
  std::vector<std::deque<Time>> node_failures_;  // [node]
  std::vector<NodeState> node_state_;
  std::vector<bool> spare_;       // [node] a hot spare
  std::set<JobId> preemptors_;    // jobs whose victims are stopping
  std::set<JobId> elastic_;       // running elastic jobs
  std::set<JobId> preempting_;    // told to stop, not yet gone
  bool freed_since_grow_ = true;  // GPUs came free since Grow last ran
  std::multiset<int32_t> running_priorities_;
  // [tier][partition + 1]: GPUs of the largest group of the tier within the
  // partition (index 0: any), counting every node as if up and idle.
  std::vector<std::vector<int64_t>> largest_group_;
  std::optional<Reservation> reservation_;
  std::vector<Decision> out_;
  Gpus allocated_;
  SchedulerStats stats_;
  PowerBudget power_;
  bool power_dirty_ = true;  // GPUs freed or node states changed since RefreshPower
};

}  // namespace unipool::sched
