#include "core/perf/hardware.h"

#include <algorithm>
#include <cmath>

namespace unipool::perf {

Result<HardwareView> ViewOf(const Topology& topo, int64_t gpus) {
  if (gpus < 1 || gpus > topo.num_gpus().value()) {
    return InvalidArgument("the job asks for " + std::to_string(gpus) + " GPUs but the cluster '" +
                           topo.name() + "' has " + std::to_string(topo.num_gpus().value()));
  }
  HardwareView v;
  const NodeId first(0);
  v.gpu = topo.node_model(first);
  v.gpus = gpus;
  v.gpus_per_node = static_cast<int32_t>(topo.node_gpus(first).value());
  for (int t = 0; t < topo.num_tiers(); ++t) {
    const Tier& tier = topo.tier(t);
    TierView tv;
    tv.name = tier.name;
    tv.group_gpus = std::min(gpus, topo.group_gpus(t, topo.group_of(first, t)).value());
    const Bandwidth bw = t == 0 ? tier.bandwidth_per_gpu : tier.effective_per_gpu;
    tv.bytes_per_s = static_cast<double>(bw.value()) / 8.0;
    tv.latency_s = ToSeconds(tier.latency);
    // A tier whose group is no bigger than the one below adds nothing.
    if (!v.tiers.empty() && tv.group_gpus <= v.tiers.back().group_gpus) continue;
    v.tiers.push_back(tv);
    if (tv.group_gpus >= gpus) break;
  }
  if (v.tiers.empty() || v.tiers.back().group_gpus < gpus) {
    return InvalidArgument("cluster '" + topo.name() + "' has no tier that holds " +
                           std::to_string(gpus) + " GPUs");
  }
  return v;
}

double ScaleUpGbps(const GpuModel& gpu) {
  const std::string& n = gpu.name;
  if (n.rfind("A100", 0) == 0) return 2400;
  if (n.rfind("H100", 0) == 0 || n.rfind("H200", 0) == 0) return 3600;
  if (n.rfind("B200", 0) == 0 || n.rfind("GB200", 0) == 0) return 7200;
  return 2400;
}

double ScaleOutGbps(const GpuModel& gpu) {
  const std::string& n = gpu.name;
  if (n.rfind("A100", 0) == 0) return 200;
  if (n.rfind("B200", 0) == 0 || n.rfind("GB200", 0) == 0) return 800;
  return 400;
}

ClusterSpec UniformClusterSpec(const UniformCluster& u) {
  const int32_t per_node = std::max(1, u.gpus_per_node);
  const int32_t scale_up = std::max(per_node, u.scale_up_gpus);
  const double up = u.scale_up_gbps > 0 ? u.scale_up_gbps : ScaleUpGbps(u.gpu);
  const double out = u.scale_out_gbps > 0 ? u.scale_out_gbps : ScaleOutGbps(u.gpu);
  ClusterSpec spec;
  spec.name = "uniform-" + std::to_string(u.gpus) + "x" + u.gpu.name;
  spec.gpu_models.push_back(u.gpu);  // the file's own models win over the catalog
  auto tier = [](std::string name, double gbps, double latency_us, int32_t fanout) {
    TierSpec t;
    t.name = std::move(name);
    t.bandwidth_per_gpu = Bandwidth(std::llround(gbps * 1e9));
    t.latency = Nanoseconds(std::llround(latency_us * 1e3));
    t.fanout = fanout;
    return t;
  };
  const int64_t leaf = std::max<int64_t>(scale_up, u.leaf_gpus);
  spec.tiers.push_back(tier("scale-up", up, 1, scale_up / per_node));
  spec.tiers.push_back(tier("leaf", out, 2, static_cast<int32_t>(leaf / scale_up)));
  spec.tiers.push_back(tier("spine", out, 4, 0));
  spec.tiers.back().oversubscription_milli = std::llround(std::max(1.0, u.oversubscription) * 1000);
  GeneratorSpec g;
  g.gpus = u.gpus;
  g.gpus_per_node = per_node;
  g.gpu_model = spec.gpu_models.back().name;
  spec.generator = g;
  return spec;
}

}  // namespace unipool::perf
