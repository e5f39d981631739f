#include "core/sched/pool.h"

#include <algorithm>
#include <cassert>

namespace unipool::sched {

Pool::Pool(const Topology& topo, const std::vector<bool>& member)
    : topo_(&topo), free_(topo) {
  const int32_t nodes = topo.num_nodes();
  for (int32_t n = 0; n < nodes; ++n) {
    const int32_t g = static_cast<int32_t>(topo.node_gpus(NodeId(n)).value());
    if (n > 0 && g != k_) uniform_ = false;
    k_ = std::max(k_, g);
  }
  member_ = member.empty() ? std::vector<bool>(nodes, true) : member;
  usable_.assign(nodes, false);
  hidden_.assign(nodes, 0);
  const int tiers = topo.num_tiers();
  whole_.resize(tiers);
  hist_.resize(tiers);
  max_free_.resize(tiers);
  max_whole_.resize(tiers);
  dirty_.resize(tiers);
  is_dirty_.resize(tiers);
  for (int t = 0; t < tiers; ++t) {
    const size_t groups = topo.num_groups(t);
    whole_[t].assign(groups, 0);
    hist_[t].assign(groups * (k_ + 1), 0);
    max_free_[t].assign(groups * (t + 2), 0);
    max_whole_[t].assign(groups * (t + 2), 0);
    is_dirty_[t].assign(groups, false);
  }
  // Every node starts hidden (unusable); members in state up become usable.
  for (int32_t n = 0; n < nodes; ++n) {
    const NodeId id(n);
    hidden_[n] = free_.free_mask(id);
    free_.Take(id, hidden_[n]);
    Count(id, +1);
    if (member_[n] && topo.node_state(id) == NodeState::kUp) SetUsable(id, true);
  }
  for (int t = 0; t < tiers; ++t) {  // compute every aggregate once
    for (int32_t g = 0; g < topo.num_groups(t); ++g) {
      if (!is_dirty_[t][g]) {
        is_dirty_[t][g] = true;
        dirty_[t].push_back(g);
        ++dirty_count_;
      }
    }
  }
  Flush();
}

bool Pool::whole(NodeId n) const {
  return usable_[n.value()] &&
         free_.free_mask(n) == AllGpus(static_cast<int32_t>(topo_->node_gpus(n).value()));
}

int64_t Pool::TasksIn(int tier, GroupId g, int32_t task_gpus) const {
  const int32_t* h = &hist_[tier][static_cast<size_t>(g.value()) * (k_ + 1)];
  int64_t tasks = 0;
  for (int k = task_gpus; k <= k_; ++k) tasks += int64_t{h[k]} * (k / task_gpus);
  return tasks;
}

int64_t Pool::MaxFree(int tier, GroupId g, int level) const {
  assert(flushed());
  return max_free_[tier][static_cast<size_t>(g.value()) * (tier + 2) + level];
}

int64_t Pool::MaxWhole(int tier, GroupId g, int level) const {
  assert(flushed());
  return max_whole_[tier][static_cast<size_t>(g.value()) * (tier + 2) + level];
}

void Pool::Count(NodeId n, int sign) {
  if (!usable_[n.value()]) return;
  const int k = free(n);
  const bool w = whole(n);
  for (int t = 0; t < topo_->num_tiers(); ++t) {
    const int32_t g = topo_->group_of(n, t).value();
    hist_[t][static_cast<size_t>(g) * (k_ + 1) + k] += sign;
    if (w) whole_[t][g] += sign;
  }
}

void Pool::MarkDirty(NodeId n) {
  for (int t = 0; t < topo_->num_tiers(); ++t) {
    const int32_t g = topo_->group_of(n, t).value();
    if (is_dirty_[t][g]) break;  // its ancestors are already marked
    is_dirty_[t][g] = true;
    dirty_[t].push_back(g);
    ++dirty_count_;
  }
}

void Pool::Take(NodeId n, GpuMask mask) {
  assert(usable_[n.value()]);
  Count(n, -1);
  free_.Take(n, mask);
  Count(n, +1);
  MarkDirty(n);
}

void Pool::Release(NodeId n, GpuMask mask) {
  assert(member_[n.value()]);
  if (!usable_[n.value()]) {
    hidden_[n.value()] |= mask;
    return;
  }
  Count(n, -1);
  free_.Give(n, mask);
  Count(n, +1);
  MarkDirty(n);
}

void Pool::SetUsable(NodeId n, bool usable) {
  const int32_t i = n.value();
  if (!member_[i] || usable_[i] == usable) return;
  Count(n, -1);
  if (usable) {
    usable_[i] = true;
    free_.Give(n, hidden_[i]);
    hidden_[i] = 0;
  } else {
    hidden_[i] = free_.free_mask(n);
    free_.Take(n, hidden_[i]);
    usable_[i] = false;
  }
  Count(n, +1);
  MarkDirty(n);
}

void Pool::Recompute(int tier, int32_t g) {
  const GroupId id(g);
  const int32_t first = topo_->group_first_child(tier, id);
  const int32_t count = topo_->group_num_children(tier, id);
  for (int level = 0; level <= tier; ++level) {
    int64_t best_free = 0, best_whole = 0;
    for (int32_t c = first; c < first + count; ++c) {
      if (tier == 0) {  // children are nodes; level is 0
        best_free = std::max<int64_t>(best_free, free(NodeId(c)));
        best_whole = std::max<int64_t>(best_whole, whole(NodeId(c)) ? 1 : 0);
      } else if (level == tier) {  // the children's own values
        best_free = std::max(best_free, Free(tier - 1, GroupId(c)));
        best_whole = std::max(best_whole, Whole(tier - 1, GroupId(c)));
      } else {
        best_free = std::max(best_free, Agg(max_free_, tier - 1, c, level));
        best_whole = std::max(best_whole, Agg(max_whole_, tier - 1, c, level));
      }
    }
    Agg(max_free_, tier, g, level) = best_free;
    Agg(max_whole_, tier, g, level) = best_whole;
  }
  Agg(max_free_, tier, g, tier + 1) = Free(tier, id);
  Agg(max_whole_, tier, g, tier + 1) = Whole(tier, id);
}

void Pool::Flush() {
  for (int t = 0; t < topo_->num_tiers(); ++t) {
    for (int32_t g : dirty_[t]) {
      Recompute(t, g);
      is_dirty_[t][g] = false;
    }
    dirty_count_ -= static_cast<int64_t>(dirty_[t].size());
    dirty_[t].clear();
  }
}

}  // namespace unipool::sched
