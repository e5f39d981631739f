// What the long-running commands (server, agent, up) share: SIGINT and
// SIGTERM as a clean stop, and the log level. BlockStopSignals() must run before the command starts
// any thread: threads inherit the mask, and a thread that does not block them would take the
// default action (the whole process dies at once). OnStopSignal() then runs `stop` on a thread that
// waits for one.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include "io/yaml_fields.h"
#include "server/log.h"

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

// A duration flag that must be positive ("5s"); false (after saying why).
inline bool ParsePositiveDuration(const std::string& flag, const std::string& v, Duration* out) {
  if (io::ParseDuration(v, out) && out->value() > 0) return true;
  std::cerr << "error: " << flag << ": expected a duration like 5s, got '" << v << "'\n";
  return false;
}

// --log-level of the long-running commands; false (after saying why) on a
// bad value.
inline bool SetLogLevel(server::Logger& log, const std::string& level) {
  server::LogLevel l;
  if (!server::ParseLogLevel(level, &l)) {
    std::cerr << "error: --log-level: expected debug, info, warn or error, got '" << level << "'\n";
    return false;
  }
  log.set_level(l);
  return true;
}

}  // namespace unipool::cli
