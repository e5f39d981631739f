// What a node's GPUs report of themselves, read with nvidia-smi: use,
// memory, temperature, power and uncorrected ECC errors per GPU. The agent
// samples them with its health checks and sends them with its heartbeats;
// the server exports them (unipool_gpu_* with `node` and `gpu` labels). On
// a node without NVIDIA GPUs (virtual GPUs, --gpus N) nothing is sampled and
// nothing is exported.
#pragma once

#include <string>
#include <vector>

#include "server/gpu_sample.h"

namespace unipool::agent {

using GpuSample = server::GpuSample;

// The nvidia-smi query whose CSV ParseGpuSamples reads.
extern const char* const kGpuQuery;

// Rows of `index, utilization.gpu, memory.used, memory.total,
// temperature.gpu, power.draw, ecc.errors.uncorrected.volatile.total`
// (csv,noheader,nounits; MiB, %, C, W). A field nvidia-smi cannot give
// ("[N/A]", "[Not Supported]") is -1; a row that is not numbers is skipped.
std::vector<GpuSample> ParseGpuSamples(const std::string& csv);

}  // namespace unipool::agent
