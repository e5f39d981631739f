// Placer: decides *where* a gang goes, given a Pool of free capacity. Two
// implementations: TopologyPlacer (the scheduler's) and FirstFitPlacer (a
// topology-unaware baseline that benchmarks compare against).
//
// A placer only reads the pool; the caller commits a placement by taking its
// GPUs. Deterministic: ties are broken by the lowest id.
#pragma once

#include <optional>
#include <variant>

#include "core/sched/placement.h"
#include "core/sched/pool.h"

namespace unipool::sched {

struct PlaceRequest {
  int64_t tasks = 1;               // tasks of task_gpus GPUs; a node may host several
  int32_t task_gpus = 8;           // GPUs per task, at most a node's GPUs
  int32_t max_tasks_per_node = 0;  // 0: as many as fit; 1: every task on its own node
  // Highest level the gang may span (level = tier + 1; 0 = one node).
  // Default: anywhere in the pool.
  int max_level = 1 << 20;
  // A group kept free for a reservation: nothing is placed in it.
  std::optional<std::pair<int, GroupId>> exclude;  // (tier, group)
  // Place only inside this group (tier, group); default: the whole pool.
  std::optional<std::pair<int, GroupId>> within;
};

struct Placed {
  Placement placement;
};

// No room now. `level` is the lowest level at which enough GPUs exist in one
// group, or -1 when the pool as a whole lacks them.
struct NoRoom {
  int64_t free_tasks = 0;  // tasks the whole pool could host now
  int level = -1;
};

using PlaceOutcome = std::variant<Placed, NoRoom>;

class Placer {
 public:
  virtual ~Placer() = default;
  // REQUIRES: pool.flushed(); req.tasks >= 1; 1 <= req.task_gpus.
  virtual PlaceOutcome Place(const Pool& pool, const PlaceRequest& req) const = 0;
};

// Fills scale-up domains whole, then the fewest leaves, then the fewest
// spines: finds the lowest level whose single group can hold the gang, goes
// down to the best-fitting group there (least free capacity that still fits,
// at every tier on the way), and covers the gang with the fewest, fullest
// children. Single-node gangs go to the node with the fewest free GPUs that
// fit. Cost O(levels x fan-out) plus the size of the gang.
class TopologyPlacer final : public Placer {
 public:
  PlaceOutcome Place(const Pool& pool, const PlaceRequest& req) const override;
  // The lowest level at which one group might hold the gang (from the
  // aggregates, without searching), or -1 when the pool lacks the GPUs.
  int LowestLevel(const Pool& pool, const PlaceRequest& req) const;
};

// Baseline: takes nodes in id order (inside `within` when given), as many
// tasks per node as fit.
class FirstFitPlacer final : public Placer {
 public:
  PlaceOutcome Place(const Pool& pool, const PlaceRequest& req) const override;
};

// The most GPUs for tasks of `task_gpus` that one group at `level` offers.
int64_t LargestBlock(const Pool& pool, int level, int32_t task_gpus);

}  // namespace unipool::sched
