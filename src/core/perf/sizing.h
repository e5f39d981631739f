// Sizing: choose the GPU count as well as the plan. Given a target (train on
// T tokens by a deadline, or sustain R tokens/s), try GPU counts from small
// to large within a cluster, plan each, and return the smallest count whose
// expected wall time -- failures included -- meets the target.
//
// Failure overhead (Young 1974, Daly 2006 first-order optimum):
//   job MTBF          M = 1 / (nodes x per-node failure rate)
//   checkpoint write  d = checkpoint bytes / write bandwidth
//   interval          tau = sqrt(2 d M)
//   wall time         W = work x (1 + d / tau) / (1 - (R + (tau + d) / 2) / M)
// where R is the restart cost and (tau + d) / 2 the work lost per failure on
// average; expected failures = W / M.
//
// Pure.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/status.h"
#include "core/perf/planner.h"
#include "core/topology/topology.h"

namespace unipool::perf {

struct SizingTarget {
  double tokens = 0;        // tokens to train on (with deadline_s)
  double deadline_s = 0;    // wall-clock budget
  double tokens_per_s = 0;  // or: a throughput goal, failures included
};

struct FailureModel {
  // Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 GPUs
  // (2,048 nodes) (Meta, "The Llama 3 Herd of Models", 2024, section 3.3.4):
  // 419 / (54 x 24 h x 2048) = 1.6e-4 per node-hour.
  double node_failures_per_hour = 1.6e-4;
  double restart_s = 600;  // detect, reschedule, reload: ~10 minutes
  // Checkpoint write bandwidth: per node (front-end NIC share) and the
  // storage system's total; the smaller applies.
  double write_bytes_per_s_per_node = 2e9;
  double storage_bytes_per_s = 1e12;
};

struct FailureOverhead {
  double mtbf_s = 0;
  double checkpoint_bytes = 0;  // bf16 weights + fp32 optimizer state
  double checkpoint_write_s = 0;
  double interval_s = 0;  // Young/Daly optimum
  double expected_failures = 0;
  double wall_s = 0;     // work plus checkpoints, restarts and lost work
  bool finishes = true;  // false when failures outpace progress
};

// The expected wall time of `work_s` seconds of training on `nodes` nodes.
FailureOverhead ExpectedWallTime(double work_s, int64_t nodes, double params,
                                 const FailureModel& f);

struct SizingOption {
  int64_t gpus = 0;
  RankedPlan best;
  FailureOverhead failures;
  double effective_tokens_per_s = 0;  // throughput after failure overhead
  bool meets_target = false;
};

struct SizingResult {
  SizingOption chosen;              // the smallest that meets the target, else the fastest
  std::vector<SizingOption> tried;  // every count that had a plan, ascending
  PlanSearch search;                // the full search at the chosen size
};

// GPU counts tried: scale-up-domain multiples 2^k and 1.5 x 2^k, from one
// domain up to the cluster. Errors: the target is empty, or no count has a
// plan that fits (kResourceExhausted).
Result<SizingResult> Size(const Job& job, const Topology& cluster, const SizingTarget& target,
                          const FailureModel& failures, const SearchOptions& options);

}  // namespace unipool::perf
