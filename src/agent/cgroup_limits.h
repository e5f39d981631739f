// cgroup v2 limits for a run: which controllers (cpu, memory, pids) this
// agent can give its runs' cgroups, and what it writes in them.
//
// The runs' cgroups live under `base` (containment.h), itself under
// `parent` (the agent's own cgroup, or the directory given by --cgroup). A
// controller is usable in a run's cgroup when it is enabled in
// parent/cgroup.subtree_control and base/cgroup.subtree_control. cgroup v2
// lets a cgroup enable controllers for its children only while it holds no
// process itself, so an agent that was started in `parent` (a systemd unit
// with Delegate=yes, a container) first moves itself into a leaf of its own
// beside `base` (`move_self_to`), as systemd's delegation rules ask.
//
// Where a controller is not there (the hierarchy binds it to cgroup v1, as
// on hybrid hosts; or nobody delegated it) the limits it would enforce are
// not enforced, and `why_not` says so for the agent's start-up warning.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "io/job_spec.h"

namespace unipool::agent {

inline constexpr int64_t kCpuPeriodUs = 100000;  // cpu.max's period: 100 ms

struct Delegation {
  std::set<std::string> enabled;  // of cpu, memory, pids: usable in the runs' cgroups
  std::string why_not;            // "" when all three are; else what is missing and why
};

// Enables cpu, memory and pids for the cgroups under `base`, moving this
// process into `move_self_to` first when that is what stands in the way
// ("" never moves it). REQUIRES: base is a child of parent.
Delegation DelegateControllers(const std::string& parent, const std::string& base,
                               const std::string& move_self_to);

// The files of a run's cgroup and their values for `tasks` tasks of
// `per_task` each: cpu.max "QUOTA PERIOD", memory.max and memory.swap.max
// (0: the memory limit is not escaped through swap, as in Kubernetes),
// pids.max. Only the limits that are set (non-zero) appear.
std::vector<std::pair<std::string, std::string>> LimitFiles(const io::TaskLimits& per_task,
                                                            int64_t tasks);

// Which controller enforces a limit file ("memory" for memory.swap.max).
std::string ControllerOf(const std::string& file);

// The number of processes the kernel's OOM killer killed in the cgroup
// `dir` (memory.events oom_kill); 0 when it cannot tell.
int64_t OomKills(const std::string& dir);

}  // namespace unipool::agent
