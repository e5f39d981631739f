// The agent's private pieces shared by its files (agent.cc, agent_launch.cc):
// one run of a job on this node.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent.h"

namespace unipool::agent {

// One process's report file ($UNIPOOL_REPORT_FILE), how far it was read,
// and its per-rank signals since they were last sent (sums over `steps`).
struct ReportFile {
  std::string path;
  int64_t offset = 0;
  int32_t rank = 0;
  pid_t pid = 0;      // its process (the root of the rank's process tree); 0 before the start
  int64_t step = -1;  // the last step it reported signals for
  int32_t steps = 0;
  double step_s = 0, data_s = 0, comm_s = 0;
};

// One job run on this node.
struct Agent::LocalRun {
  int64_t generation = 0;
  // Elastic continue: the membership its processes were last told, and
  // each process's rendezvous file (launch order).
  int64_t membership = 0;
  std::vector<std::string> rendezvous;
  bool preempted = false;    // stopping because the server asked (report "stopped")
  bool gang_failed = false;  // a process failed: the agent killed the rest (report "failed")
  bool rank0 = false;        // this node runs global rank 0
  int grace_s = 30;
  std::string dir;
  Workplace place;  // who its processes are, where they work
  ProcessGroup run;
  std::vector<ReportFile> reports;
  std::string report0;  // global rank 0's report file
  Json progress;        // the progress not yet sent
  int64_t signals_sent_ms = 0;
  Json last_progress;  // the last progress rank 0 reported (sent with the final report)
  int64_t progress_sent_ms = 0;
  // The first report of a non-finite loss went at once (not at the next
  // second): the server names the step it first happened.
  bool nonfinite_sent = false;
  int64_t last_checkpoint_step = -1;
  // Files modified since then belong to the next checkpoint (CheckpointBytes).
  std::filesystem::file_time_type checkpoint_since = std::filesystem::file_time_type::clock::now();
  std::vector<pid_t> pgids;     // registered with the fence
  int64_t fences_at_start = 0;  // FenceCount() when it started
  // Hung runs (spec.progressTimeout, watched where rank 0 runs).
  int64_t progress_timeout_ms = 0;  // 0: off
  int64_t last_step = -1;           // the highest step rank 0 reported
  int64_t advanced_ms = 0;          // when it last went up
  std::string hung_why;             // set: the agent killed it as hung
  int64_t oom_kills = 0;            // processes the kernel killed at that limit
};

// Each task's limits (spec.limits) and how many of the job's tasks run on
// `node`: a task is a gpusPerTask task, else the node's whole share.
io::TaskLimits LimitsOf(const Json& spec);
int64_t TasksOn(const Json& assignment, const std::string& node);

// Writes a rendezvous file in place, in one write (a reader that cannot
// parse it reads again); never through a link.
Status WriteRendezvous(const std::string& path, const Json& rendezvous);

}  // namespace unipool::agent
