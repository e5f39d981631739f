#include "core/topology/topology.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>

namespace unipool {

const char* NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kUp: return "up";
    case NodeState::kCordoned: return "cordoned";
    case NodeState::kDrained: return "drained";
    case NodeState::kFlaky: return "flaky";
    case NodeState::kDown: return "down";
  }
  return "unknown";
}

std::optional<NodeState> ParseNodeState(const std::string& s) {
  for (NodeState st : {NodeState::kUp, NodeState::kCordoned, NodeState::kDrained,
                       NodeState::kFlaky, NodeState::kDown}) {
    if (s == NodeStateName(st)) return st;
  }
  return std::nullopt;
}

// Builds a Topology in phases: tiers, nodes (generated or explicit, each
// giving per-node group ids per tier and the group names and parents), then
// the derived arrays (GPU ranges, group ranges, children).
class TopologyBuilder {
 public:
  explicit TopologyBuilder(const ClusterSpec& spec) : spec_(spec) {}

  Result<Topology> Build() {
    t_.name_ = spec_.name;
    UNIPOOL_RETURN_IF_ERROR(BuildTiers());
    UNIPOOL_RETURN_IF_ERROR(BuildModels());
    if (spec_.generator.has_value() == !spec_.nodes.empty()) {
      return InvalidArgument(
          "spec: give exactly one of 'generator' or 'nodes'", spec_.loc);
    }
    UNIPOOL_RETURN_IF_ERROR(spec_.generator ? Generate(*spec_.generator)
                                            : Explicit());
    Finish();
    UNIPOOL_RETURN_IF_ERROR(BuildPower());
    UNIPOOL_RETURN_IF_ERROR(BuildStorage());
    return std::move(t_);
  }

 private:
  int tiers() const { return static_cast<int>(spec_.tiers.size()); }

  // ---- Phase 1: tiers ------------------------------------------------------
  Status BuildTiers() {
    if (spec_.tiers.empty()) {
      return InvalidArgument("spec.tiers: at least one tier (the scale-up domain) is required",
                             spec_.loc);
    }
    Bandwidth narrowest(std::numeric_limits<int64_t>::max());
    for (int t = 0; t < tiers(); ++t) {
      const TierSpec& ts = spec_.tiers[t];
      const std::string where = "spec.tiers[" + std::to_string(t) + "]";
      if (ts.name.empty()) return InvalidArgument(where + ".name: must not be empty", ts.loc);
      for (int u = 0; u < t; ++u) {
        if (spec_.tiers[u].name == ts.name) {
          return InvalidArgument(where + ".name: tier '" + ts.name + "' is listed twice", ts.loc);
        }
      }
      if (ts.bandwidth_per_gpu.value() <= 0) {
        return InvalidArgument(where + ".bandwidthGbps: must be greater than 0", ts.loc);
      }
      if (ts.latency.value() < 0) {
        return InvalidArgument(where + ".latencyUs: must not be negative", ts.loc);
      }
      if (ts.oversubscription_milli < 1000) {
        return InvalidArgument(where + ".oversubscription: must be at least 1 (1:1)", ts.loc);
      }
      if (t == 0 && ts.oversubscription_milli != 1000) {
        return InvalidArgument(where + ".oversubscription: the scale-up tier is not oversubscribed",
                               ts.loc);
      }
      if (ts.fanout < 0 || (ts.fanout == 0 && t != 0 && t != tiers() - 1 && spec_.generator)) {
        return InvalidArgument(where + ".fanout: must be at least 1 below the top tier", ts.loc);
      }
      if (ts.switches_per_group < 1) {
        return InvalidArgument(where + ".switchesPerGroup: must be at least 1", ts.loc);
      }
      Tier tier{ts.name, ts.bandwidth_per_gpu, ts.latency, ts.oversubscription_milli,
                ts.switches_per_group, Bandwidth(0)};
      const Bandwidth per_gpu(ts.bandwidth_per_gpu.value() * 1000 / ts.oversubscription_milli);
      if (t == 0) {
        tier.effective_per_gpu = per_gpu;
      } else {
        narrowest = std::min(narrowest, per_gpu);
        tier.effective_per_gpu = narrowest;
      }
      t_.tiers_.push_back(tier);
    }
    return Status::Ok();
  }

