// Kubernetes resource quantities, read exactly (no floating point): CPU as
// "2", "0.5" or "500m", memory as "64Gi", "512Mi", "1G", "1e9" or a plain
// number of bytes (the suffixes of k8s.io/apimachinery's resource.Quantity:
// Ki Mi Gi Ti Pi Ei, n u m k M G T P E, and e/E exponents).
//
// Fractions of the unit round up, as the kubelet does ("0.0001" CPU is 1m;
// "1.5" bytes is 2). Errors: InvalidArgument with a one-line cause that
// names the text; the caller adds the field's path and place.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/base/status.h"

namespace unipool::io {

inline constexpr int64_t kMaxMilliCpu = int64_t{1000000} * 1000;  // a million cores
inline constexpr int64_t kMaxQuantityBytes = int64_t{1} << 60;    // 1 EiB

// CPU in thousandths of a core, in [1, kMaxMilliCpu].
Result<int64_t> ParseMilliCpu(std::string_view text);

// Bytes, in [1, kMaxQuantityBytes].
Result<int64_t> ParseByteQuantity(std::string_view text);

}  // namespace unipool::io
