// GPU models: the figures the planner and the summaries need. A built-in
// catalog holds common data-centre parts (vendor datasheet figures, dense
// math, no sparsity); cluster files may add their own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/units.h"

namespace unipool {

struct GpuModel {
  std::string name;
  FlopRate peak_bf16;      // dense BF16 (FP16 for parts without BF16)
  FlopRate peak_fp8;       // dense FP8; 0 when the part has none
  Bytes hbm;               // memory size
  Bandwidth hbm_bandwidth; // memory bandwidth, bits/s
  Watts power;             // board power (TDP)
  // Power model, W per GPU: `idle_power` with no work, `train_power` typical
  // while training, `host_power` the node's non-GPU draw (CPUs, memory,
  // NICs, fans) per GPU. 0: derived from `power` (WithPowerDefaults).
  Watts idle_power;
  Watts train_power;
  Watts host_power;
  // An enforced power cap below the board power (nvidia-smi -pl; Meta's
  // Grand Teton H100s run at 500 W of 700). 0: none, the board power.
  Watts power_limit;
  // The power the GPU may draw: the cap where there is one, else the board.
  Watts power_cap() const {
    return power_limit.value() > 0 && power_limit < power ? power_limit : power;
  }
};

// Fills the power model's zero fields from the board power by the ratios
// measured on 8-GPU H100 HGX nodes (700 W boards): idle 70 W (10%), about
// 600 W (86%) per GPU while training and 375 W (54%) of host draw per GPU,
// which puts a training node at 7.8 kW, 76% of its 10.2 kW nameplate
// (Newkirk et al., arXiv:2506.14551; Latif et al., IEEE Access 13, 2025,
// observed at most 8.4 kW). A power cap bounds the training draw.
GpuModel WithPowerDefaults(GpuModel m);

// The built-in catalog, sorted by name.
const std::vector<GpuModel>& BuiltinGpuModels();

// Looks a name up in the catalog, ignoring case.
std::optional<GpuModel> FindBuiltinGpuModel(std::string_view name);

// Helpers for writing figures in vendor units.
constexpr FlopRate Tflops(double t) { return FlopRate(static_cast<int64_t>(t * 1000 + 0.5)); }
constexpr Bandwidth GBps(int64_t gbytes) { return Bandwidth(gbytes * 8000000000LL); }
constexpr Bytes GB(int64_t g) { return Bytes(g * 1000000000LL); }

}  // namespace unipool
