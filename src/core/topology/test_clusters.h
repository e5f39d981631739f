// Small cluster specs shared by tests across core (not linked into the
// binary: header-only, included from *_test.cc files).
#pragma once

#include "core/topology/cluster_spec.h"

namespace unipool::testing {

// nvlink (8-GPU nodes) / rack of 2 nodes / pod of 4 racks / top tier.
inline ClusterSpec ThreeTier(int64_t gpus) {
  ClusterSpec spec;
  spec.name = "three-tier";
  spec.tiers = {
      TierSpec{"nvlink", Gbps(3600), Microseconds(1)},
      TierSpec{"rack", Gbps(400), Microseconds(2), 1000, 2},
      TierSpec{"pod", Gbps(400), Microseconds(4), 1000, 4},
      TierSpec{"top", Gbps(400), Microseconds(8)},
  };
  GeneratorSpec g;
  g.gpus = gpus;
  g.gpus_per_node = 8;
  g.gpu_model = "H100-SXM";
  g.node_prefix = "n";
  g.partition_tier = "pod";
  spec.generator = g;
  return spec;
}

// Four explicit nodes in two racks, listed interleaved; b1 is down.
inline ClusterSpec ExplicitTwoRacks() {
  ClusterSpec spec;
  spec.name = "two-racks";
  spec.tiers = {TierSpec{"nvlink", Gbps(3600), Microseconds(1)},
                TierSpec{"rack", Gbps(200), Microseconds(2)},
                TierSpec{"top", Gbps(200), Microseconds(4)}};
  auto node = [](std::string name, int gpus, std::string rack) {
    NodeSpec n;
    n.name = std::move(name);
    n.gpus = gpus;
    n.gpu_model = "A100-SXM4-80GB";
    n.groups = {"", std::move(rack), ""};
    return n;
  };
  spec.nodes = {node("a0", 8, "r-a"), node("b0", 4, "r-b"), node("a1", 8, "r-a"),
                node("b1", 4, "r-b")};
  spec.nodes[3].state = NodeState::kDown;
  return spec;
}

}  // namespace unipool::testing
