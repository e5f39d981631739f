// The clock of every deadline in the agent: CLOCK_MONOTONIC in
// milliseconds, the same in every process of the machine (the watchdog
// compares the agent's deadlines with it).
#pragma once

#include <chrono>
#include <cstdint>

namespace unipool::agent {

inline int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace unipool::agent
