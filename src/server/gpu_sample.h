// One GPU's own readings, as a node's agent samples them (agent/gpu_metrics.h)
// and sends them with its heartbeats; the server keeps the last ones per
// node in memory and exports them as metrics (unipool_gpu_*).
#pragma once

#include <cstdint>

namespace unipool::server {

struct GpuSample {
  int index = 0;
  double utilization = -1;  // percent; -1 where the GPU gives none
  double memory_used_mib = -1, memory_total_mib = -1;
  double temperature_c = -1, power_w = -1;
  int64_t ecc_uncorrected = -1;  // volatile uncorrected ECC errors
};

// How many Xid errors of one code the driver reported for one GPU since the
// agent started (agent/xid.h): a counter, so a heartbeat that repeats it
// changes nothing. gpu is -1 where the PCI address matched no GPU.
struct GpuXidCount {
  int gpu = -1;
  int xid = 0;
  int64_t count = 0;
};

}  // namespace unipool::server
