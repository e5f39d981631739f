// Internal to the scheduler (scheduler*.cc), not a public API: the state of
// one cycle and the result of one placement search, which the cycle, the
// preemption and the reservation code share.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "core/sched/scheduler.h"

namespace unipool::sched {

// State of one Schedule() call.
struct Scheduler::CycleState {
  Time now;
  int64_t attempts = 0;
  int64_t examined = 0;             // pending jobs looked at by PlaceInOrder
  bool any_blocked = false;         // some job could not get GPUs
  bool reservation_active = false;  // jobs from here on respect it
  int preemption_attempts = 0;
  std::set<JobId> held_back;  // stopped victims of a preemptor still waiting
  // Placement failures already seen this cycle: (task_gpus, per node, max_level,
  // partition, span, excluded) -> the fewest tasks that failed. Free space
  // only shrinks within a cycle, so a larger request fails as well.
  std::map<std::tuple<int32_t, int32_t, int, int32_t, bool, bool>,
           std::pair<int64_t, PendingReason>>
      failed;
};

struct Scheduler::Attempt {
  std::optional<Placement> placement;
  int32_t partition = -1;
  PendingReason reason = reason::New{};
};

// A running job a preemptor may stop, and what stopping it costs.
struct Scheduler::Victim {
  int64_t cost;  // GPU-seconds lost (LostGpuSeconds)
  JobId id;
  const JobInfo* job;
};

// The cheapest victims inside one group that make room there: victims
// indices into VictimSets::candidates, at chosen[first, first + victims).
struct Scheduler::VictimSet {
  int64_t cost;
  size_t victims;
  int tier;
  int32_t group;
  size_t first;
};

struct Scheduler::VictimSets {
  std::vector<Victim> candidates;  // cheapest first
  std::vector<size_t> chosen;
  std::vector<VictimSet> options;  // cheapest first
};

}  // namespace unipool::sched
