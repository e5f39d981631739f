// Pool: the free-capacity index the placer searches. It covers a set of
// member nodes (a partition, or the whole cluster) and answers, per group of
// every tier, how many GPUs are free, how many member nodes are wholly free,
// how many nodes have exactly k GPUs free, and -- aggregated up the tree --
// the best any descendant group at a lower level can offer. That lets the
// placer find the lowest tier that can hold a gang in O(tiers) and descend to
// it in O(tiers x fan-out), independent of cluster size.
//
// Levels: level 0 is a single node; level t+1 is tier t. A group of tier t
// has aggregates for levels 0..t+1 (its own value at t+1).
//
// Nodes outside the pool, and member nodes that are not usable (down,
// cordoned, ...), show no free GPUs. GPUs released on an unusable node stay
// hidden until it becomes usable again.
//
// Mutations mark groups dirty; call Flush() before reading aggregates
// (MaxFree/MaxWhole). Counts (Free, Whole, Hist, TasksIn) are always current.
// Holds a non-owning reference to the Topology, which must outlive it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/sched/placement.h"
#include "core/topology/free_index.h"  // GpuMask
#include "core/topology/topology.h"

namespace unipool::sched {

class Pool {
 public:
  // `member[n]` says whether node n belongs to the pool; empty = all nodes.
  Pool(const Topology& topo, const std::vector<bool>& member = {});

  const Topology& topology() const { return *topo_; }
  int levels() const { return topo_->num_tiers() + 1; }
  int top_level() const { return topo_->num_tiers(); }
  // Largest GPU count of any node in the cluster.
  int32_t max_node_gpus() const { return k_; }
  // True when every node has max_node_gpus() GPUs.
  bool uniform_nodes() const { return uniform_; }

  bool member(NodeId n) const { return member_[n.value()]; }
  bool usable(NodeId n) const { return usable_[n.value()]; }
  // Free GPUs that may be allocated (0 on unusable or non-member nodes).
  GpuMask free_mask(NodeId n) const { return node_free_[n.value()]; }
  int32_t free(NodeId n) const { return CountGpus(node_free_[n.value()]); }
  bool whole(NodeId n) const;

  // Counts for a group of tier t (level t+1).
  int64_t Free(int tier, GroupId g) const { return free_[tier][g.value()]; }
  int64_t Whole(int tier, GroupId g) const { return whole_[tier][g.value()]; }
  int32_t Hist(int tier, GroupId g, int k) const { return hist_[tier][g.value() * (k_ + 1) + k]; }
  // Tasks of `task_gpus` GPUs (at most one node each) the group can host
  // now, at most `per_node` on one node (0: as many as fit).
  int64_t TasksIn(int tier, GroupId g, int32_t task_gpus, int32_t per_node = 0) const;
  int64_t TasksOn(NodeId n, int32_t task_gpus, int32_t per_node = 0) const {
    const int64_t here = free(n) / task_gpus;
    return per_node > 0 && here > per_node ? per_node : here;
  }

  // Aggregates: the most free GPUs / wholly free nodes of any single group at
  // `level` (<= tier+1) inside group g of `tier`. REQUIRES: flushed.
  int64_t MaxFree(int tier, GroupId g, int level) const;
  int64_t MaxWhole(int tier, GroupId g, int level) const;

  // Allocates `mask` on node n. REQUIRES: usable, mask within free_mask(n).
  void Take(NodeId n, GpuMask mask);
  // Returns `mask` on node n (hidden if the node is unusable).
  // REQUIRES: member, mask taken.
  void Release(NodeId n, GpuMask mask);
  // The same for many nodes at once, cheaper when they share groups (as the
  // tasks of one gang, sorted by node, do). REQUIRES as above, per task.
  void TakeAll(const std::vector<Task>& tasks);
  void ReleaseAll(const std::vector<Task>& tasks);
  // Makes a member node usable or not; its free GPUs appear or hide.
  void SetUsable(NodeId n, bool usable);

  // Recomputes the aggregates of every group touched since the last Flush.
  void Flush();
  bool flushed() const { return dirty_count_ == 0; }

 private:
  // Sets node n's visible free GPUs to `mask` and updates every count on
  // its path in one pass: free GPUs, wholly free nodes, the histogram, and
  // the dirty marks.
  void SetFree(NodeId n, GpuMask mask);
  void MarkDirty(int tier, int32_t g);
  // Applies new free masks to many nodes, summing the count changes per
  // group before writing them.
  void SetFreeAll(const std::vector<Task>& tasks, bool take);
  void Recompute(int tier, int32_t g);
  int64_t& Agg(std::vector<std::vector<int64_t>>& a, int tier, int32_t g, int level) {
    return a[tier][static_cast<size_t>(g) * (tier + 2) + level];
  }

  const Topology* topo_;
  int32_t k_ = 0;
  bool uniform_ = true;
  std::vector<GpuMask> node_free_;          // visible free GPUs
  std::vector<GpuMask> node_all_;           // all of a node's GPUs
  std::vector<std::vector<int64_t>> free_;  // [tier][group]
  std::vector<bool> member_;
  std::vector<bool> usable_;
  std::vector<GpuMask> hidden_;                 // free but unusable
  std::vector<std::vector<int64_t>> whole_;     // [tier][group]
  std::vector<std::vector<int32_t>> hist_;      // [tier][group*(k+1)+k]
  std::vector<std::vector<int64_t>> max_free_;  // [tier][group*(tier+2)+level]
  std::vector<std::vector<int64_t>> max_whole_;
  std::vector<std::vector<int32_t>> dirty_;  // [tier] groups to recompute
  std::vector<std::vector<bool>> is_dirty_;
  int64_t dirty_count_ = 0;
};

}  // namespace unipool::sched
