#include "agent/gpu_metrics.h"

#include <sstream>

#include "io/yaml_fields.h"

namespace unipool::agent {

const char* const kGpuQuery =
    "nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total,temperature.gpu,"
    "power.draw,ecc.errors.uncorrected.volatile.total --format=csv,noheader,nounits";

std::vector<GpuSample> ParseGpuSamples(const std::string& csv) {
  std::vector<GpuSample> out;
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    std::vector<double> v;
    std::stringstream fields(line);
    bool ok = true;
    for (std::string f; std::getline(fields, f, ',');) {
      f.erase(0, f.find_first_not_of(" \t"));
      while (!f.empty() && (f.back() == ' ' || f.back() == '\r')) f.pop_back();
      double d = -1;
      if (!f.empty() && f[0] == '[') {
        d = -1;  // [N/A], [Not Supported]
      } else if (!io::ParseDouble(f, &d) || d < 0) {
        ok = false;
        break;
      }
      v.push_back(d);
    }
    if (!ok || v.size() != 7 || v[0] < 0 || v[0] > 64) continue;
    out.push_back(GpuSample{static_cast<int>(v[0]), v[1], v[2], v[3], v[4], v[5],
                            static_cast<int64_t>(v[6])});
  }
  return out;
}

}  // namespace unipool::agent
