// Writers for simulation results: a side-by-side text summary, JSON and a
// time series CSV (the HTML report: io/sim_report.h).
#pragma once

#include <string>
#include <vector>

#include "core/sim/simulator.h"
#include "core/sim/summary.h"

namespace unipool::io {

// One policy's run.
struct SimRun {
  sim::Summary summary;
  const sim::SimOutput* output = nullptr;
};

struct SimHeader {
  std::string name;      // simulation name
  std::string cluster;   // cluster name
  std::string workload;  // "trace philly.csv (82,247 jobs)" or "synthetic"
  uint64_t seed = 0;
  // The simulation's queues, failure processes and maintenance (the same
  // for every policy); optional, not owned: the report's queue charts
  // need the guarantees.
  const sim::SimConfig* config = nullptr;
};

std::string SimText(const SimHeader& h, const std::vector<SimRun>& runs);
std::string SimJson(const SimHeader& h, const std::vector<SimRun>& runs);
// One row per sample and policy: time, GPUs allocated, failed, drained,
// jobs, failures and work lost and kept so far.
std::string SimSeriesCsv(const std::vector<SimRun>& runs);
// One row per job and policy (`unipool sim --jobs`): its id and name, queue,
// GPUs, submit, first start and end in seconds (empty when it never
// started or ended), wait, the nodes and the groups per tier of its first
// placement (`tiers`: the cluster's tier names, a column each), failures,
// preemptions, lost GPU-seconds and its state (done, running, pending or
// infeasible).
std::string SimJobsCsv(const std::vector<SimRun>& runs, const std::vector<std::string>& tiers,
                       const std::vector<std::string>& queues);
// The side-by-side summary's rows: a label, then one cell per run.
std::vector<std::pair<std::string, std::vector<std::string>>> ComparisonRows(
    const std::vector<SimRun>& runs);
// The HTML report: io/sim_report.h.

}  // namespace unipool::io