  // ---- Phase 2: GPU models -------------------------------------------------
  Status BuildModels() {
    for (const GpuModel& m : spec_.gpu_models) {
      if (m.name.empty()) return InvalidArgument("spec.gpuModels: a model has no name", spec_.loc);
      if (m.peak_bf16.value() <= 0 || m.hbm.value() <= 0) {
        return InvalidArgument("spec.gpuModels: model '" + m.name +
                                   "' needs bf16Tflops and hbmGB greater than 0",
                               spec_.loc);
      }
    }
    return Status::Ok();
  }

  // Index of `name` in the model table, adding it from the file's models or
  // the built-in catalog on first use.
  Result<int> ModelIndex(const std::string& name, SourceLoc loc, const std::string& where) {
    for (size_t i = 0; i < t_.models_.size(); ++i) {
      if (t_.models_[i].name == name) return static_cast<int>(i);
    }
    std::optional<GpuModel> m;
    for (const GpuModel& own : spec_.gpu_models) {
      if (own.name == name) m = own;
    }
    if (!m) m = FindBuiltinGpuModel(name);
    if (!m) {
      std::string known;
      for (const GpuModel& b : BuiltinGpuModels()) known += (known.empty() ? "" : ", ") + b.name;
      return InvalidArgument(where + ": unknown GPU model '" + name +
                                 "' (built in: " + known + "; or define it in spec.gpuModels)",
                             loc);
    }
    if (t_.models_.size() >= 255) {
      return InvalidArgument(where + ": more than 255 GPU models", loc);
    }
    t_.models_.push_back(WithPowerDefaults(*m));
    return static_cast<int>(t_.models_.size() - 1);
  }

  int Intern(std::vector<std::string>& table, const std::string& s) {
    auto it = std::find(table.begin(), table.end(), s);
    if (it != table.end()) return static_cast<int>(it - table.begin());
    table.push_back(s);
    return static_cast<int>(table.size() - 1);
  }

  int InternLabels(const Labels& labels) {
    auto it = std::find(t_.label_sets_.begin(), t_.label_sets_.end(), labels);
    if (it != t_.label_sets_.end()) return static_cast<int>(it - t_.label_sets_.begin());
    t_.label_sets_.push_back(labels);
    return static_cast<int>(t_.label_sets_.size() - 1);
  }

  Status AddNode(std::string name, int gpus, int model, int partition, int labels,
                 NodeState state, SourceLoc loc) {
    if (!t_.node_index_.emplace(name, static_cast<int32_t>(t_.nodes_.size())).second) {
      return InvalidArgument("node '" + name + "' is listed twice", loc);
    }
    Topology::NodeRec rec;
    rec.name = std::move(name);
    rec.gpus = static_cast<int16_t>(gpus);
    rec.model = static_cast<uint8_t>(model);
    rec.partition = partition;
    rec.labels = labels;
    rec.state = state;
    t_.nodes_.push_back(std::move(rec));
    return Status::Ok();
  }

