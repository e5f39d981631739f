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
};

// The built-in catalog, sorted by name.
const std::vector<GpuModel>& BuiltinGpuModels();

// Looks a name up in the catalog, ignoring case.
std::optional<GpuModel> FindBuiltinGpuModel(std::string_view name);

// Helpers for writing figures in vendor units.
constexpr FlopRate Tflops(double t) { return FlopRate(static_cast<int64_t>(t * 1000 + 0.5)); }
constexpr Bandwidth GBps(int64_t gbytes) { return Bandwidth(gbytes * 8000000000LL); }
constexpr Bytes GB(int64_t g) { return Bytes(g * 1000000000LL); }

}  // namespace unipool
