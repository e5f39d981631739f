#include "core/topology/summary.h"

#include <algorithm>
#include <map>

namespace unipool {

static TierSummary SummarizeTier(const Topology& topo, int t) {
  const Tier& tier = topo.tier(t);
  TierSummary s{tier.name, topo.num_groups(t), 0, Gpus(INT64_MAX), Gpus(0),
                tier.bandwidth_per_gpu, tier.latency, tier.oversubscription_milli,
                tier.effective_per_gpu, Bandwidth(0)};
  s.switches = int64_t{s.groups} * tier.switches_per_group;
  for (int32_t g = 0; g < topo.num_groups(t); ++g) {
    const Gpus gpus = topo.group_gpus(t, GroupId(g));
    s.min_group_gpus = std::min(s.min_group_gpus, gpus);
    s.max_group_gpus = std::max(s.max_group_gpus, gpus);
  }
  s.bisection = tier.effective_per_gpu * (s.max_group_gpus.value() / 2);
  return s;
}

ClusterSummary Summarize(const Topology& topo) {
  ClusterSummary s;
  s.name = topo.name();
  s.nodes = topo.num_nodes();
  s.gpus = topo.num_gpus();
  for (int t = 0; t < topo.num_tiers(); ++t) s.tiers.push_back(SummarizeTier(topo, t));

  std::map<std::string, ModelSummary> models;
  std::vector<PartitionSummary> partitions(topo.partitions().size());
  for (size_t p = 0; p < partitions.size(); ++p) partitions[p].name = topo.partitions()[p];
  for (int32_t n = 0; n < topo.num_nodes(); ++n) {
    const NodeId id(n);
    const GpuModel& m = topo.node_model(id);
    const int64_t k = topo.node_gpus(id).value();
    ModelSummary& ms = models[m.name];
    ms.name = m.name;
    ms.gpus += Gpus(k);
    ms.peak_bf16 += m.peak_bf16 * k;
    ms.peak_fp8 += m.peak_fp8 * k;
    ms.hbm += m.hbm * k;
    ms.power += m.power * k;
    PartitionSummary& ps = partitions[topo.node_partition(id)];
    ps.nodes++;
    ps.gpus += Gpus(k);
    s.nodes_by_state[static_cast<int>(topo.node_state(id))]++;
  }
  for (auto& [name, ms] : models) {
    s.peak_bf16 += ms.peak_bf16;
    s.peak_fp8 += ms.peak_fp8;
    s.hbm += ms.hbm;
    s.power += ms.power;
    s.models.push_back(ms);
  }
  std::sort(partitions.begin(), partitions.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  s.partitions = std::move(partitions);
  return s;
}

}  // namespace unipool
