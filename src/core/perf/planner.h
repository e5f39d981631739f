// The planner: searches the parallel plans for a job on the GPUs of a
// HardwareView and returns the k fastest that fit in memory, each with the
// cost model's estimate, plus (on request) why the best wins over its close
// alternatives.
//
// Search space: TP (powers of two dividing the heads), CP (powers of two),
// PP (divisors of GPUs / (TP x CP) up to the layer count; uneven last stages
// allowed, the slowest stage counts), DP (what is left; must divide the
// global batch), EP (MoE only: powers of two dividing experts and DP),
// micro-batch (powers of two), interleaving v (any v <= 16 with pp x v <=
// layers; the layers need not divide evenly, see ChunkLayers), ZeRO 0-3,
// recomputation none/selective/full (selective only without flash
// attention, where it differs from none), and the rank order (DP or PP
// outermost). Any dimension can be fixed by SearchOptions.
//
// Pruning, cheapest first: model-state memory (weights + gradients +
// optimizer) per (TP, PP, CP, DP, EP, ZeRO) before any micro-batch choice;
// then full memory per micro-batch size, stopping at the first that does not
// fit (activations grow with the micro-batch). Everything that fits is
// evaluated; evaluation is closed-form arithmetic, O(tiers).
//
// Deterministic: ties on step time are broken by Plan's ordering.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/perf/cost_model.h"

namespace unipool::perf {

struct SearchOptions {
  int top_k = 5;
  bool explain = false;
  // Fixed choices; 0 (or -1 for zero, nullopt for the enums) = search.
  int32_t tp = 0, pp = 0, dp = 0, cp = 0, ep = 0, etp = 0, vpp = 0, micro_batch = 0;
  int32_t zero = -1;
  std::optional<Recompute> recompute;
  std::optional<RankOrder> order;
  std::optional<bool> sequence_parallel;
  // Rank plans that need more memory than the GPU has, too (their
  // Estimate's memory.fits() is false): to evaluate a published plan the
  // memory model rejects. Misfits are still counted in pruned_memory.
  bool ignore_memory = false;
  // Only plans DeepSpeed can run (DeepSpeedSupports in launch.h).
  bool deepspeed = false;
  // Bounds of the search.
  int32_t max_tp = 64;
  int32_t max_cp = 16;
  int32_t max_vpp = 16;  // NVIDIA's published configurations go up to 12
  int32_t max_micro_batch = 16;
};

struct RankedPlan {
  Plan plan;
  Estimate estimate;
};

// A close alternative to the best plan and why it loses.
struct Alternative {
  Plan plan;
  Estimate estimate;
  std::string change;   // what differs from the best: "tp16 dp64"
  std::string reason;   // "TP=16 crosses the 'nvlink' domain (8 GPUs): +38% TP communication"
  double slowdown = 0;  // step time / best step time - 1; 0 when it does not fit
  bool fits = true;
};

struct PlanSearch {
  std::vector<RankedPlan> top;            // fastest first; size <= top_k
  std::string why_best;                   // filled when explain
  std::vector<Alternative> alternatives;  // filled when explain
  int64_t considered = 0;                 // plans enumerated
  int64_t evaluated = 0;                  // plans fully costed
  int64_t pruned_memory = 0;              // rejected for memory
};

// Errors: kInvalidArgument when no plan is valid at all (e.g. nothing divides
// the global batch), kResourceExhausted when valid plans exist but none fits
// in memory (the message gives the smallest need).
Result<PlanSearch> Search(const Job& job, const HardwareView& hw, const SearchOptions& options);

// Why `alt` is slower than (or does not fit unlike) `best`: one sentence.
std::string ExplainLoss(const HardwareView& hw, const RankedPlan& best, const RankedPlan& alt);

// The plan fields that differ: "tp16 dp64".
std::string PlanDiff(const Plan& from, const Plan& to);

}  // namespace unipool::perf
