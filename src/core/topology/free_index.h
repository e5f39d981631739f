// FreeIndex: which GPUs are free, with counts kept per node and per group of
// every tier, so "free GPUs under this switch" is O(1) and taking or giving
// back GPUs on a node is O(number of tiers).
//
// Holds a non-owning reference to a Topology that must outlive it. Node
// state (down, cordoned, ...) is not its concern: callers decide which
// free GPUs they may use.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/ids.h"
#include "core/base/units.h"
#include "core/topology/topology.h"

namespace unipool {

// Bit i set = the node's local GPU i, for up to kMaxGpusPerNode (128) GPUs:
// a whole 72-GPU NVLink rack run as one node fits. (GCC's and Clang's
// 128-bit integer: every operator of an integer mask, two popcounts.)
__extension__ typedef unsigned __int128 GpuMask;

inline GpuMask AllGpus(int32_t n) {
  return n >= kMaxGpusPerNode ? ~GpuMask{0} : (GpuMask{1} << n) - 1;
}
inline int CountGpus(GpuMask m) {
  return __builtin_popcountll(static_cast<uint64_t>(m)) +
         __builtin_popcountll(static_cast<uint64_t>(m >> 64));
}

class FreeIndex {
 public:
  // Every GPU starts free.
  explicit FreeIndex(const Topology& topo);

  const Topology& topology() const { return *topo_; }
  GpuMask free_mask(NodeId n) const { return node_free_[n.value()]; }
  Gpus free(NodeId n) const { return Gpus(CountGpus(node_free_[n.value()])); }
  Gpus free(int tier, GroupId g) const { return Gpus(group_free_[tier][g.value()]); }
  Gpus free_total() const { return free(topo_->top_tier(), GroupId(0)); }

  // Marks `mask` on node n as used. REQUIRES: every bit of mask is free.
  void Take(NodeId n, GpuMask mask);
  // Marks `mask` on node n as free. REQUIRES: every bit of mask is taken and
  // names one of the node's GPUs.
  void Give(NodeId n, GpuMask mask);

 private:
  void Adjust(NodeId n, int64_t delta);

  const Topology* topo_;
  std::vector<GpuMask> node_free_;
  std::vector<std::vector<int64_t>> group_free_;  // [tier][group]
};

}  // namespace unipool
