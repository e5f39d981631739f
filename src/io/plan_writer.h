// Writers for `unipool plan`: the ranked plans with their time and memory
// breakdowns and explanations as a text report or one JSON object, and the
// launch settings as a Megatron-LM argument list, a torchrun line and a
// DeepSpeed config JSON.
#pragma once

#include <string>
#include <vector>

#include "core/perf/cost_model.h"
#include "core/perf/launch.h"
#include "core/perf/planner.h"
#include "core/perf/sizing.h"

namespace unipool::io {

// Everything one report shows. Non-owning; sizing may be null.
struct PlanReport {
  const perf::Job* job = nullptr;
  const perf::HardwareView* hw = nullptr;
  std::string cluster_name;
  const perf::PlanSearch* search = nullptr;
  const perf::LaunchConfig* launch = nullptr;  // for the best plan; may be null
  const perf::SizingResult* sizing = nullptr;  // sizing mode only
  bool explain = false;
};

// What the reader must know before trusting the numbers: a plan over the
// GPU's memory, an uncalibrated prediction. One sentence each; in the text
// report as "Warning: ..." lines and in JSON as "warnings".
std::vector<std::string> PlanWarnings(const PlanReport& r);

std::string PlanText(const PlanReport& r);
std::string PlanJson(const PlanReport& r);  // one JSON object, pretty

// "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16 ..."
std::string MegatronArgs(const perf::LaunchConfig& c);
// "torchrun --nnodes 2048 --nproc-per-node 8 --rdzv-backend c10d ... pretrain_gpt.py <args>"
std::string TorchrunLine(const perf::LaunchConfig& c);
// A DeepSpeed config file (JSON object, pretty).
std::string DeepSpeedJson(const perf::LaunchConfig& c);
// A torchtitan job file (TOML): [model], [training], [parallelism],
// [activation_checkpoint].
std::string TorchtitanToml(const perf::LaunchConfig& c);

// "1h 23m", "4.2 days", "850 ms".
std::string HumanDuration(double seconds);

}  // namespace unipool::io
