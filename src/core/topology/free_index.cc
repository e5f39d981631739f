#include "core/topology/free_index.h"

#include <cassert>

namespace unipool {

FreeIndex::FreeIndex(const Topology& topo) : topo_(&topo) {
  node_free_.resize(topo.num_nodes());
  for (int32_t n = 0; n < topo.num_nodes(); ++n) {
    node_free_[n] = AllGpus(static_cast<int32_t>(topo.node_gpus(NodeId(n)).value()));
  }
  group_free_.resize(topo.num_tiers());
  for (int t = 0; t < topo.num_tiers(); ++t) {
    group_free_[t].resize(topo.num_groups(t));
    for (int32_t g = 0; g < topo.num_groups(t); ++g) {
      group_free_[t][g] = topo.group_gpus(t, GroupId(g)).value();
    }
  }
}

void FreeIndex::Take(NodeId n, GpuMask mask) {
  assert((node_free_[n.value()] & mask) == mask);
  node_free_[n.value()] &= ~mask;
  Adjust(n, -CountGpus(mask));
}

void FreeIndex::Give(NodeId n, GpuMask mask) {
  assert((node_free_[n.value()] & mask) == 0);
  assert((AllGpus(static_cast<int32_t>(topo_->node_gpus(n).value())) & mask) == mask);
  node_free_[n.value()] |= mask;
  Adjust(n, CountGpus(mask));
}

void FreeIndex::Adjust(NodeId n, int64_t delta) {
  for (int t = 0; t < topo_->num_tiers(); ++t) {
    group_free_[t][topo_->group_of(n, t).value()] += delta;
  }
}

}  // namespace unipool