  // ---- Phase 3a: generated clusters ---------------------------------------
  Status Generate(const GeneratorSpec& g) {
    if (g.gpus_per_node < 1 || g.gpus_per_node > kMaxGpusPerNode) {
      return InvalidArgument("spec.generator.gpusPerNode: must be between 1 and " +
                                 std::to_string(kMaxGpusPerNode),
                             g.loc);
    }
    if (g.gpus < 1 || g.gpus > (int64_t{1} << 24)) {
      return InvalidArgument("spec.generator.gpus: must be between 1 and 16777216", g.loc);
    }
    if (g.gpus % g.gpus_per_node != 0) {
      return InvalidArgument("spec.generator.gpus: " + std::to_string(g.gpus) +
                                 " is not a multiple of gpusPerNode (" +
                                 std::to_string(g.gpus_per_node) + ")",
                             g.loc);
    }
    const int64_t nodes = g.gpus / g.gpus_per_node;
    // Nodes per group at each tier; the top tier holds everything.
    std::vector<int64_t> per_group(tiers());
    int64_t span = 1;
    for (int t = 0; t < tiers(); ++t) {
      const TierSpec& ts = spec_.tiers[t];
      const bool top = t == tiers() - 1;
      if (top && ts.fanout == 0) {
        per_group[t] = nodes;
        break;
      }
      const int64_t fanout = (t == 0 && ts.fanout == 0) ? 1 : ts.fanout;  // node = domain
      span = std::min<int64_t>(span * fanout, int64_t{1} << 40);
      per_group[t] = span;
      if (top && span < nodes) {
        return InvalidArgument("spec.tiers[" + std::to_string(t) + "].fanout: the top tier '" +
                                   ts.name + "' holds " + std::to_string(span) +
                                   " nodes but the cluster has " + std::to_string(nodes) +
                                   "; raise its fanout, drop it to derive it, or add a tier",
                               ts.loc);
      }
    }
    int partition_tier = -1;
    if (!g.partition_tier.empty()) {
      auto it = std::find_if(spec_.tiers.begin(), spec_.tiers.end(),
                             [&](const TierSpec& ts) { return ts.name == g.partition_tier; });
      if (it == spec_.tiers.end()) {
        return InvalidArgument("spec.generator.partitionTier: no tier named '" +
                                   g.partition_tier + "'",
                               g.loc);
      }
      partition_tier = static_cast<int>(it - spec_.tiers.begin());
    }
    Result<int> model = ModelIndex(g.gpu_model, g.loc, "spec.generator.gpuModel");
    if (!model.ok()) return model.status();
    const int labels = InternLabels(g.labels);

    // Groups and names.
    group_of_.assign(tiers(), std::vector<int32_t>(nodes));
    t_.group_names_.assign(tiers(), {});
    parents_.assign(tiers(), {});
    for (int t = 0; t < tiers(); ++t) {
      const int64_t groups = (nodes + per_group[t] - 1) / per_group[t];
      const int width = static_cast<int>(std::to_string(groups - 1).size());
      auto& names = t_.group_names_[t];
      names.reserve(groups);
      for (int64_t i = 0; i < groups; ++i) names.push_back(Padded(spec_.tiers[t].name + "-", i, width));
      for (int64_t n = 0; n < nodes; ++n) group_of_[t][n] = static_cast<int32_t>(n / per_group[t]);
      if (t + 1 < tiers()) {
        // The top tier has one group; below it, `up` groups share a parent.
        const bool below_top = t + 2 == tiers();
        const int64_t up = per_group[t + 1] / per_group[t];
        parents_[t].resize(groups);
        for (int64_t i = 0; i < groups; ++i) {
          parents_[t][i] = below_top ? 0 : static_cast<int32_t>(i / up);
        }
      } else {
        parents_[t].assign(groups, -1);
      }
    }
    const int width = static_cast<int>(std::to_string(nodes - 1).size());
    t_.nodes_.reserve(nodes);
    t_.node_index_.reserve(nodes);
    for (int64_t n = 0; n < nodes; ++n) {
      const int partition =
          partition_tier < 0
              ? Intern(t_.partitions_, "default")
              : Intern(t_.partitions_, t_.group_names_[partition_tier][group_of_[partition_tier][n]]);
      UNIPOOL_RETURN_IF_ERROR(AddNode(Padded(g.node_prefix, n, width), g.gpus_per_node, *model,
                                      partition, labels, NodeState::kUp, g.loc));
    }
    return Status::Ok();
  }

  static std::string Padded(const std::string& prefix, int64_t i, int width) {
    std::string digits = std::to_string(i);
    return prefix + std::string(std::max<int>(0, width - static_cast<int>(digits.size())), '0') +
           digits;
  }

