#include "core/sched/placer.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <numeric>

namespace unipool::sched {
namespace {

// A node (level 0) or a group (level tier+1).
struct Ref {
  int level = 0;
  int32_t id = 0;
  int tier() const { return level - 1; }
};

class Search {
 public:
  Search(const Pool& pool, const PlaceRequest& req) : pool_(pool), req_(req) {
    topo_ = &pool.topology();
  }

  // Exact tasks the ref can host now (0 when excluded).
  int64_t Tasks(Ref r) const {
    if (Excluded(r)) return 0;
    if (r.level == 0) return pool_.TasksOn(NodeId(r.id), req_.task_gpus, req_.max_tasks_per_node);
    return pool_.TasksIn(r.tier(), GroupId(r.id), req_.task_gpus, req_.max_tasks_per_node) -
           ExcludedTasksIn(r);
  }

  // An upper bound on the tasks one level-`level` group inside r can host.
  int64_t Bound(Ref r, int level) const {
    if (r.level == level) return Tasks(r);
    if (Excluded(r)) return 0;
    const GroupId g(r.id);
    if (pool_.uniform_nodes() && req_.task_gpus == pool_.max_node_gpus()) {
      return pool_.MaxWhole(r.tier(), g, level);
    }
    // (With a cap per node this stays an upper bound; Descend checks.)
    const int64_t bound = pool_.MaxFree(r.tier(), g, level) / req_.task_gpus;
    const int32_t cap = req_.max_tasks_per_node;
    return level == 0 && cap > 0 ? std::min<int64_t>(bound, cap) : bound;
  }

  std::vector<Ref> Children(Ref r) const {
    const int32_t first = topo_->group_first_child(r.tier(), GroupId(r.id));
    const int32_t count = topo_->group_num_children(r.tier(), GroupId(r.id));
    std::vector<Ref> out(count);
    for (int32_t i = 0; i < count; ++i) out[i] = Ref{r.level - 1, first + i};
    return out;
  }

  // Goes from the root down to a level-`level` ref that holds the gang,
  // best-fit at each step; nullopt when the bounds were too hopeful.
  // Where the search starts: the root, or the `within` group.
  Ref Start() const {
    if (!req_.within) return Ref{pool_.top_level(), 0};
    return Ref{req_.within->first + 1, req_.within->second.value()};
  }

  std::optional<Ref> Descend(int level) const {
    Ref cur = Start();
    while (cur.level > level) {
      std::optional<Ref> best;
      int64_t best_key = 0;
      for (Ref c : Children(cur)) {
        if (Bound(c, level) < req_.tasks) continue;
        const int64_t key = FitKey(c, level);
        if (!best || key < best_key) best = c, best_key = key;
      }
      if (!best) return std::nullopt;
      cur = *best;
    }
    return cur;
  }

  // Smaller is a better fit. For one-node gangs: the fewest free GPUs of a
  // fitting node below, then the fewest free GPUs in the child; otherwise
  // the child's own capacity (pack the fullest).
  int64_t FitKey(Ref c, int level) const {
    if (level > 0 || c.level == 0) {
      // A group the gang fills with the fewest children first (two whole
      // leaves beat three partial ones), then the fullest.
      if (c.level == level && level >= 2) return ChildrenToCover(c) * (int64_t{1} << 40) + Tasks(c);
      return Tasks(c);
    }
    const int64_t k = SmallestFittingNode(c);
    return k * (int64_t{1} << 40) + pool_.Free(c.tier(), GroupId(c.id));
  }

  // How many of r's children the gang needs, fullest first (as Fill takes
  // them); more than r has when it cannot hold the gang.
  int64_t ChildrenToCover(Ref r) const {
    std::vector<int64_t> cap;
    for (Ref k : Children(r)) cap.push_back(Tasks(k));
    std::sort(cap.begin(), cap.end(), std::greater<>());
    int64_t left = req_.tasks, used = 0;
    for (int64_t c : cap) {
      if (left <= 0) break;
      left -= c;
      ++used;
    }
    return left > 0 ? static_cast<int64_t>(cap.size()) + 1 : used;
  }

  int64_t SmallestFittingNode(Ref c) const {
    const int32_t need = static_cast<int32_t>(req_.tasks) * req_.task_gpus;
    for (int k = need; k <= pool_.max_node_gpus(); ++k) {
      if (pool_.Hist(c.tier(), GroupId(c.id), k) > 0) return k;
    }
    return pool_.max_node_gpus() + 1;
  }

  // Covers `tasks` inside r with the fewest, fullest children.
  void Fill(Ref r, int64_t tasks, std::vector<Task>& out) const {
    if (r.level == 0) {
      out.push_back(Task{NodeId(r.id), LowestFree(NodeId(r.id), tasks * req_.task_gpus)});
      return;
    }
    std::vector<Ref> kids = Children(r);
    std::vector<int64_t> cap(kids.size());
    for (size_t i = 0; i < kids.size(); ++i) cap[i] = Tasks(kids[i]);
    // One child suffices: the best fit.
    std::optional<size_t> one;
    for (size_t i = 0; i < kids.size(); ++i) {
      if (cap[i] >= tasks && (!one || cap[i] < cap[*one])) one = i;
    }
    if (one) return Fill(kids[*one], tasks, out);
    // Otherwise the fullest children first; the last one best-fit.
    std::vector<size_t> order(kids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cap[a] > cap[b]; });
    int64_t left = tasks;
    size_t used = 0;
    while (left > cap[order[used]]) left -= cap[order[used++]];
    size_t last = order[used];
    for (size_t j = used + 1; j < order.size(); ++j) {
      if (cap[order[j]] >= left && cap[order[j]] < cap[last]) last = order[j];
    }
    std::vector<size_t> chosen(order.begin(), order.begin() + used);
    chosen.push_back(last);
    std::sort(chosen.begin(), chosen.end());  // depth-first = rank order
    for (size_t i : chosen) Fill(kids[i], i == last ? left : cap[i], out);
  }

