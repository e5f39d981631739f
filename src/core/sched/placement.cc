#include "core/sched/placement.h"

#include <algorithm>
#include <cstdio>

namespace unipool::sched {

Gpus Placement::gpus() const {
  if (gpu_count >= 0) return Gpus(gpu_count);
  int64_t n = 0;
  for (const Task& t : tasks) n += CountGpus(t.gpus);
  return Gpus(n);
}

void ScorePlacement(const Topology& topo, Placement& p) {
  PlacementScore& s = p.score;
  s = PlacementScore{};
  p.gpu_count = -1;
  p.gpu_count = p.gpus().value();
  s.groups_used.assign(topo.num_tiers(), 0);
  if (p.tasks.empty()) return;
  const int64_t n = p.gpu_count;
  // Hops of the ring in rank order, closing back to the first task.
  int worst_hop = -1;  // tier of the slowest hop; -1 = inside one node
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const NodeId a = p.tasks[i].node;
    const NodeId b = p.tasks[(i + 1) % p.tasks.size()].node;
    worst_hop = std::max(worst_hop, topo.LowestCommonTier(a, b));
    for (int t = 0; t < topo.num_tiers(); ++t) {
      if (i == 0 || topo.group_of(p.tasks[i - 1].node, t) != topo.group_of(a, t)) {
        s.groups_used[t]++;
      }
    }
  }
  s.span_tier = worst_hop;
  if (n <= 1) return;
  s.allreduce_1gib = RingAllReduce1GiB(topo, worst_hop, n);
}

// 2(n-1)/n * S / B + 2(n-1) * latency, at the worst hop's bandwidth (after
// oversubscription above the scale-up domain).
Duration RingAllReduce1GiB(const Topology& topo, int worst_tier, int64_t n) {
  if (n <= 1) return Duration(0);
  const Tier& tier = topo.tier(std::max(worst_tier, 0));
  const Bandwidth bw = worst_tier <= 0 ? tier.bandwidth_per_gpu : tier.effective_per_gpu;
  const double bytes = static_cast<double>(GiB(1).value());
  const double seconds = 2.0 * (n - 1) / n * bytes * 8 / static_cast<double>(bw.value());
  return Nanoseconds(static_cast<int64_t>(seconds * 1e9)) + tier.latency * (2 * (n - 1));
}

std::string DescribePlacement(const Topology& topo, const Placement& p) {
  const PlacementScore& s = p.score;
  std::string out = std::to_string(p.tasks.size()) + (p.tasks.size() == 1 ? " node" : " nodes");
  if (s.span_tier < 0) {
    out += " (" + topo.node_name(p.tasks[0].node) + ")";
  } else {
    const GroupId g = topo.group_of(p.tasks[0].node, s.span_tier);
    // "within rack r12"; a group named as its tier (the one top group) is "one rack".
    const std::string& tier = topo.tier(s.span_tier).name;
    const std::string& group = topo.group_name(s.span_tier, g);
    out += " within " + (group == tier ? "one " + tier : tier + " " + group);
    for (int t = 0; t < s.span_tier; ++t) {
      // (a tier with a group per node, like the scale-up domain of 8-GPU
      // nodes, says nothing the node count has not said)
      if (s.groups_used[t] == static_cast<int>(p.tasks.size())) continue;
      out += ", " + std::to_string(s.groups_used[t]) + " " + topo.tier(t).name +
             (s.groups_used[t] == 1 ? "" : "s");
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "; ring all-reduce of 1 GiB ~ %.1f ms",
                ToSeconds(s.allreduce_1gib) * 1e3);
  return out + buf;
}

}  // namespace unipool::sched
