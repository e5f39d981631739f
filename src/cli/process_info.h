// Facts about this process that the CLI reports (Linux /proc).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace unipool::cli {

// Peak resident set size (VmHWM) in bytes; 0 when unknown.
inline int64_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace unipool::cli
