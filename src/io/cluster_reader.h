// Reads a cluster file (YAML, `kind: Cluster`) into a ClusterSpec and builds
// the Topology. Errors are one line: "FILE:LINE:COL: field: cause".
// The format is documented in docs/topo.md.
#pragma once

#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/topology/cluster_spec.h"
#include "core/topology/topology.h"

namespace unipool::io {

// Parses YAML text. Errors carry the line and column, no file name.
Result<ClusterSpec> ParseClusterSpec(std::string_view text);

// Reads, parses and builds. Error messages start with "path:line:col: ".
Result<Topology> LoadTopology(const std::string& path);

// Reads a whole file; errors name the path and the OS's reason.
Result<std::string> ReadFile(const std::string& path);

// "path:line:col: message" (or "path: message" without a place).
std::string WithFile(const std::string& path, const Status& status);

}  // namespace unipool::io
