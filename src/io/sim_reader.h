// Reads a simulation file (YAML, `kind: Simulation`): the cluster, the
// workload (a trace or synthetic classes), queues, failure processes,
// maintenance windows and the policies to compare. The format is in
// docs/sim.md. Errors are one line: "FILE:LINE:COL: field: cause".
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/sim/model.h"
#include "core/topology/topology.h"
#include "io/trace_reader.h"

namespace unipool::io {

struct SimFile {
  std::string name;
  std::string cluster_path;  // resolved against the file's folder
  std::unique_ptr<Topology> topology;
  uint64_t seed = 1;
  sim::SimConfig config;
  // At most one workload: a trace file, synthetic classes, or listed jobs.
  std::string trace_path;  // resolved against the file's folder
  TraceOptions trace;
  std::optional<sim::SyntheticSpec> synthetic;
  std::vector<sim::SimJob> jobs;  // listed one by one (spec.workload.jobs)
  std::vector<sim::PolicyConfig> policies;  // at least one
};

// Reads `path`. `cluster_override`, when not empty, replaces spec.cluster.
Result<SimFile> ReadSimFile(const std::string& path, const std::string& cluster_override = "");
// Parses the text of the file at `path` (which names it in errors and
// resolves the relative paths in it; the cluster file and a fitTrace are
// still read from disk).
Result<SimFile> ParseSimFile(std::string_view text, const std::string& path,
                             const std::string& cluster_override = "");

// Policies by name, for `--policies` without a file: default (backfill and
// checkpoint-aware preemption), fifo (neither), no-preemption, first-fit,
// young-daly (every job checkpoints at Daly's interval), fixed-1h, no-checkpoint.
Result<sim::PolicyConfig> PolicyPreset(const std::string& name);
std::vector<std::string> PolicyPresetNames();

// The default queue list for a trace: one queue per trace queue, weight 1.
std::vector<sim::QueueConfig> QueuesForTrace(const Trace& trace);

}  // namespace unipool::io
