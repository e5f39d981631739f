// SignalWindow: a running job's training-stability signals (MISSION M20)
// and the anomalies they show. Per-rank step samples and the job's loss
// and gradient norm go in; findings come out, each once until it clears:
//
//   straggler       a rank busy > straggler_factor x the median of the
//                   others, and by more than straggler_min_excess, for
//                   straggler_steps steps in a row seen in at least
//                   straggler_samples samples (a rank that is slow, not
//                   one descheduled for a second: a sample averages
//                   every step since the previous one);
//   data straggler  the same, with data loading over data_share of its
//                   busy time (slow storage, CPU contention);
//   non-finite loss a NaN or Inf loss;
//   gradient spike  a gradient norm > spike_factor x the median of the
//                   last spike_window norms;
//   memory growth   a rank's resident host memory grown by more than
//                   max(memory_growth_min, memory_growth_share x its
//                   baseline), the baseline taken memory_warmup_steps
//                   after its first sample (past loading and the first
//                   steps' allocations): a leak, or fragmentation.
//
// "Busy" is a rank's step time less its communication time: in a
// synchronous job every rank's step takes as long as the slowest one's,
// and the fast ranks spend the difference waiting in the collective, so
// only the time outside it tells the slow rank from its peers.
//
// Pure: the server feeds what agents report, the simulator what its model
// says. Time is in integer nanoseconds; no clocks.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/base/units.h"

namespace unipool::train {

// One rank's steps since its previous sample (means over `steps` steps).
struct RankSample {
  int32_t rank = 0;
  std::string node;
  int64_t step = 0;    // the last step it covers
  int32_t steps = 1;   // how many steps it averages (>= 1)
  Duration step_time;  // wall time per step
  Duration data_time;  // of which waiting for the next batch
  Duration comm_time;  // of which in collectives, waiting for peers included
};

struct SignalOptions {
  double straggler_factor = 1.5;
  int32_t straggler_steps = 10;
  int32_t straggler_samples = 2;
  // Busy time over the median below this is jitter, not a straggler (the
  // few tens of ms a loaded host delays a wake-up by).
  Duration straggler_min_excess = Milliseconds(50);
  double data_share = 0.5;
  double spike_factor = 10;
  int32_t spike_window = 20;
  int64_t memory_warmup_steps = 10;
  double memory_growth_share = 0.25;
  Bytes memory_growth_min = Bytes(256 << 20);
};

enum class FindingKind {
  kStraggler,
  kDataStraggler,
  kNonFiniteLoss,
  kGradientSpike,
  kMemoryGrowth
};
// "Straggler", "DataStraggler", "NonFiniteLoss", "GradientSpike",
// "MemoryGrowth": the server's event types.
const char* FindingName(FindingKind k);

struct Finding {
  FindingKind kind = FindingKind::kStraggler;
  int64_t step = 0;
  // Stragglers: which rank, where, how slow, for how many steps.
  int32_t rank = -1;
  std::string node;
  double factor = 0;      // its busy time / the others' median
  double data_share = 0;  // data loading / its busy time
  int64_t steps = 0;
  Duration busy, median;
  // Loss and gradient norm: the value and, for a spike, the window median.
  double value = 0, baseline = 0;
  // Memory growth: the rank's resident memory now and at its baseline
  // (`steps` steps before `step`).
  Bytes rss, rss_baseline;
  // One line of evidence, e.g. "rank 3 on n2 is 3.0x slower than the
  // median rank for 12 steps, to step 40 (...; data loading 5% of it)".
  std::string Describe() const;
};

class SignalWindow {
 public:
  explicit SignalWindow(SignalOptions options = {});

  // REQUIRES: s.steps >= 1. Returns what this sample completes.
  std::vector<Finding> AddRank(const RankSample& s);
  // The job's loss (any double, NaN and Inf included) and, when it has one,
  // gradient norm at `step`.
  std::vector<Finding> AddLoss(int64_t step, double loss, std::optional<double> grad_norm);
  // A rank's resident memory (its processes' RSS, as the agent reads it)
  // at the job's `step`. REQUIRES: step >= 0, rss >= 0.
  std::vector<Finding> AddMemory(int32_t rank, const std::string& node, int64_t step, Bytes rss);

  // The ranks' latest busy time, by rank (for metrics and `diagnose`).
  struct RankState {
    std::string node;
    int64_t step = 0;
    Duration busy, data;
    Duration step_time, comm;  // the last sample's step and collective times
    int64_t slow_steps = 0;    // consecutive steps over the bound
    int32_t slow_samples = 0;  // the samples they came in
    bool reported = false;
    // Resident memory: the latest, and the baseline (step -1: not yet).
    Bytes rss = Bytes(-1), rss_baseline;
    int64_t rss_first_step = -1, rss_baseline_step = -1;
    bool rss_reported = false;
  };
  const std::map<int32_t, RankState>& ranks() const { return ranks_; }
  // The median busy time of the ranks other than `rank` (0 with none).
  Duration MedianBusyExcept(int32_t rank) const;

 private:
  SignalOptions options_;
  std::map<int32_t, RankState> ranks_;
  std::deque<double> norms_;
  bool loss_reported_ = false;
  bool spike_reported_ = false;
};

}  // namespace unipool::train
