// ClusterSummary: the figures `unipool topo` prints, computed from a
// Topology. Pure; the writers in io/ turn it into text or JSON.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/base/units.h"
#include "core/topology/topology.h"

namespace unipool {

struct TierSummary {
  std::string name;
  int32_t groups = 0;
  int64_t switches = 0;
  Gpus min_group_gpus;
  Gpus max_group_gpus;
  Bandwidth bandwidth_per_gpu;
  Duration latency;
  int64_t oversubscription_milli = 1000;
  Bandwidth effective_per_gpu;
  // Bandwidth across a cut of the largest group into two halves:
  // floor(max_group_gpus / 2) x effective_per_gpu.
  Bandwidth bisection;
};

struct ModelSummary {
  std::string name;
  Gpus gpus;
  FlopRate peak_bf16;  // all GPUs of this model together
  FlopRate peak_fp8;
  Bytes hbm;
  Watts power;
};

struct PartitionSummary {
  std::string name;
  int32_t nodes = 0;
  Gpus gpus;
};

struct ClusterSummary {
  std::string name;
  int32_t nodes = 0;
  Gpus gpus;
  std::vector<TierSummary> tiers;            // lowest first
  std::vector<ModelSummary> models;          // by name
  std::vector<PartitionSummary> partitions;  // by name
  std::array<int32_t, 5> nodes_by_state{};   // indexed by NodeState
  FlopRate peak_bf16;
  FlopRate peak_fp8;
  Bytes hbm;
  Watts power;  // GPU board power (TDP), all GPUs
};

ClusterSummary Summarize(const Topology& topo);

}  // namespace unipool
