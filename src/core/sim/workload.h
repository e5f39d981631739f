// The synthetic workload generator: Poisson arrivals over a horizon, each
// job drawn from a class (sizes by weight, log-normal durations).
#pragma once

#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/base/status.h"
#include "core/sim/model.h"

namespace unipool::sim {

// Errors: no classes, a class with no sizes, non-positive rates.
Result<std::vector<SimJob>> Generate(const SyntheticSpec& spec, Rng& rng);

// A class fitted to jobs (from a trace, say): sizes by their empirical
// shares; durations log-normal with the median and the spread (sigma) of
// the jobs' log durations; and the arrival rate over their span.
struct FittedClass {
  JobClass job_class;
  double arrivals_per_hour = 0;
};
// Errors: fewer than two jobs.
Result<FittedClass> FitClass(const std::vector<SimJob>& jobs, const std::string& name);

// The checkpoint write time of a job of `gpus` GPUs in class `c`.
Duration CheckpointCost(const JobClass& c, int64_t gpus);

}  // namespace unipool::sim
