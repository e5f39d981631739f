#include "core/sched/power.h"

namespace unipool::sched {

PowerBudget::PowerBudget(const Topology& topo) : topo_(&topo) {
  const int32_t nodes = topo.num_nodes();
  busy_gpus_.assign(nodes, 0);
  for (int32_t n = 0; n < nodes; ++n) idle_ += topo.node_idle_power(NodeId(n)).value();
  if (!topo.has_power_caps()) return;
  // Caps, lowest tier first, and each node's caps (one per capped tier).
  std::vector<std::vector<int32_t>> cap_index(topo.num_tiers());
  for (int t = 0; t < topo.num_tiers(); ++t) {
    cap_index[t].assign(topo.num_groups(t), -1);
    for (int32_t g = 0; g < topo.num_groups(t); ++g) {
      const Watts cap = topo.power_cap(t, GroupId(g));
      if (cap.value() <= 0) continue;
      cap_index[t][g] = static_cast<int32_t>(caps_.size());
      caps_.push_back(Cap{t, GroupId(g), cap.value(), 0});
    }
  }
  node_caps_at_.assign(nodes + 1, 0);
  for (int32_t n = 0; n < nodes; ++n) {
    node_caps_at_[n] = static_cast<int32_t>(node_caps_.size());
    for (int t = 0; t < topo.num_tiers(); ++t) {
      const int32_t c = cap_index[t][topo.group_of(NodeId(n), t).value()];
      if (c < 0) continue;
      node_caps_.push_back(c);
      caps_[c].draw += topo.node_idle_power(NodeId(n)).value();
    }
    if (static_cast<int32_t>(node_caps_.size()) > node_caps_at_[n]) capped_nodes_.push_back(n);
  }
  node_caps_at_[nodes] = static_cast<int32_t>(node_caps_.size());
  hidden_.assign(nodes, false);
  const size_t parts = topo.partitions().size() + 1;
  hidden_gpus_.assign(parts, 0);
  binding_.assign(parts, -1);
}

int64_t PowerBudget::Delta(NodeId n) const {
  const GpuModel& m = topo_->node_model(n);
  return (m.train_power - m.idle_power).value();
}

void PowerBudget::Busy(NodeId n, int32_t delta) {
  busy_gpus_[n.value()] = static_cast<int16_t>(busy_gpus_[n.value()] + delta);
  const int64_t w = delta * Delta(n);
  busy_ += w;
  if (caps_.empty()) return;
  for (int32_t i = node_caps_at_[n.value()]; i < node_caps_at_[n.value() + 1]; ++i) {
    caps_[node_caps_[i]].draw += w;
  }
}

std::vector<PowerBudget::Domain> PowerBudget::Domains() const {
  std::vector<Domain> out;
  out.reserve(caps_.size());
  for (const Cap& c : caps_) out.push_back(Domain{c.tier, c.group, Watts(c.cap), Watts(c.draw)});
  return out;
}

// Phases: headroom per domain, then the preferred group's nodes, then the
// rest in node order; each node is kept while all its domains can run its
// free GPUs.
std::vector<NodeId> PowerBudget::Refresh(const std::function<bool(NodeId)>& eligible,
                                         std::optional<std::pair<int, GroupId>> first) {
  std::vector<NodeId> changed;
  if (caps_.empty()) return changed;
  std::vector<int64_t> left(caps_.size());
  for (size_t c = 0; c < caps_.size(); ++c) left[c] = caps_[c].cap - caps_[c].draw;
  std::fill(hidden_gpus_.begin(), hidden_gpus_.end(), 0);
  std::fill(binding_.begin(), binding_.end(), -1);
  int32_t lo = 0, hi = 0;  // the preferred group's node range
  if (first) {
    lo = topo_->group_first_node(first->first, first->second).value();
    hi = lo + topo_->group_num_nodes(first->first, first->second);
    for (int32_t n = lo; n < hi; ++n) {
      if (node_caps_at_[n] < node_caps_at_[n + 1]) Consider(n, eligible, left, changed);
    }
  }
  for (int32_t n : capped_nodes_) {
    if (n < lo || n >= hi) Consider(n, eligible, left, changed);
  }
  return changed;
}

void PowerBudget::Consider(int32_t n, const std::function<bool(NodeId)>& eligible,
                           std::vector<int64_t>& left, std::vector<NodeId>& changed) {
  const NodeId node(n);
  const int64_t free = topo_->node_gpus(node).value() - busy_gpus_[n];
  bool hide = false;
  int32_t refused = -1;
  if (free > 0 && eligible(node)) {
    const int64_t need = free * Delta(node);
    for (int32_t i = node_caps_at_[n]; i < node_caps_at_[n + 1] && !hide; ++i) {
      if (left[node_caps_[i]] < need) hide = true, refused = node_caps_[i];
    }
    if (!hide) {
      for (int32_t i = node_caps_at_[n]; i < node_caps_at_[n + 1]; ++i) left[node_caps_[i]] -= need;
    }
  }
  if (hide) {
    for (size_t p : {size_t{0}, static_cast<size_t>(topo_->node_partition(node) + 1)}) {
      hidden_gpus_[p] += free;
      if (binding_[p] < 0) binding_[p] = refused;
    }
  }
  if (hidden_[n] != hide) {
    hidden_[n] = hide;
    changed.push_back(node);
  }
}

int64_t PowerBudget::hidden_gpus(int32_t partition) const {
  return hidden_gpus_.empty() ? 0 : hidden_gpus_[partition + 1];
}

std::optional<PowerBudget::Domain> PowerBudget::Binding(int32_t partition) const {
  if (binding_.empty() || binding_[partition + 1] < 0) return std::nullopt;
  const Cap& c = caps_[binding_[partition + 1]];
  return Domain{c.tier, c.group, Watts(c.cap), Watts(c.draw)};
}

}  // namespace unipool::sched
