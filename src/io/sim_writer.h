// Writers for simulation results: a side-by-side text summary, JSON, a time
// series CSV, and a self-contained HTML report (inline SVG charts, no
// scripts or network) that opens offline in a browser.
#pragma once

#include <string>
#include <vector>

#include "core/sim/simulator.h"
#include "core/sim/summary.h"

namespace unipool::io {

// One policy's run.
struct SimRun {
  sim::Summary summary;
  const sim::SimOutput* output = nullptr;
};

struct SimHeader {
  std::string name;      // simulation name
  std::string cluster;   // cluster name
  std::string workload;  // "trace philly.csv (82,247 jobs)" or "synthetic"
  uint64_t seed = 0;
};

std::string SimText(const SimHeader& h, const std::vector<SimRun>& runs);
std::string SimJson(const SimHeader& h, const std::vector<SimRun>& runs);
std::string SimSeriesCsv(const std::vector<SimRun>& runs);
std::string SimHtml(const SimHeader& h, const std::vector<SimRun>& runs);

}  // namespace unipool::io
