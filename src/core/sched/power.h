// PowerBudget: the IT power a cluster draws by its GPUs' power model, and
// which free GPUs may start work without pushing a capped power domain (a
// rack, row, hall or site with a cap in the cluster file) over its cap.
//
// Model. A node draws its GPUs x (idle + host) W when idle; each busy GPU
// adds train - idle W (GpuModel). A domain's draw is the sum over its
// nodes, down ones included (a conservative bound: a node that comes back
// draws again).
//
// Enforcement is by hiding: Refresh walks the nodes of capped domains and
// keeps a node visible only while every domain it is in still has the
// headroom to run all its free GPUs; the rest are hidden from placement. So
// whatever the scheduler then starts on visible GPUs, in any combination,
// keeps every domain within its cap, and no placement code needs to know
// about power. Hiding is by whole nodes, like a cordon.
//
// Cost: Busy is O(tiers); Refresh is O(nodes in capped domains x tiers).
// A cluster without caps keeps only the totals. Holds a reference to the
// Topology, which must outlive it. No clocks, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/base/ids.h"
#include "core/base/units.h"
#include "core/topology/topology.h"

namespace unipool::sched {

class PowerBudget {
 public:
  explicit PowerBudget(const Topology& topo);

  // `delta` GPUs of node n became busy (> 0) or idle (< 0).
  void Busy(NodeId n, int32_t delta);

  // IT power the cluster draws now, and the part of it at `busy` GPUs.
  Watts draw() const { return Watts(idle_ + busy_); }

  // A capped domain and what it draws now.
  struct Domain {
    int tier = 0;
    GroupId group;
    Watts cap;
    Watts draw;
  };
  std::vector<Domain> Domains() const;

  // Decides which nodes to hide. `eligible(n)`: the node could take work
  // were it not for power (up, not a spare); others are never power-hidden.
  // Nodes of `first` (a tier and group, a reservation's) are considered
  // before the others, so freed power goes to the job that waits longest.
  // Returns the nodes whose power-hidden flag changed.
  std::vector<NodeId> Refresh(const std::function<bool(NodeId)>& eligible,
                              std::optional<std::pair<int, GroupId>> first = std::nullopt);
  bool hidden(NodeId n) const { return !hidden_.empty() && hidden_[n.value()]; }
  // Clears node n's flag (a spare taken into service outside a Refresh).
  void Unhide(NodeId n) {
    if (!hidden_.empty()) hidden_[n.value()] = false;
  }
  // Free GPUs power keeps hidden in `partition` (-1: the whole cluster) as
  // of the last Refresh, and the domain that hid the first of them.
  int64_t hidden_gpus(int32_t partition) const;
  std::optional<Domain> Binding(int32_t partition) const;

 private:
  struct Cap {
    int tier;
    GroupId group;
    int64_t cap;
    int64_t draw;
  };
  int64_t Delta(NodeId n) const;  // W one GPU of n adds when busy
  // Keeps node n visible if its domains have the headroom left, else hides it.
  void Consider(int32_t n, const std::function<bool(NodeId)>& eligible, std::vector<int64_t>& left,
                std::vector<NodeId>& changed);

  const Topology* topo_;
  int64_t idle_ = 0;                // W
  int64_t busy_ = 0;                // W above idle
  std::vector<int16_t> busy_gpus_;  // [node]
  std::vector<Cap> caps_;
  std::vector<int32_t> node_caps_;     // CSR: caps of node n at
  std::vector<int32_t> node_caps_at_;  // [node_caps_at_[n], node_caps_at_[n+1])
  std::vector<int32_t> capped_nodes_;  // nodes in at least one capped domain
  std::vector<bool> hidden_;           // [node]; empty without caps
  std::vector<int64_t> hidden_gpus_;   // [partition + 1]
  std::vector<int32_t> binding_;       // [partition + 1]: a cap index or -1
};

}  // namespace unipool::sched
