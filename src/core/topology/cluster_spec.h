// ClusterSpec: what a cluster file says, as plain data. The io layer parses
// YAML into it (keeping each element's place in the file); Topology::Build
// checks it and turns it into the compact model. No I/O here.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/base/units.h"
#include "core/topology/gpu_model.h"

namespace unipool {

// One tier of the network, listed lowest first. Tier 0 is the scale-up
// (NVLink) domain; every later tier groups several groups of the tier below
// under a set of switches (leaf/rack, spine/pod, zone/hall, site).
struct TierSpec {
  std::string name;
  // Bandwidth each GPU has into this tier's links, one direction.
  Bandwidth bandwidth_per_gpu;
  Duration latency;
  // Downlink:uplink ratio of the links from the tier below into this tier,
  // in thousandths (1000 = 1:1, 7000 = 7:1). Always 1000 for tier 0.
  int64_t oversubscription_milli = 1000;
  // Generator only: how many groups of the tier below (for tier 0: nodes)
  // form one group of this tier. 0 on the top tier means "as many as the
  // GPU count needs"; the top tier always has exactly one group. 0 on tier 0
  // means 1: each node is its own scale-up domain.
  int32_t fanout = 0;
  // Switch boxes per group (a rail-optimized leaf has one per rail).
  int32_t switches_per_group = 1;
  SourceLoc loc;
};

enum class NodeState : uint8_t {
  kUp,         // healthy and schedulable
  kCordoned,   // healthy; no new work is placed here
  kDrained,    // being emptied by an operator; no new work
  kFlaky,      // failed repeatedly; avoided by placement
  kDown,       // not reachable
};
const char* NodeStateName(NodeState s);
std::optional<NodeState> ParseNodeState(const std::string& s);

using Labels = std::vector<std::pair<std::string, std::string>>;  // sorted

// A node written out explicitly.
struct NodeSpec {
  std::string name;
  int32_t gpus = 0;
  std::string gpu_model;
  std::string partition = "default";
  Labels labels;
  NodeState state = NodeState::kUp;
  // Group name per tier (index = tier). Empty for tier 0 means "the node is
  // its own scale-up domain"; empty above means "the tier's single group".
  std::vector<std::string> groups;
  SourceLoc loc;
};

enum class GeneratorKind { kFatTree, kRailOptimized };

// A regular cluster described in a few lines.
struct GeneratorSpec {
  GeneratorKind kind = GeneratorKind::kFatTree;
  int64_t gpus = 0;
  int32_t gpus_per_node = 8;
  std::string gpu_model;
  std::string node_prefix = "node-";
  // Groups of this tier become the partitions; empty = one partition.
  std::string partition_tier;
  Labels labels;  // put on every node
  SourceLoc loc;
};

// A power limit on one group of a tier (a rack's kW, a hall's or site's
// MW), on IT power: what the nodes draw, before the facility's overhead.
struct PowerCapSpec {
  std::string tier;
  std::string group;  // empty: every group of the tier
  Watts cap;
  SourceLoc loc;
};

struct PowerSpec {
  // Facility power over IT power (cooling, conversion); 1 = not modelled.
  double pue = 1.0;
  std::vector<PowerCapSpec> caps;
  SourceLoc loc;
};

// A shared storage system (a parallel file system, an object store) that
// jobs checkpoint to and read from. Rates in bytes per second.
struct StorageSpec {
  std::string name;
  double write_bytes_per_s = 0;   // aggregate, all clients together
  double read_bytes_per_s = 0;    // aggregate; 0: as write
  double client_bytes_per_s = 0;  // one node's link to it
  // Each node's fast tier (host memory or local NVMe) for two-stage
  // checkpoints; 0: none.
  double local_bytes_per_s = 0;
  // The partition it is local to (its data is near those nodes): a job
  // whose dataLocality names this system prefers that partition. "": the
  // whole cluster reaches it alike.
  std::string partition;
  int32_t partition_index = -1;  // set by Topology::Build
  SourceLoc loc;
};

struct ClusterSpec {
  std::string name;
  PowerSpec power;
  std::vector<StorageSpec> storage;
  std::vector<GpuModel> gpu_models;  // in addition to the built-in catalog
  std::vector<TierSpec> tiers;
  std::optional<GeneratorSpec> generator;  // exactly one of generator, nodes
  std::vector<NodeSpec> nodes;
  SourceLoc loc;
};

}  // namespace unipool