  // ---- Phase 3b: explicit nodes --------------------------------------------
  // Each node names its group per tier. Groups are numbered in order of first
  // appearance; nodes are then sorted depth-first so groups are contiguous.
  Status Explicit() {
    const size_t n = spec_.nodes.size();
    std::vector<std::map<std::string, int32_t>> index(tiers());
    std::vector<std::vector<std::string>> names(tiers());
    std::vector<std::vector<int32_t>> parent(tiers());
    std::vector<std::vector<SourceLoc>> first_seen(tiers());
    std::vector<std::vector<int32_t>> node_groups(n, std::vector<int32_t>(tiers()));
    for (size_t i = 0; i < n; ++i) {
      const NodeSpec& ns = spec_.nodes[i];
      const std::string where = "node '" + ns.name + "'";
      UNIPOOL_RETURN_IF_ERROR(CheckNode(ns));
      if (static_cast<int>(ns.groups.size()) > tiers()) {
        return InvalidArgument(where + ": more switch tiers than spec.tiers lists", ns.loc);
      }
      for (int t = 0; t < tiers(); ++t) {
        std::string g = t < static_cast<int>(ns.groups.size()) ? ns.groups[t] : "";
        if (g.empty()) g = t == 0 ? ns.name : spec_.tiers[t].name;
        auto [it, fresh] = index[t].emplace(g, static_cast<int32_t>(names[t].size()));
        if (fresh) {
          names[t].push_back(g);
          parent[t].push_back(-1);
          first_seen[t].push_back(ns.loc);
        }
        node_groups[i][t] = it->second;
      }
      // Link each group to its parent; a group has one parent only.
      for (int t = 0; t + 1 < tiers(); ++t) {
        int32_t& p = parent[t][node_groups[i][t]];
        const int32_t up = node_groups[i][t + 1];
        if (p >= 0 && p != up) {
          return InvalidArgument(where + ": " + spec_.tiers[t].name + " '" +
                                     names[t][node_groups[i][t]] + "' is under " +
                                     spec_.tiers[t + 1].name + " '" + names[t + 1][up] +
                                     "' here but under '" + names[t + 1][p] + "' at line " +
                                     std::to_string(first_seen[t][node_groups[i][t]].line),
                                 ns.loc);
        }
        p = up;
      }
    }
    if (names[tiers() - 1].size() != 1) {
      return InvalidArgument("the top tier '" + spec_.tiers.back().name +
                                 "' must hold the whole cluster, but nodes name " +
                                 std::to_string(names[tiers() - 1].size()) + " groups of it",
                             spec_.loc);
    }
    return PlaceExplicitNodes(node_groups, names, parent);
  }

  Status CheckNode(const NodeSpec& ns) {
    if (ns.name.empty()) return InvalidArgument("spec.nodes: a node has no name", ns.loc);
    if (ns.gpus < 1 || ns.gpus > kMaxGpusPerNode) {
      return InvalidArgument("node '" + ns.name + "'.gpus: must be between 1 and " +
                                 std::to_string(kMaxGpusPerNode),
                             ns.loc);
    }
    return Status::Ok();
  }

