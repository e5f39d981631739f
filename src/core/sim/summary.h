// Summary: the figures an operator reads after a simulation, computed from
// a SimOutput. Times in seconds; shares in [0, 1].
#pragma once

#include <string>
#include <vector>

#include "core/sim/model.h"
#include "core/sim/simulator.h"

namespace unipool::sim {

struct Percentiles {
  int64_t count = 0;  // 0: none (the figures below mean nothing)
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};
Percentiles PercentilesOf(std::vector<double> v);
// The q-quantile (0..1) of `sorted` by nearest rank, as PercentilesOf takes
// it (so a chart's CDF and a table's p50 agree). REQUIRES: sorted, not empty.
double QuantileOfSorted(const std::vector<double>& sorted, double q);

struct GroupRow {  // one job-size bucket or one queue
  std::string name;
  int64_t jobs = 0;
  int64_t done = 0;
  Percentiles jct;   // completion - submit, done jobs
  Percentiles wait;  // first start - submit, started jobs
  double ettr = 0;   // useful / wall since first start, GPU-time weighted
  int64_t failures = 0;
  int64_t preemptions = 0;
  double lost_gpu_hours = 0;
  double mtti_hours = 0;  // wall time holding GPUs per failure interruption; 0: none
};

struct CauseRow {
  std::string cause;
  int64_t failures = 0;
  int64_t jobs_hit = 0;
  double lost_gpu_hours = 0;
};

struct Summary {
  std::string policy;
  double days = 0;
  int64_t gpus = 0;
  int64_t jobs = 0, done = 0, infeasible = 0, unfinished = 0;
  double gpu_hours_done = 0;         // work x GPUs of completed jobs
  double utilization_allocated = 0;  // allocated / total GPU time
  double utilization_useful = 0;     // useful / total GPU time
  double goodput = 0;                // useful / available (up) GPU time
  double ettr = 0;
  Percentiles jct, wait;            // of every job (done ones for jct, started ones for wait)
  Percentiles checkpoint_interval;  // seconds, of the jobs that checkpoint
  // Seconds each checkpoint to storage stalled its job (SimJob::
  // checkpoint_bytes), and two-stage drains a failure cut off.
  Percentiles checkpoint_stall;
  int64_t drains_lost = 0;
  int64_t stragglers = 0;              // slow-node onsets
  int64_t straggler_replacements = 0;  // jobs moved off a slow node (onStraggler: replace)
  // From the first submission to the last completion, when every feasible
  // job completed; -1 otherwise.
  double makespan_seconds = -1;
  // Compactness of the gangs that started on more than one node, at the
  // lowest tier of multi-node groups (SimOutput::gang_tier): their mean groups used, the mean
  // of the fewest they could use, and how many used the fewest.
  int64_t gangs = 0;
  double groups_per_gang = 0, groups_per_gang_bound = 0;
  int64_t gangs_on_fewest = 0;
  std::string group_tier;
  std::vector<GroupRow> by_size;
  std::vector<GroupRow> by_queue;
  std::vector<CauseRow> causes;
  int64_t failures = 0;
  double failure_lost_gpu_hours = 0;
  int64_t preemptions = 0;
  double preemption_lost_gpu_hours = 0;
  // Power, by the GPUs' power model (sched::PowerBudget): IT energy and
  // the facility's (x PUE), the cluster's mean and peak IT draw, the
  // useful GPU-hours each IT MWh bought, and per completed job (kWh).
  double it_energy_mwh = 0, facility_energy_mwh = 0, pue = 1;
  double mean_it_mw = 0, peak_it_mw = 0;
  double useful_gpu_hours_per_mwh = 0;
  // FLOPs/W: the useful GPU-seconds at the GPUs' dense BF16 peak, per IT
  // joule (GFLOP/s per W). An upper bound: times the jobs' MFU (30-45% for
  // large dense training) is what they delivered.
  double peak_gflops_per_watt = 0;
  Percentiles job_energy_kwh;
  int64_t cycles = 0, decisions = 0, events = 0;
  double cycle_p50_us = 0, cycle_p99_us = 0;
  int64_t placement_searches = 0, preemption_searches = 0, reservations = 0;
};

// The size bucket of a job: "1", "2-8", "9-64", "65-512", "513-4K",
// "4K-32K", "32K+".
std::string SizeBucket(int64_t gpus);

Summary Summarize(const SimOutput& out, const SimConfig& config);

}  // namespace unipool::sim
