#include "core/topology/gpu_model.h"

#include <algorithm>
#include <cctype>

namespace unipool {

const std::vector<GpuModel>& BuiltinGpuModels() {
  // Sources: NVIDIA A100/H100/H200/B200/GB200 and V100/P100 datasheets, AMD
  // MI300X datasheet. Dense (non-sparse) tensor throughput.
  static const std::vector<GpuModel> kModels = {
      {"A100-SXM4-40GB", Tflops(312), Tflops(0), GB(40), GBps(1555), Watts(400)},
      {"A100-SXM4-80GB", Tflops(312), Tflops(0), GB(80), GBps(2039), Watts(400)},
      {"B200", Tflops(2250), Tflops(4500), GB(180), GBps(8000), Watts(1000)},
      {"GB200", Tflops(2500), Tflops(5000), GB(186), GBps(8000), Watts(1200)},
      {"H100-SXM", Tflops(989.4), Tflops(1978.9), GB(80), GBps(3350), Watts(700)},
      {"H200-SXM", Tflops(989.4), Tflops(1978.9), GB(141), GBps(4800), Watts(700)},
      {"MI300X", Tflops(1307.4), Tflops(2614.9), GB(192), GBps(5300), Watts(750)},
      {"P100-PCIE-16GB", Tflops(18.7), Tflops(0), GB(16), GBps(732), Watts(250)},
      {"P40", Tflops(11.8), Tflops(0), GB(24), GBps(346), Watts(250)},
      {"V100-SXM2-32GB", Tflops(125), Tflops(0), GB(32), GBps(900), Watts(300)},
  };
  static const std::vector<GpuModel> kWithPower = [] {
    std::vector<GpuModel> all;
    for (const GpuModel& m : kModels) all.push_back(WithPowerDefaults(m));
    return all;
  }();
  return kWithPower;
}

GpuModel WithPowerDefaults(GpuModel m) {
  const int64_t tdp = m.power.value();
  if (m.idle_power.value() == 0) m.idle_power = Watts((tdp * 10 + 50) / 100);
  if (m.train_power.value() == 0) m.train_power = Watts((tdp * 6 + 3) / 7);   // 600 of 700
  if (m.host_power.value() == 0) m.host_power = Watts((tdp * 15 + 14) / 28);  // 375 of 700
  if (m.train_power > m.power_cap()) m.train_power = m.power_cap();
  if (m.idle_power > m.train_power) m.idle_power = m.train_power;
  return m;
}

static bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::optional<GpuModel> FindBuiltinGpuModel(std::string_view name) {
  for (const GpuModel& m : BuiltinGpuModels()) {
    if (EqualsIgnoreCase(m.name, name)) return m;
  }
  return std::nullopt;
}

}  // namespace unipool
