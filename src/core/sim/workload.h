// The synthetic workload generator: Poisson arrivals over a horizon, each
// job drawn from a class (sizes by weight, log-normal durations).
#pragma once

#include <vector>

#include "core/base/rng.h"
#include "core/base/status.h"
#include "core/sim/model.h"

namespace unipool::sim {

// Errors: no classes, a class with no sizes, non-positive rates.
Result<std::vector<SimJob>> Generate(const SyntheticSpec& spec, Rng& rng);

// The checkpoint write time of a job of `gpus` GPUs in class `c`.
Duration CheckpointCost(const JobClass& c, int64_t gpus);

}  // namespace unipool::sim