  GpuMask LowestFree(NodeId n, int64_t gpus) const {
    GpuMask free = pool_.free_mask(n), out = 0;
    for (int64_t i = 0; i < gpus; ++i) {
      const GpuMask bit = free & (~free + 1);
      out |= bit;
      free &= ~bit;
    }
    return out;
  }

 private:
  // True when r lies inside the excluded group (or is it).
  bool Excluded(Ref r) const {
    if (!req_.exclude || r.tier() > req_.exclude->first) return false;
    const NodeId n = r.level == 0 ? NodeId(r.id) : topo_->group_first_node(r.tier(), GroupId(r.id));
    return topo_->group_of(n, req_.exclude->first) == req_.exclude->second;
  }

  // Tasks of the excluded group that lie inside r (a group above it).
  int64_t ExcludedTasksIn(Ref r) const {
    if (!req_.exclude || r.tier() <= req_.exclude->first) return 0;
    const auto [tier, group] = *req_.exclude;
    const NodeId first = topo_->group_first_node(tier, group);
    if (topo_->group_of(first, r.tier()) != GroupId(r.id)) return 0;
    return pool_.TasksIn(tier, group, req_.task_gpus, req_.max_tasks_per_node);
  }

  const Pool& pool_;
  const PlaceRequest& req_;
  const Topology* topo_;
};

}  // namespace

int64_t LargestBlock(const Pool& pool, int level, int32_t task_gpus) {
  const int top = pool.topology().top_tier();
  if (level > top) return pool.TasksIn(top, GroupId(0), task_gpus) * task_gpus;
  if (pool.uniform_nodes() && task_gpus == pool.max_node_gpus()) {
    return pool.MaxWhole(top, GroupId(0), level) * task_gpus;
  }
  return pool.MaxFree(top, GroupId(0), level) / task_gpus * task_gpus;
}

int TopologyPlacer::LowestLevel(const Pool& pool, const PlaceRequest& req) const {
  Search s(pool, req);
  const Ref start = s.Start();
  if (req.task_gpus > pool.max_node_gpus() || s.Tasks(start) < req.tasks) return -1;
  for (int level = 0; level <= start.level; ++level) {
    if (s.Bound(start, level) >= req.tasks) return level;
  }
  return -1;
}

PlaceOutcome TopologyPlacer::Place(const Pool& pool, const PlaceRequest& req) const {
  assert(pool.flushed() && req.tasks >= 1 && req.task_gpus >= 1);
  Search s(pool, req);
  const Ref start = s.Start();
  NoRoom none{s.Tasks(start), -1};
  if (req.task_gpus > pool.max_node_gpus() || none.free_tasks < req.tasks) return none;
  const int top = std::min(req.max_level, start.level);
  for (int level = 0; level <= start.level; ++level) {
    if (s.Bound(start, level) < req.tasks) continue;
    if (none.level < 0) none.level = level;
    if (level > top) break;
    if (std::optional<Ref> at = s.Descend(level)) {
      Placed placed;
      s.Fill(*at, req.tasks, placed.placement.tasks);
      std::sort(placed.placement.tasks.begin(), placed.placement.tasks.end(),
                [](const Task& a, const Task& b) { return a.node < b.node; });
      ScorePlacement(pool.topology(), placed.placement);
      return placed;
    }
  }
  return none;
}

PlaceOutcome FirstFitPlacer::Place(const Pool& pool, const PlaceRequest& req) const {
  const Topology& topo = pool.topology();
  Placed placed;
  int64_t left = req.tasks;
  int32_t first = 0, end = topo.num_nodes();
  if (req.within) {  // only the nodes of that group
    const auto [tier, group] = *req.within;
    first = topo.group_first_node(tier, group).value();
    end = first + topo.group_num_nodes(tier, group);
  }
  for (int32_t n = first; n < end && left > 0; ++n) {
    const NodeId id(n);
    const int64_t here =
        std::min<int64_t>(left, pool.TasksOn(id, req.task_gpus, req.max_tasks_per_node));
    if (here == 0) continue;
    if (req.exclude && topo.group_of(id, req.exclude->first) == req.exclude->second) continue;
    GpuMask free = pool.free_mask(id), mask = 0;
    for (int64_t i = 0; i < here * req.task_gpus; ++i) {
      const GpuMask bit = free & (~free + 1);
      mask |= bit;
      free &= ~bit;
    }
    placed.placement.tasks.push_back(Task{id, mask});
    left -= here;
  }
  if (left > 0) return NoRoom{req.tasks - left, -1};
  ScorePlacement(topo, placed.placement);
  if (placed.placement.score.span_tier + 1 > req.max_level) return NoRoom{req.tasks, -1};
  return placed;
}

}  // namespace unipool::sched
