// Topology: the compact, immutable model of a cluster's hardware and network.
//
// Layout. Nodes are numbered in depth-first order of the switch tree, so every
// group of every tier owns a contiguous range of nodes, and every node a
// contiguous range of GPUs. All per-node and per-group facts live in flat
// arrays indexed by dense ids; there is no object per GPU. A 2^20-GPU cluster
// of 8-GPU nodes takes a few tens of MiB.
//
// Cost. node_of(gpu), group_of(node, tier) and the group queries are O(1);
// LowestCommonTier is O(number of tiers). Build is O(nodes x tiers).
//
// Tiers are numbered from 0 (the scale-up/NVLink domain) up to
// num_tiers()-1, the top tier, which always has exactly one group: the whole
// cluster.
//
// Thread safety: const methods may be called concurrently; set_node_state
// needs external synchronisation.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/ids.h"
#include "core/base/status.h"
#include "core/base/units.h"
#include "core/topology/cluster_spec.h"
#include "core/topology/gpu_model.h"

namespace unipool {

struct Tier {
  std::string name;
  Bandwidth bandwidth_per_gpu;
  Duration latency;
  int64_t oversubscription_milli = 1000;
  int32_t switches_per_group = 1;
  // What one GPU gets when every GPU talks across this tier at once: the
  // narrowest of bandwidth/oversubscription over the scale-out tiers 1..t
  // (for tier 0, its own bandwidth).
  Bandwidth effective_per_gpu;
};

// Upper bound on GPUs in one node: a node's GPUs fit one 128-bit mask
// (GpuMask).
inline constexpr int32_t kMaxGpusPerNode = 128;

class Topology {
 public:
  // Checks `spec` and builds the model. Errors carry the place in the source
  // file of the element at fault (spec locations).
  static Result<Topology> Build(const ClusterSpec& spec);

  const std::string& name() const { return name_; }

  // Tiers.
  int num_tiers() const { return static_cast<int>(tiers_.size()); }
  const Tier& tier(int t) const { return tiers_[t]; }
  int top_tier() const { return num_tiers() - 1; }
  std::optional<int> FindTier(std::string_view name) const;

  // Sizes.
  Gpus num_gpus() const { return Gpus(static_cast<int64_t>(gpu_node_.size())); }
  int32_t num_nodes() const { return static_cast<int32_t>(nodes_.size()); }
  int32_t num_groups(int t) const {
    return static_cast<int32_t>(groups_[t].size());
  }

  // Nodes.
  const std::string& node_name(NodeId n) const { return nodes_[n.value()].name; }
  Gpus node_gpus(NodeId n) const { return Gpus(nodes_[n.value()].gpus); }
  GpuId first_gpu(NodeId n) const { return GpuId(nodes_[n.value()].first_gpu); }
  const GpuModel& node_model(NodeId n) const {
    return models_[nodes_[n.value()].model];
  }
  int32_t node_partition(NodeId n) const { return nodes_[n.value()].partition; }
  const Labels& node_labels(NodeId n) const {
    return label_sets_[nodes_[n.value()].labels];
  }
  NodeState node_state(NodeId n) const { return nodes_[n.value()].state; }
  void set_node_state(NodeId n, NodeState s) { nodes_[n.value()].state = s; }
  std::optional<NodeId> FindNode(std::string_view name) const;

  NodeId node_of(GpuId g) const { return NodeId(gpu_node_[g.value()]); }
  GroupId group_of(NodeId n, int t) const {
    return GroupId(node_group_[t][n.value()]);
  }

  // Groups.
  const std::string& group_name(int t, GroupId g) const {
    return group_names_[t][g.value()];
  }
  // The group one tier up; invalid for the top tier.
  GroupId parent(int t, GroupId g) const {
    return GroupId(groups_[t][g.value()].parent);
  }
  NodeId group_first_node(int t, GroupId g) const {
    return NodeId(groups_[t][g.value()].first_node);
  }
  int32_t group_num_nodes(int t, GroupId g) const {
    return groups_[t][g.value()].num_nodes;
  }
  Gpus group_gpus(int t, GroupId g) const { return Gpus(groups_[t][g.value()].gpus); }
  // Children are groups of tier t-1 (nodes for t = 0), also contiguous.
  int32_t group_first_child(int t, GroupId g) const {
    return groups_[t][g.value()].first_child;
  }
  int32_t group_num_children(int t, GroupId g) const {
    return groups_[t][g.value()].num_children;
  }

  // The lowest tier whose group holds both; -1 when a == b.
  int LowestCommonTier(NodeId a, NodeId b) const;
  // As above for GPUs; -1 when both are on one node.
  int LowestCommonTier(GpuId a, GpuId b) const {
    return LowestCommonTier(node_of(a), node_of(b));
  }

  // Power. Caps are on IT power (what the nodes draw); 0: no cap. The
  // idle draw of a node is its GPUs x (idle + host) W; each busy GPU adds
  // train - idle W.
  bool has_power_caps() const { return has_power_caps_; }
  Watts power_cap(int t, GroupId g) const {
    return power_cap_[t].empty() ? Watts(0) : Watts(power_cap_[t][g.value()]);
  }
  Watts node_idle_power(NodeId n) const {
    const GpuModel& m = node_model(n);
    return Watts(node_gpus(n).value() * (m.idle_power + m.host_power).value());
  }
  double pue() const { return pue_; }

  // Storage systems, as the cluster file lists them (read_bytes_per_s
  // filled in); the first is where jobs checkpoint.
  const std::vector<StorageSpec>& storage() const { return storage_; }

  // Interned tables.
  const std::vector<GpuModel>& models() const { return models_; }
  const std::vector<std::string>& partitions() const { return partitions_; }

 private:
  struct NodeRec {
    std::string name;
    int32_t first_gpu = 0;
    int16_t gpus = 0;
    uint8_t model = 0;
    NodeState state = NodeState::kUp;
    int32_t partition = 0;
    int32_t labels = 0;
  };
  struct GroupRec {
    int32_t parent = -1;
    int32_t first_node = 0;
    int32_t num_nodes = 0;
    int32_t first_child = 0;
    int32_t num_children = 0;
    int64_t gpus = 0;
  };
  friend class TopologyBuilder;

  std::string name_;
  std::vector<Tier> tiers_;
  std::vector<NodeRec> nodes_;
  std::vector<int32_t> gpu_node_;
  std::vector<std::vector<int32_t>> node_group_;        // [tier][node]
  std::vector<std::vector<GroupRec>> groups_;           // [tier][group]
  std::vector<std::vector<std::string>> group_names_;   // [tier][group]
  std::vector<GpuModel> models_;
  std::vector<std::string> partitions_;
  std::vector<Labels> label_sets_;
  std::unordered_map<std::string, int32_t> node_index_;
  std::vector<std::vector<int64_t>> power_cap_;  // [tier][group] W; empty: none
  bool has_power_caps_ = false;
  double pue_ = 1.0;
  std::vector<StorageSpec> storage_;
};

}  // namespace unipool
