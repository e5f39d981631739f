// The simulator's engine state, for simulator.cc only: its events and
// where each job is in its current run. Not part of the API.
#pragma once

#include <cstdint>

#include "core/base/units.h"

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
