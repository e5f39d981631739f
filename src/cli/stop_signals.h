// SIGINT and SIGTERM as a clean stop for the long-running commands (server,
// agent, up). BlockStopSignals() must run before the command starts any
// thread: threads inherit the mask, and a thread that does not block them
// would take the default action (the whole process dies at once).
// OnStopSignal() then runs `stop` on a thread that waits for one.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <thread>

namespace unipool::cli {

inline sigset_t StopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

inline void BlockStopSignals() {
  const sigset_t set = StopSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// REQUIRES: BlockStopSignals() ran first, on the main thread.
inline void OnStopSignal(std::function<void()> stop) {
  std::thread([stop = std::move(stop)] {
    const sigset_t set = StopSignals();
    int sig = 0;
    sigwait(&set, &sig);
    stop();
  }).detach();
}

}  // namespace unipool::cli
