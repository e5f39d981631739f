// HardwareView: what the cost model needs to know about the GPUs a job runs
// on: one GPU model and, per network tier the job spans, how many of the
// job's GPUs share one group of that tier, the bandwidth each GPU gets across
// it and its latency. Built from a Topology for an allocation of the first N
// GPUs (nodes are numbered depth-first, so the first N GPUs fill whole groups
// of the lower tiers), or from a uniform cluster made up for a GPU count.
//
// Invariants of a view returned here: tiers non-empty; group_gpus strictly
// increasing over tiers, the last one equal to gpus; bandwidths > 0.
//
// Pure; values only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/topology/cluster_spec.h"
#include "core/topology/gpu_model.h"
#include "core/topology/topology.h"

namespace unipool::perf {

struct TierView {
  std::string name;
  int64_t group_gpus = 0;  // job GPUs inside one group of this tier
  double bytes_per_s = 0;  // per GPU, one direction, after oversubscription
  double latency_s = 0;    // one hop through this tier
};

struct HardwareView {
  GpuModel gpu;
  int64_t gpus = 0;
  int32_t gpus_per_node = 8;
  std::vector<TierView> tiers;  // lowest (scale-up) first; only tiers the job spans
  int64_t scale_up_gpus() const { return tiers.front().group_gpus; }
};

// The view of the first `gpus` GPUs of `topo`. Tier 0 uses its own
// bandwidth; tiers above use Tier::effective_per_gpu (the narrowest
// bandwidth / oversubscription on the way up). Tiers above the first one
// whose group holds the whole allocation are dropped.
// Errors: gpus < 1 or more than the cluster has (kInvalidArgument).
Result<HardwareView> ViewOf(const Topology& topo, int64_t gpus);

// A regular cluster for "N GPUs of model X" when no cluster file is given:
// nodes of `gpus_per_node`, an NVLink domain of `scale_up_gpus`, leaf groups
// of `leaf_gpus` under one switch layer, a non-blocking spine above. Zero
// bandwidths take the GPU generation's usual figures (ScaleUpGbps,
// ScaleOutGbps).
struct UniformCluster {
  GpuModel gpu;
  int64_t gpus = 0;
  int32_t gpus_per_node = 8;
  int32_t scale_up_gpus = 0;    // 0 = one node
  int64_t leaf_gpus = 1024;     // GPUs under one leaf layer (rail group)
  double scale_up_gbps = 0;     // per GPU, one direction
  double scale_out_gbps = 0;    // per GPU, one direction
  double oversubscription = 1;  // of the spine tier
};
ClusterSpec UniformClusterSpec(const UniformCluster& u);

// Usual per-GPU link rates by GPU generation (NVIDIA DGX/HGX datasheets):
// NVLink 3 = 2400 Gb/s (A100), NVLink 4 = 3600 (H100/H200), NVLink 5 = 7200
// (B200/GB200); one 200/400/800 Gb/s NIC per GPU for A100/H100/B200.
// Unknown parts: 2400 and 400.
double ScaleUpGbps(const GpuModel& gpu);
double ScaleOutGbps(const GpuModel& gpu);

}  // namespace unipool::perf
