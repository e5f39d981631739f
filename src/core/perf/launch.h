// Launch settings for a chosen plan, as plain data: the Megatron-LM
// command-line arguments, the fields of a DeepSpeed config, and the torchrun
// invocation. io/plan_writer renders them (argument line, JSON, shell line).
//
// Megatron-LM flags follow megatron/training/arguments.py (Megatron-Core
// r0.8+); DeepSpeed fields follow the DeepSpeed config JSON reference.
// Pure.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/perf/cost_model.h"

namespace unipool::perf {

struct DeepSpeedConfig {
  int64_t train_batch_size = 0;  // sequences per step, all ranks
  int32_t train_micro_batch_size_per_gpu = 1;
  int64_t gradient_accumulation_steps = 1;
  int32_t zero_stage = 0;
  bool overlap_comm = true;
  bool bf16 = true;
  bool activation_checkpointing = false;  // full recomputation
  int32_t tensor_parallel = 1;            // "tensor_parallel": {"autotp_size": N}
  int32_t pipeline_stages = 1;            // given to deepspeed.pipe.PipelineModule
  double gradient_clipping = 1.0;
};

struct TorchrunCommand {
  int64_t nnodes = 1;
  int32_t nproc_per_node = 8;
  std::string script = "pretrain_gpt.py";  // Megatron-LM's entry point
};

struct LaunchConfig {
  // ("--flag", "value"); value empty for switches. In Megatron's order:
  // parallelism, model, batch, memory, precision, overlap.
  std::vector<std::pair<std::string, std::string>> megatron;
  DeepSpeedConfig deepspeed;
  TorchrunCommand torchrun;
};

LaunchConfig MakeLaunch(const Job& job, const Plan& plan, int32_t gpus_per_node);

}  // namespace unipool::perf
