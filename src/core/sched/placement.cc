#include "core/sched/placement.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace unipool::sched {

Gpus Placement::gpus() const {
  if (gpu_count >= 0) return Gpus(gpu_count);
  int64_t n = 0;
  for (const Task& t : tasks) n += CountGpus(t.gpus);
  return Gpus(n);
}

namespace {

bool ByNode(const Task& a, const Task& b) { return a.node < b.node; }

// The first task at or after `from` on a node >= `end`, galloping: the
// tasks inside one group are usually few.
size_t FirstFrom(const std::vector<Task>& tasks, size_t from, NodeId end) {
  size_t lo = from, step = 1;
  while (lo < tasks.size() && tasks[lo].node < end) {
    const size_t next = lo + step;
    if (next >= tasks.size() || !(tasks[next].node < end)) {
      const auto it = std::lower_bound(
          tasks.begin() + static_cast<std::ptrdiff_t>(lo),
          tasks.begin() + static_cast<std::ptrdiff_t>(std::min(next, tasks.size())), Task{end, 0},
          ByNode);
      return static_cast<size_t>(it - tasks.begin());
    }
    lo = next;
    step *= 2;
  }
  return lo;
}

// The general case, for tasks in any order: runs of consecutive tasks in
// one group, and the slowest hop of the ring in rank order.
void ScoreInRankOrder(const Topology& topo, PlacementScore& s, const std::vector<Task>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    const NodeId a = tasks[i].node;
    const NodeId b = tasks[(i + 1) % tasks.size()].node;
    s.span_tier = std::max(s.span_tier, topo.LowestCommonTier(a, b));
    for (int t = 0; t < topo.num_tiers(); ++t) {
      if (i == 0 || topo.group_of(tasks[i - 1].node, t) != topo.group_of(a, t)) {
        s.groups_used[t]++;
      }
    }
  }
}

// Tasks in node order. Groups are contiguous ranges of nodes, so such tasks
// visit each group once (a run per group), and every hop of the ring stays
// inside the group holding the first and the last task: the slowest hop is
// the one closing the ring. O(groups used x log tasks) per tier, not
// O(tasks): this runs at every restart of a 100,000-node gang.
void ScoreInNodeOrder(const Topology& topo, PlacementScore& s, const std::vector<Task>& tasks) {
  for (int t = 0; t < topo.num_tiers(); ++t) {
    for (size_t i = 0; i < tasks.size();) {
      const GroupId g = topo.group_of(tasks[i].node, t);
      s.groups_used[t]++;
      i = FirstFrom(tasks, i + 1,
                    NodeId(topo.group_first_node(t, g).value() + topo.group_num_nodes(t, g)));
    }
  }
  s.span_tier = topo.LowestCommonTier(tasks.front().node, tasks.back().node);
}

}  // namespace

void ScorePlacement(const Topology& topo, Placement& p) {
  PlacementScore& s = p.score;
  s = PlacementScore{};
  p.gpu_count = -1;
  p.gpu_count = p.gpus().value();
  s.groups_used.assign(topo.num_tiers(), 0);
  if (p.tasks.empty()) return;
  if (std::is_sorted(p.tasks.begin(), p.tasks.end(), ByNode)) {
    ScoreInNodeOrder(topo, s, p.tasks);
  } else {
    ScoreInRankOrder(topo, s, p.tasks);
  }
  if (p.gpu_count <= 1) return;
  s.allreduce_1gib = RingAllReduce1GiB(topo, s.span_tier, p.gpu_count);
}

void MergeInNodeOrder(std::vector<Task>& tasks, std::vector<Task> more) {
  std::sort(more.begin(), more.end(), ByNode);
  constexpr size_t kFew = 8;  // a few into many: insert each in place
  if (more.size() <= kFew) {
    for (const Task& t : more) {
      auto at = std::lower_bound(tasks.begin(), tasks.end(), t, ByNode);
      if (at != tasks.end() && at->node == t.node) {
        at->gpus |= t.gpus;
      } else {
        tasks.insert(at, t);
      }
    }
    return;
  }
  std::vector<Task> out;
  out.reserve(tasks.size() + more.size());
  std::merge(tasks.begin(), tasks.end(), more.begin(), more.end(), std::back_inserter(out), ByNode);
  size_t w = 0;  // one task per node
  for (size_t r = 0; r < out.size(); ++r) {
    if (w > 0 && out[w - 1].node == out[r].node) {
      out[w - 1].gpus |= out[r].gpus;
    } else {
      out[w++] = out[r];
    }
  }
  out.resize(w);
  tasks = std::move(out);
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