  // Renumbers groups depth-first and adds the nodes in that order.
  Status PlaceExplicitNodes(const std::vector<std::vector<int32_t>>& node_groups,
                            std::vector<std::vector<std::string>>& names,
                            std::vector<std::vector<int32_t>>& parent) {
    const size_t n = node_groups.size();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      for (int t = tiers() - 1; t >= 0; --t) {
        if (node_groups[a][t] != node_groups[b][t]) return node_groups[a][t] < node_groups[b][t];
      }
      return false;
    });
    // New group numbers follow the sorted node order.
    std::vector<std::vector<int32_t>> renumber(tiers());
    for (int t = 0; t < tiers(); ++t) renumber[t].assign(names[t].size(), -1);
    group_of_.assign(tiers(), std::vector<int32_t>(n));
    t_.group_names_.assign(tiers(), {});
    parents_.assign(tiers(), {});
    for (size_t k = 0; k < n; ++k) {
      for (int t = 0; t < tiers(); ++t) {
        int32_t& id = renumber[t][node_groups[order[k]][t]];
        if (id < 0) {
          id = static_cast<int32_t>(t_.group_names_[t].size());
          t_.group_names_[t].push_back(names[t][node_groups[order[k]][t]]);
        }
        group_of_[t][k] = id;
      }
    }
    for (int t = 0; t < tiers(); ++t) {
      parents_[t].assign(t_.group_names_[t].size(), -1);
      for (size_t old = 0; old < names[t].size(); ++old) {
        if (t + 1 < tiers()) parents_[t][renumber[t][old]] = renumber[t + 1][parent[t][old]];
      }
    }
    for (size_t k = 0; k < n; ++k) {
      const NodeSpec& ns = spec_.nodes[order[k]];
      Result<int> model = ModelIndex(ns.gpu_model, ns.loc, "node '" + ns.name + "'.gpuModel");
      if (!model.ok()) return model.status();
      UNIPOOL_RETURN_IF_ERROR(AddNode(ns.name, ns.gpus, *model, Intern(t_.partitions_, ns.partition),
                                      InternLabels(ns.labels), ns.state, ns.loc));
    }
    return Status::Ok();
  }

  // ---- Phase 4: derived arrays --------------------------------------------
  void Finish() {
    const int32_t nodes = static_cast<int32_t>(t_.nodes_.size());
    int64_t gpu = 0;
    for (auto& rec : t_.nodes_) {
      rec.first_gpu = static_cast<int32_t>(gpu);
      gpu += rec.gpus;
    }
    t_.gpu_node_.resize(gpu);
    for (int32_t n = 0; n < nodes; ++n) {
      const auto& rec = t_.nodes_[n];
      std::fill_n(t_.gpu_node_.begin() + rec.first_gpu, rec.gpus, n);
    }
    t_.groups_.assign(tiers(), {});
    for (int t = 0; t < tiers(); ++t) {
      auto& groups = t_.groups_[t];
      groups.resize(t_.group_names_[t].size());
      for (size_t g = 0; g < groups.size(); ++g) groups[g].parent = parents_[t][g];
      for (int32_t n = nodes - 1; n >= 0; --n) {
        auto& rec = groups[group_of_[t][n]];
        rec.first_node = n;
        rec.num_nodes++;
        rec.gpus += t_.nodes_[n].gpus;
      }
      // Children: nodes for tier 0, groups of tier t-1 above it.
      if (t == 0) {
        for (auto& rec : groups) {
          rec.first_child = rec.first_node;
          rec.num_children = rec.num_nodes;
        }
      } else {
        for (int32_t c = static_cast<int32_t>(t_.groups_[t - 1].size()) - 1; c >= 0; --c) {
          auto& rec = groups[parents_[t - 1][c]];
          rec.first_child = c;
          rec.num_children++;
        }
      }
    }
    t_.node_group_ = std::move(group_of_);
  }

  // ---- Phase 5: power domains ---------------------------------------------
  Status BuildPower() {
    const PowerSpec& ps = spec_.power;
    if (!(ps.pue >= 1 && ps.pue <= 10)) {
      return InvalidArgument("spec.power.pue: must be between 1 and 10", ps.loc);
    }
    t_.pue_ = ps.pue;
    t_.power_cap_.assign(tiers(), {});
    for (size_t i = 0; i < ps.caps.size(); ++i) {
      const PowerCapSpec& c = ps.caps[i];
      const std::string where = "spec.power.caps[" + std::to_string(i) + "]";
      const std::optional<int> t = t_.FindTier(c.tier);
      if (!t) return InvalidArgument(where + ".tier: no tier named '" + c.tier + "'", c.loc);
      const auto& names = t_.group_names_[*t];
      auto& caps = t_.power_cap_[*t];
      if (caps.empty()) caps.assign(names.size(), 0);
      int32_t first = 0, last = static_cast<int32_t>(names.size());
      if (!c.group.empty()) {
        auto it = std::find(names.begin(), names.end(), c.group);
        if (it == names.end()) {
          return InvalidArgument(where + ".group: no " + c.tier + " named '" + c.group + "'",
                                 c.loc);
        }
        first = static_cast<int32_t>(it - names.begin());
        last = first + 1;
      }
      for (int32_t g = first; g < last; ++g) {
        UNIPOOL_RETURN_IF_ERROR(CheckCap(*t, GroupId(g), c, where));
        caps[g] = c.cap.value();
      }
      t_.has_power_caps_ = true;
    }
    return Status::Ok();
  }

  // ---- Phase 6: storage ---------------------------------------------------
  Status BuildStorage() {
    for (size_t i = 0; i < spec_.storage.size(); ++i) {
      StorageSpec st = spec_.storage[i];
      const std::string where = "spec.storage[" + std::to_string(i) + "]";
      if (st.name.empty()) return InvalidArgument(where + ".name: must not be empty", st.loc);
      for (size_t k = 0; k < i; ++k) {
        if (spec_.storage[k].name == st.name) {
          return InvalidArgument(where + ".name: '" + st.name + "' is listed twice", st.loc);
        }
      }
      if (!(st.write_bytes_per_s > 0)) {
        return InvalidArgument(where + ".writeGBps: must be greater than 0", st.loc);
      }
      if (!(st.client_bytes_per_s > 0)) {
        return InvalidArgument(where + ".clientGBps: must be greater than 0", st.loc);
      }
      if (st.read_bytes_per_s <= 0) st.read_bytes_per_s = st.write_bytes_per_s;
      if (!st.partition.empty()) {
        const auto& ps = t_.partitions_;
        const auto it = std::find(ps.begin(), ps.end(), st.partition);
        if (it == ps.end()) {
          std::string names;
          for (const std::string& p : ps) names += (names.empty() ? "" : ", ") + p;
          return InvalidArgument(where + ".partition: the cluster has no partition '" +
                                     st.partition + "' (it has " + names + ")",
                                 st.loc);
        }
        st.partition_index = static_cast<int32_t>(it - ps.begin());
      }
      t_.storage_.push_back(std::move(st));
    }
    return Status::Ok();
  }

  // A cap below what the domain draws idle could never hold.
  Status CheckCap(int t, GroupId g, const PowerCapSpec& c, const std::string& where) {
    const int64_t idle = IdleDraw(t)[g.value()];
    if (c.cap.value() > 0 && c.cap.value() >= idle) return Status::Ok();
    char buf[160];
    std::snprintf(buf, sizeof buf, ": %.1f kW is below the %.1f kW that %s '%s' draws idle",
                  c.cap.value() / 1e3, idle / 1e3, spec_.tiers[t].name.c_str(),
                  t_.group_names_[t][g.value()].c_str());
    return InvalidArgument(where + buf, c.loc);
  }

  // W each group of tier t draws idle, summed once per tier.
  const std::vector<int64_t>& IdleDraw(int t) {
    if (idle_draw_.empty()) idle_draw_.resize(tiers());
    std::vector<int64_t>& idle = idle_draw_[t];
    if (idle.empty()) {
      idle.assign(t_.group_names_[t].size(), 0);
      for (int32_t n = 0; n < t_.num_nodes(); ++n) {
        idle[t_.group_of(NodeId(n), t).value()] += t_.node_idle_power(NodeId(n)).value();
      }
    }
    return idle;
  }

  const ClusterSpec& spec_;
  Topology t_;
  std::vector<std::vector<int32_t>> group_of_;  // [tier][node]
  std::vector<std::vector<int32_t>> parents_;   // [tier][group]
  std::vector<std::vector<int64_t>> idle_draw_;  // [tier][group] W, as needed
};

Result<Topology> Topology::Build(const ClusterSpec& spec) {
  return TopologyBuilder(spec).Build();
}

std::optional<int> Topology::FindTier(std::string_view name) const {
  for (int t = 0; t < num_tiers(); ++t) {
    if (tiers_[t].name == name) return t;
  }
  return std::nullopt;
}

std::optional<NodeId> Topology::FindNode(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  if (it == node_index_.end()) return std::nullopt;
  return NodeId(it->second);
}

int Topology::LowestCommonTier(NodeId a, NodeId b) const {
  if (a == b) return -1;
  for (int t = 0; t < num_tiers(); ++t) {
    if (node_group_[t][a.value()] == node_group_[t][b.value()]) return t;
  }
  return top_tier();  // unreachable: the top tier has one group
}

}  // namespace unipool
