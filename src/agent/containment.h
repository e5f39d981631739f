// Containment: finds every process a run started, however deep, and kills
// them all.
//
// Two mechanisms, used together:
//   - A cgroup v2 directory per run, under a directory of this agent's own
//     (`<the agent's cgroup>/unipool-<tag>/job-J-run-G`), where the agent may
//     create one (root, or a delegated subtree). Each process joins its run's
//     cgroup before exec, so everything it forks is inside; `cgroup.kill`
//     kills the whole tree atomically, even a process that is forking.
//   - A tag in every process's environment, UNIPOOL_FENCE=<tag>/J/G, which
//     children inherit. A scan of /proc finds processes that left their
//     process group and session (setsid, daemons) where there is no cgroup.
//     A process that clears its environment and leaves its session escapes
//     this mode; the cgroup mode has no such gap.
//
// Limits: a run's cgroup also enforces its tasks' CPU, memory and pids
// limits (cgroup_limits.h) where this agent could delegate the controllers;
// limits_note() says what is not enforced, for the start-up warning.
//
// The tag is derived from the node's name and the agent's work directory, so
// an agent restarted with the same name and directory finds what its
// predecessor left (and two agents on one machine never touch each other's
// processes).
//
// Thread safety: every method may be called from any thread; the watchdog
// process uses the free functions with the same arguments.
#pragma once

#include <cstdint>
#include <string>

#include "agent/cgroup_limits.h"
#include "io/job_spec.h"

namespace unipool::agent {

class Containment {
 public:
  // Picks the mode. `cgroup` is "auto" (a cgroup v2 directory when one can
  // be created, else tags only), "off" (tags only) or a cgroup v2 directory
  // to create runs under.
  Containment(const std::string& work_dir, const std::string& node, const std::string& cgroup);

  // "cgroup v2 (<dir>)" or "process tags (<why no cgroup>)".
  const std::string& mode() const { return mode_; }
  const std::string& cgroup_base() const { return base_; }  // "" in tags-only mode
  const std::string& tag() const { return tag_; }
  // The controllers the runs' cgroups have (of cpu, memory, pids), and ""
  // or what limits are not enforced and why.
  const std::set<std::string>& controllers() const { return delegation_.enabled; }
  std::string limits_note() const;

  // The value of UNIPOOL_FENCE for a run's processes.
  std::string RunTag(int64_t job, int64_t generation) const;
  // Creates the run's cgroup with the limits of `tasks` tasks of `limits`
  // each; returns the path of its cgroup.procs for a process to join before
  // exec ("" in tags-only mode or when it cannot). `not_enforced` (may be
  // null) is set to what of the limits is not enforced and why, else "".
  std::string PrepareRun(int64_t job, int64_t generation, const io::TaskLimits& limits = {},
                         int64_t tasks = 1, std::string* not_enforced = nullptr) const;
  // How many of the run's processes the kernel's OOM killer killed (its
  // memory limit); call before KillRun, which removes the cgroup.
  int64_t OomKills(int64_t job, int64_t generation) const;
  // Kills every process of the run (cgroup and tag) and removes its cgroup.
  // Returns how many processes the tag scan had to kill (the cgroup's are
  // not counted).
  int KillRun(int64_t job, int64_t generation) const;
  // Kills every process of every run of this agent (fencing, the agent's
  // death, what a previous agent left). Returns as KillRun.
  int KillAll() const;

 private:
  std::string RunDir(int64_t job, int64_t generation) const;

  std::string mode_, base_, tag_;
  Delegation delegation_;
};

// Kills (SIGKILL) every process whose environment has UNIPOOL_FENCE starting
// with `prefix`, except this process; returns how many were signalled.
int KillTagged(const std::string& prefix);
// Writes 1 to cgroup.kill of `dir` and of every cgroup below it; with
// `remove`, then removes the emptied directories (deepest first).
void KillCgroupTree(const std::string& dir, bool remove);

}  // namespace unipool::agent
