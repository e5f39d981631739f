// The simulator's engine, for its own files only (not part of the API):
// its events, where each job is in its current run, and Simulator::Impl,
// the state of one simulation and its steps. simulator.cc holds the setup,
// failures, stragglers, scheduling and the main loop; simulator_runs.cc
// the job runs (restarts, compute segments, checkpoints to storage,
// preemption, resizes and rates).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

#include "core/base/units.h"
#include "core/sim/simulator.h"
#include "core/sim/storage.h"

namespace unipool::sim::internal {

enum class Ev : uint8_t {
  kArrival,       // a: job
  kBeginCompute,  // a: job, b: epoch (restart done)
  kEndCompute,    // a: job, b: epoch
  kEndWrite,      // a: job, b: epoch (checkpoint written)
  kStopDone,      // a: job, b: epoch (a preempted job is gone)
  kFailure,       // a: process
  kDetect,        // a: process, b: instance
  kRepair,        // a: process, b: instance
  kMaintStart,    // a: maintenance window, b: group
  kMaintEnd,      // a: maintenance window, b: group
  kSample,
  kCycle,       // a scheduling cycle when cycles run on an interval
  kStorage,     // b: storage epoch (a transfer may have finished)
  kSlowStart,   // a: straggler process
  kSlowEnd,     // a: node, b: its slow token (the onset it ends)
  kSlowDetect,  // a: job, b: node (the straggler watch names it)
};

struct Event {
  Time t;
  uint64_t seq;
  Ev kind;
  int64_t a;
  int64_t b;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Where a job is in its current run.
enum class Phase { kQueued, kRestarting, kComputing, kWriting, kStopping, kDead, kDone };

struct JobState {
  Phase phase = Phase::kQueued;
  int64_t epoch = 0;
  Gpus alloc;
  double rate = 1;      // alloc / gpus: progress per wall second
  Duration interval;    // compute between checkpoints (0 = never)
  Duration seg_target;  // work of the current segment
  Duration seg_done;    // work done in it before seg_start
  Time seg_start;       // when the current rate began in this segment
  Time run_start;
  int64_t stop_loss = 0;  // GPU-seconds a preemption under way will lose
  // Checkpoints to storage (SimJob::checkpoint_bytes).
  int32_t nodes = 1;        // of the current run
  int64_t transfer = 0;     // a write or drain under way; 0: none
  bool draining = false;    // it is a two-stage drain
  bool wait_drain = false;  // a checkpoint waits for the previous drain
  Duration undrained;       // work in the fast copy, not yet on storage
  Time snapshot_at;         // when that copy was taken
  Time write_start;         // when the current checkpoint began
  Duration observed_stall;  // of its last checkpoint; 0: none yet
  // Failed (kDead): what it was doing then and when, for an elastic
  // continue job whose survivors resume it in place.
  Phase dead_phase = Phase::kQueued;
  Time dead_at;
};

}  // namespace unipool::sim::internal

namespace unipool::sim {

struct Simulator::Impl {
  using Ev = internal::Ev;
  using Event = internal::Event;
  using Phase = internal::Phase;
  using JobState = internal::JobState;
  using JobId = sched::JobId;

  Impl(const Topology& topo, const SimConfig& config, const PolicyConfig& policy,
       const SimHooks& hooks, Rng& rng)
      : topo(topo),
        config(config),
        policy(policy),
        hooks(hooks),
        rng(rng),
        sched(topo, policy.scheduler) {
    if (!topo.storage().empty()) {
      storage = &topo.storage()[0];
      traffic.emplace(storage->write_bytes_per_s);
    }
  }

  const Topology& topo;
  const SimConfig& config;
  const PolicyConfig& policy;
  const SimHooks& hooks;
  Rng& rng;
  sched::Scheduler sched;

