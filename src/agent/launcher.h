// Launcher: runs one job run's processes on this node, the way PyTorch
// distributed training expects them, and watches them.
//
// Each process gets its own process group (so a stop reaches everything it
// started), joins its run's cgroup when it has one (containment.h), becomes
// the job's user (identity.h) with exactly the environment given, dies with
// the agent (PR_SET_PDEATHSIG; what it started is the watchdog's), and
// writes stdout and stderr to a per-rank log (log_file.h: capped, rotated),
// each line prefixed with an RFC 3339 timestamp.
//
// Thread safety: a Launcher is used by one thread (the agent's loop); log
// copying runs on threads of its own.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/identity.h"
#include "agent/log_file.h"
#include "core/base/status.h"

namespace unipool::agent {

// One process to start.
struct ProcessSpec {
  std::vector<std::string> argv;                         // argv[0] looked up in PATH
  std::vector<std::pair<std::string, std::string>> env;  // the whole environment (in order)
  std::string working_dir;                               // "" = the agent's
  std::string log_path;
  int rank = 0;              // the lowest global rank it runs (its log's name)
  std::string cgroup_procs;  // a cgroup.procs to join before exec; "" = none
  LogLimits log_limits;
  // Who it runs as: with as.switch_user, the process takes as's groups, gid
  // and uid (and PR_SET_NO_NEW_PRIVS unless root) after joining the cgroup.
  Identity as;
  // Created as that user (identity.h MakePrivateDirs) before it enters
  // working_dir: directories the job names, never made by the agent.
  std::vector<std::string> make_dirs;
};

// How a process ended, in words a user acts on.
struct ExitInfo {
  int rank = 0;
  std::string log_path;
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool stopped_by_us = false;
  bool ok() const { return exit_code == 0; }
  // "exit code 1", "killed by SIGKILL (out of memory?)", ...
  std::string Describe() const;
};

// True when the end of a process's log says a peer went away (gloo's
// "Connection closed by peer", NCCL's remote error): the process may have
// failed only because another one, or another node, did.
bool PeerLost(const std::string& log_tail);

// Reads the end of a log and names a likely cause: NCCL or gloo timeouts,
// CUDA or host out-of-memory, NaN loss, ... `cause` is a code for the
// server (CommTimeout, GpuOutOfMemory, HostOutOfMemory, NaNLoss,
// PortInUse, Missing; "" when none), `text` the hint, its fix and the log
// line that shows it.
struct LogHint {
  std::string cause;
  std::string text;
};
LogHint DiagnoseLog(const std::string& log_tail);

// A log line without the time the agent's log prefixed it with
// (log_file.h); a line without one (cut off at a tail's start) whole.
std::string_view WithoutTimestamp(std::string_view line);

class ProcessGroup {
 public:
  ProcessGroup() = default;
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts every process. Errors: a process could not be started (the ones
  // already started are killed).
  Status Start(const std::vector<ProcessSpec>& procs);
  // Reaps processes that ended; true when none is left.
  bool Poll();
  // SIGTERM to every process group now; SIGKILL at Poll() after `grace_s`.
  void Stop(int grace_s);
  // SIGKILL to every process group, then waits for them.
  void Kill();

  bool stopping() const { return stop_deadline_ > 0; }
  const std::vector<ExitInfo>& exits() const { return exits_; }
  bool all_ok() const;  // every process exited 0
  size_t running() const { return pids_.size(); }
  std::vector<pid_t> pids() const;
  // The last `bytes` of each log, joined (for DiagnoseLog).
  std::string LogTails(size_t bytes) const;
  // Each process's last log line (without its timestamp), by rank.
  std::vector<std::pair<int, std::string>> LastLines() const;

 private:
  struct Proc {
    pid_t pid;
    int rank;
    std::string log_path;
  };
  std::vector<Proc> pids_;
  std::vector<ExitInfo> exits_;
  std::vector<std::string> logs_;
  int64_t stop_deadline_ = 0;  // steady-clock ms; 0 = not stopping
};

}  // namespace unipool::agent
