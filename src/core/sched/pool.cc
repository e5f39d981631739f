#include "core/sched/pool.h"

#include <algorithm>
#include <cassert>

namespace unipool::sched {

Pool::Pool(const Topology& topo, const std::vector<bool>& member) : topo_(&topo) {
  const int32_t nodes = topo.num_nodes();
  node_all_.resize(nodes);
  for (int32_t n = 0; n < nodes; ++n) {
    const int32_t g = static_cast<int32_t>(topo.node_gpus(NodeId(n)).value());
    if (n > 0 && g != k_) uniform_ = false;
    k_ = std::max(k_, g);
    node_all_[n] = AllGpus(g);
  }
  member_ = member.empty() ? std::vector<bool>(nodes, true) : member;
  usable_.assign(nodes, false);
  node_free_.assign(nodes, 0);
  hidden_ = node_all_;  // every node starts unusable, its GPUs hidden
  const int tiers = topo.num_tiers();
  free_.resize(tiers);
  whole_.resize(tiers);
  hist_.resize(tiers);
  max_free_.resize(tiers);
  max_whole_.resize(tiers);
  dirty_.resize(tiers);
  is_dirty_.resize(tiers);
  for (int t = 0; t < tiers; ++t) {
    const size_t groups = topo.num_groups(t);
    free_[t].assign(groups, 0);
    whole_[t].assign(groups, 0);
    hist_[t].assign(groups * (k_ + 1), 0);
    max_free_[t].assign(groups * (t + 2), 0);
    max_whole_[t].assign(groups * (t + 2), 0);
    is_dirty_[t].assign(groups, false);
  }
  // Members in state up become usable; then every aggregate is computed once.
  for (int32_t n = 0; n < nodes; ++n) {
    if (member_[n] && topo.node_state(NodeId(n)) == NodeState::kUp) SetUsable(NodeId(n), true);
  }
  for (int t = 0; t < tiers; ++t) {
    for (int32_t g = 0; g < topo.num_groups(t); ++g) MarkDirty(t, g);
  }
  Flush();
}

bool Pool::whole(NodeId n) const {
  return usable_[n.value()] && node_free_[n.value()] == node_all_[n.value()];
}

int64_t Pool::TasksIn(int tier, GroupId g, int32_t task_gpus, int32_t per_node) const {
  const int32_t* h = &hist_[tier][static_cast<size_t>(g.value()) * (k_ + 1)];
  int64_t tasks = 0;
  for (int k = task_gpus; k <= k_; ++k) {
    const int64_t here = k / task_gpus;
    tasks += int64_t{h[k]} * (per_node > 0 ? std::min<int64_t>(here, per_node) : here);
  }
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

void Pool::MarkDirty(int tier, int32_t g) {
  if (is_dirty_[tier][g]) return;
  is_dirty_[tier][g] = true;
  dirty_[tier].push_back(g);
  ++dirty_count_;
}

void Pool::SetFree(NodeId n, GpuMask mask) {
  const int32_t i = n.value();
  const GpuMask before = node_free_[i];
  if (before == mask) return;
  // A usable node is counted in the histogram under its free GPUs.
  const bool counted = usable_[i];
  const int old_k = CountGpus(before), new_k = CountGpus(mask);
  const int whole_delta = (mask == node_all_[i] && counted) - (before == node_all_[i] && counted);
  node_free_[i] = mask;
  for (int t = 0; t < topo_->num_tiers(); ++t) {
    const int32_t g = topo_->group_of(n, t).value();
    free_[t][g] += new_k - old_k;
    whole_[t][g] += whole_delta;
    if (counted) {
      int32_t* h = &hist_[t][static_cast<size_t>(g) * (k_ + 1)];
      h[old_k]--;
      h[new_k]++;
    }
    MarkDirty(t, g);
  }
}

void Pool::Take(NodeId n, GpuMask mask) {
  assert(usable_[n.value()] && (node_free_[n.value()] & mask) == mask);
  SetFree(n, node_free_[n.value()] & ~mask);
}

void Pool::Release(NodeId n, GpuMask mask) {
  assert(member_[n.value()]);
  if (!usable_[n.value()]) {
    hidden_[n.value()] |= mask;
    return;
  }
  assert((node_free_[n.value()] & mask) == 0);
  SetFree(n, node_free_[n.value()] | mask);
}

void Pool::TakeAll(const std::vector<Task>& tasks) { SetFreeAll(tasks, true); }

void Pool::ReleaseAll(const std::vector<Task>& tasks) { SetFreeAll(tasks, false); }

void Pool::SetFreeAll(const std::vector<Task>& tasks, bool take) {
  // Per tier: the group being summed and its pending changes.
  struct Pending {
    int32_t group = -1;
    int64_t free = 0;
    int64_t whole = 0;
    std::vector<int32_t> hist;
  };
  const int tiers = topo_->num_tiers();
  std::vector<Pending> pending(tiers);
  for (Pending& p : pending) p.hist.assign(k_ + 1, 0);
  auto flush = [&](int t) {
    Pending& p = pending[t];
    if (p.group < 0) return;
    free_[t][p.group] += p.free;
    whole_[t][p.group] += p.whole;
    int32_t* h = &hist_[t][static_cast<size_t>(p.group) * (k_ + 1)];
    for (int k = 0; k <= k_; ++k) {
      h[k] += p.hist[k];
      p.hist[k] = 0;
    }
    MarkDirty(t, p.group);
    p.free = p.whole = 0;
  };
  for (const Task& task : tasks) {
    const int32_t i = task.node.value();
    if (!take && !usable_[i]) {  // released onto a node that is out: hide
      assert(member_[i]);
      hidden_[i] |= task.gpus;
      continue;
    }
    assert(usable_[i]);
    const GpuMask before = node_free_[i];
    const GpuMask after = take ? before & ~task.gpus : before | task.gpus;
    assert(take ? (before & task.gpus) == task.gpus : (before & task.gpus) == 0);
    node_free_[i] = after;
    const int old_k = CountGpus(before), new_k = CountGpus(after);
    const int whole_delta = (after == node_all_[i]) - (before == node_all_[i]);
    for (int t = 0; t < tiers; ++t) {
      const int32_t g = topo_->group_of(task.node, t).value();
      Pending& p = pending[t];
      if (p.group != g) {
        flush(t);
        p.group = g;
      }
      p.free += new_k - old_k;
      p.whole += whole_delta;
      p.hist[old_k]--;
      p.hist[new_k]++;
    }
  }
  for (int t = 0; t < tiers; ++t) flush(t);
}

void Pool::SetUsable(NodeId n, bool usable) {
  const int32_t i = n.value();
  if (!member_[i] || usable_[i] == usable) return;
  // Hide the free GPUs of a node going out; leave the histogram (counted at
  // 0 free), flip, and come back with the hidden GPUs of a node coming in.
  if (!usable) hidden_[i] = node_free_[i];
  SetFree(n, 0);
  if (usable_[i]) {
    for (int t = 0; t < topo_->num_tiers(); ++t) {
      hist_[t][static_cast<size_t>(topo_->group_of(n, t).value()) * (k_ + 1)]--;
    }
  }
  usable_[i] = usable;
  if (usable) {
    for (int t = 0; t < topo_->num_tiers(); ++t) {
      hist_[t][static_cast<size_t>(topo_->group_of(n, t).value()) * (k_ + 1)]++;
    }
    const GpuMask back = hidden_[i];
    hidden_[i] = 0;
    SetFree(n, back);
  }
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