  std::vector<SimJob> jobs;
  std::vector<JobState> state;
  SimOutput out;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue;
  uint64_t seq = 0;
  Time now;
  Time last_integrated;
  bool dirty = false;
  int64_t open_jobs = 0;
  std::vector<int32_t> down_count;  // per node: failures not yet repaired
  std::vector<int32_t> node_cause;  // per node: process of its last failure
  int64_t failures_so_far = 0;
  int64_t nodes_down = 0;
  int64_t down_gpus = 0;
  std::vector<bool> in_maintenance;  // per node: in a maintenance window
  // Stragglers, per node: its step-time factor (1: healthy), the onset
  // now in force, the watch's delay for it, and whether it was cordoned
  // as one (uncordoned when it recovers).
  std::vector<double> slow;
  std::vector<int64_t> slow_token;
  std::vector<Duration> slow_detection;
  std::vector<bool> cordoned_slow;
  int64_t drained_gpus = 0;                  // by maintenance (see SetInMaintenance)
  const StorageSpec* storage = nullptr;      // where checkpoints go; null: none
  std::optional<CheckpointTraffic> traffic;  // on its write bandwidth
  int64_t storage_epoch = 0;                 // the live kStorage event's

  void Push(Time t, Ev kind, int64_t a = 0, int64_t b = 0) {
    queue.push(Event{t, seq++, kind, a, b});
  }

  // ---- Setup -----------------------------------------------------------------

  Status Setup(std::vector<SimJob> input);

  // ---- Failures ----------------------------------------------------------------

  int64_t Instances(const FailureProcess& p) const;
  double RatePerSecond(const FailureProcess& p) const;
  void ScheduleFailure(int64_t p, Time after);
  std::pair<int32_t, int32_t> NodesOf(const FailureProcess& fp, int64_t instance) const;
  void OnFailure(int64_t p);
  void OnDetect(int64_t p, int64_t instance);
  void OnRepair(int64_t p, int64_t instance);
  void SetInMaintenance(int32_t n, bool in);
  void OnMaintenance(int64_t m, int64_t group, bool start);

  // ---- Stragglers ----------------------------------------------------------------

  void ScheduleSlow(int64_t p, Time after);
  void OnSlowStart(int64_t p);
  void OnSlowEnd(int32_t n, int64_t token);
  void OnSlowDetect(int64_t i, int32_t n);
  void RerateJobsOn(int32_t n);
  double RateOf(int64_t i);
  void Rerate(int64_t i, Duration pause = Duration(0));

  // ---- Job runs ------------------------------------------------------------------

  // The scheduler knows job i (in submit order) as id i + 1.
  static JobId Sid(int64_t i) { return JobId(i + 1); }
  static int64_t Index(JobId id) { return id.value() - 1; }

  Duration Interval(const SimJob& j, Gpus alloc, Duration cost) const;
  void Start(int64_t i, const sched::Placement& placement);

  // ---- Checkpoints to storage ------------------------------------------------

  bool Stored(int64_t i) const { return storage && jobs[i].checkpoint_bytes > 0; }
  bool TwoStage(int64_t i) const;
  Duration Transfer(double bytes, double aggregate, const JobState& s) const;
  Duration StallCost(int64_t i) const;
  void StartTransfer(int64_t i, bool drain);
  void CancelTransfer(int64_t i);
  void RescheduleStorage();
  void OnStorage(int64_t epoch);
  void EndDrain(int64_t i);

  Duration WallFor(Duration work, double rate) const {
    return Nanoseconds(static_cast<int64_t>(std::ceil(static_cast<double>(work.value()) / rate)));
  }

  void BeginSegment(int64_t i);
  Duration SegmentProgress(const JobState& s) const;
  void Commit(int64_t i, Duration work);
  void EndCompute(int64_t i);
  void EndWrite(int64_t i);
  void Preempt(int64_t i, Time deadline);
  void StopDone(int64_t i);
  void Resize(const sched::ResizeJob& r);

  // ---- Scheduler -----------------------------------------------------------------

  void Submit(int64_t i);
  void Cycle();
  void Apply(const sched::Decision& d);
  void TakeSample();

  // ---- Main loop -----------------------------------------------------------------

  void Handle(const Event& e);
  bool Stuck() const;

  size_t next_arrival = 0;
  bool cycle_pending = false;  // a kCycle event is queued
  bool due = false;            // a kCycle event fired at this instant

  void Integrate(Time t);
  void Loop();
};

}  // namespace unipool::sim
