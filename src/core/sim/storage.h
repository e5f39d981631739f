// SharedBandwidth: transfers that share one storage system's aggregate
// bandwidth, as concurrent checkpoints share a parallel file system. Each
// transfer is also held to its own cap (the job's nodes x their client
// links); the aggregate is split max-min fairly (water-filling): no
// transfer gets more than its cap, and what one cannot use goes to the
// others. Rates change only when a transfer starts or ends, so progress is
// exact between those instants.
//
// The owner drives time: Advance(now) before each change, NextCompletion()
// for the earliest transfer to finish at the current rates. Bytes and rates
// are doubles (bytes, bytes/s); time is integer ns. No clocks, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/units.h"

namespace unipool::sim {

class SharedBandwidth {
 public:
  // REQUIRES: aggregate > 0.
  explicit SharedBandwidth(double aggregate_bytes_per_s) : aggregate_(aggregate_bytes_per_s) {}

  // Starts a transfer of `bytes` held to `cap` bytes/s; returns its id.
  // REQUIRES: Advance(now) called; bytes >= 0, cap > 0.
  int64_t Start(Time now, double bytes, double cap);
  // Drops a transfer (finished or not). Unknown ids are ignored.
  void Remove(Time now, int64_t id);
  // Moves every transfer on to `now` at the current rates.
  void Advance(Time now);
  // The earliest transfer to finish at the current rates, and when
  // (rounded up to a whole ns); nullopt when none is active.
  std::optional<std::pair<Time, int64_t>> NextCompletion() const;
  // The rate a transfer gets now; 0 when unknown.
  double rate(int64_t id) const;
  size_t active() const { return transfers_.size(); }

 private:
  struct Transfer {
    int64_t id;
    double left;  // bytes
    double cap;
    double rate = 0;
  };
  void Share();  // recomputes the rates

  double aggregate_;
  Time at_;
  int64_t next_id_ = 1;
  std::vector<Transfer> transfers_;
};

// The checkpoint traffic of a simulation on one storage system: whose each
// transfer is (a job in the simulator's numbering) and whether it is a
// two-stage drain or a direct write.
class CheckpointTraffic {
 public:
  explicit CheckpointTraffic(double aggregate_bytes_per_s) : bw_(aggregate_bytes_per_s) {}

  // Starts a transfer for `job`; returns its id (never 0).
  int64_t Start(Time now, int64_t job, bool drain, double bytes, double cap);
  // Drops a transfer; unknown ids (and 0) are ignored.
  void Cancel(Time now, int64_t id);
  // When the next transfer ends at the current rates; nullopt: none.
  std::optional<Time> NextEnd() const;
  struct Ended {
    int64_t id;
    int64_t job;
    bool drain;
  };
  // Removes and returns the transfer due at `now`, if one is.
  std::optional<Ended> TakeEnded(Time now);

 private:
  SharedBandwidth bw_;
  std::unordered_map<int64_t, std::pair<int64_t, bool>> owner_;  // id -> (job, drain)
};

}  // namespace unipool::sim
