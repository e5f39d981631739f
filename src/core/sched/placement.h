// Placement: where a gang runs, and the figures that say how good that is.
#pragma once

#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/base/units.h"
#include "core/topology/free_index.h"
#include "core/topology/topology.h"

namespace unipool::sched {

// One task of a gang: GPUs on one node. A gang's tasks are listed in rank
// order: consecutive tasks share the closest tier (nodes in depth-first
// order), so ring neighbours talk over NVLink or one leaf where possible.
struct Task {
  NodeId node;
  GpuMask gpus = 0;
};

// What a user reads about a placement.
struct PlacementScore {
  // The lowest tier holding every GPU of the gang; -1 = one node.
  int span_tier = -1;
  // Distinct groups used at each tier (index = tier): leaves, spines, ...
  std::vector<int32_t> groups_used;
  // Estimated ring all-reduce of 1 GiB in rank order, from tier bandwidths
  // and latencies: 2(n-1)/n * S / B_min + 2(n-1) * latency_max.
  Duration allreduce_1gib;
};

struct Placement {
  std::vector<Task> tasks;  // rank order
  PlacementScore score;
  int64_t gpu_count = -1;   // set by ScorePlacement; -1: count the tasks
  Gpus gpus() const;
};

// A ring all-reduce of 1 GiB among `gpus` GPUs whose slowest hop crosses
// `worst_tier` (-1: inside one node).
Duration RingAllReduce1GiB(const Topology& topo, int worst_tier, int64_t gpus);

// Fills in `p.score` from its tasks, in rank order. Tasks in node order
// with one per node (what the placer makes) cost O(groups used x tiers x
// log tasks); any other order O(tasks x tiers).
void ScorePlacement(const Topology& topo, Placement& p);

// Adds `more` to `tasks`, keeping node order and one task per node (the
// GPUs of two tasks on one node are merged). REQUIRES: `tasks` sorted by
// node id. O(|more| log |tasks|) moves for a few, O(|tasks| + |more|) for many.
void MergeInNodeOrder(std::vector<Task>& tasks, std::vector<Task> more);

// "2 nodes in rack-3 (pod-0); ring all-reduce of 1 GiB ~ 21 ms".
std::string DescribePlacement(const Topology& topo, const Placement& p);

}  // namespace unipool::sched
