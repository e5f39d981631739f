// Watchdog: a small process beside the agent that kills the agent's tasks
// when the agent can no longer be trusted to do it itself.
//
// The agent renews a deadline (its last acknowledged heartbeat plus two
// thirds of the node lease) in a page it shares with the watchdog. The
// watchdog, a separate process in its own process group, checks it every
// 50 ms and kills every task of the agent (Containment: cgroup.kill and the
// process tags) when
//   - the deadline passes: the agent is cut off from the server, or frozen
//     (SIGSTOP, a swap storm, a hung system call) and so cannot fence itself;
//     it keeps killing while the deadline stays past;
//   - the agent dies (the pipe between them reaches end of file): then it
//     kills what is left and exits.
// The server gives a silent node's work away only after the whole lease, so
// with a watchdog that runs, a task is dead before its replacement starts.
//
// The watchdog ignores SIGINT, SIGTERM and SIGHUP (it ends with the agent);
// a SIGKILL of the watchdog itself is seen by the agent, which starts a new
// one. What no process on the node can survive (a kernel hang, the machine
// frozen) is outside this guarantee: the node is then silent, not running.
//
// Thread safety: SetDeadline and fences() may be called from any thread;
// EnsureRunning from one.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/base/status.h"

namespace unipool::agent {

class Containment;

class Watchdog {
 public:
  // Starts `exe agent-watchdog` for the tasks `containment` finds; the
  // deadline starts disabled. Errors: no shared memory, pipe or fork.
  static Result<std::unique_ptr<Watchdog>> Start(const std::string& exe,
                                                 const Containment& containment);
  // Closes the pipe: the watchdog kills what is left and exits; reaps it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The steady-clock millisecond after which every task must be dead;
  // 0 disables the deadline (the agent is stopping its tasks itself).
  void SetDeadline(int64_t steady_ms);
  // How many times the watchdog has fenced (a deadline that passed).
  int64_t fences() const;
  // Restarts the watchdog if it died (someone killed it); false when it is
  // dead and cannot be restarted.
  bool EnsureRunning();
  pid_t pid() const { return pid_; }

  // Shared with the watchdog process (lock-free 64-bit atomics).
  struct State {
    std::atomic<int64_t> deadline_ms{0};
    std::atomic<int64_t> fences{0};
    std::atomic<int64_t> tick_ms{0};
  };

 private:
  Watchdog() = default;
  Status Spawn();

  std::string exe_, cgroup_base_, tag_;
  int memfd_ = -1;
  State* state_ = nullptr;
  int pipe_write_ = -1;
  pid_t pid_ = -1;
};

// The watchdog process's main (`unipool agent-watchdog`): `state_fd` is the
// shared page, `pipe_fd` the read end of the agent's pipe. Returns the exit
// code.
int RunWatchdog(int state_fd, int pipe_fd, const std::string& cgroup_base, const std::string& tag);

}  // namespace unipool::agent
