// Launch settings for a chosen plan, as plain data: the Megatron-LM
// command-line arguments, the fields of a DeepSpeed config, and the torchrun
// invocation. io/plan_writer renders them (argument line, JSON, shell line).
//
// Megatron-LM flags follow megatron/training/arguments.py (Megatron-Core
// r0.13+, for --pipeline-model-parallel-layout); DeepSpeed fields follow the
// DeepSpeed config JSON reference; torchtitan's follow its job config.
// Pure.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
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

// torchtitan's job file (torchtitan/config/job_config.py), as plain data;
// io/plan_writer renders the TOML.
struct TorchtitanConfig {
  std::string model_name = "llama3";  // torchtitan's model family
  std::string flavor;                 // "8B", "70B", "405B"; empty = no such flavor
  int64_t local_batch_size = 1;  // per data-parallel rank per optimizer step (PP) or micro-step
  int64_t global_batch_size = 0;
  int64_t seq_len = 0;
  int64_t dp_replicate = 1, dp_shard = 1;
  std::string reshard_after_forward = "default";  // FSDP2: "always" = ZeRO-3, "never" = ZeRO-2
  int32_t tp = 1, pp = 1, cp = 1, ep = 1;
  std::string pp_schedule = "1F1B";  // or "Interleaved1F1B"
  int32_t pp_microbatch_size = 1;
  int32_t pp_layers_per_stage = 0;             // 0 = torchtitan's default split
  std::string activation_checkpoint = "none";  // none | selective | full
  bool float8 = false;
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
  Status deepspeed_ok;  // why DeepSpeed cannot run this plan (DeepSpeedSupports)
  TorchtitanConfig torchtitan;
  TorchrunCommand torchrun;
};

// The plans DeepSpeed (with Megatron-DeepSpeed's model parallelism) runs:
// its PipelineEngine asserts ZeRO stage < 2 with pipeline stages
// (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible
// with pipeline parallelism") and schedules plain 1F1B (no interleaving); it
// has no ring-attention context parallelism. kFailedPrecondition naming the
// rule, and what to fix.
Status DeepSpeedSupports(const Plan& plan);

// DeepSpeed's own config checks (deepspeed/runtime/config.py
// _batch_assertion): train_batch_size = micro x accumulation x data-parallel
// size, where data-parallel size = world / (tp x pp); all three positive;
// ZeRO stage 0-3 and < 2 with pipeline stages.
Status CheckDeepSpeedConfig(const DeepSpeedConfig& c, int64_t world);

// Megatron-LM's own argument checks (megatron/training/arguments.py
// validate_args, and the divide() asserts of Megatron-Core's parallel
// layers) on an argument list: tp x pp x cp divides the world; heads and
// query groups divide by tp; layers by pp, and by the virtual stage size, or
// a --pipeline-model-parallel-layout with pp x v segments holding every
// layer; experts by ep and the world by ep x pp (expert TP 1); the global
// batch by micro-batch x data-parallel size; --tp-comm-overlap only with
// --sequence-parallel. kInvalidArgument naming the rule.
Status CheckMegatronArgs(const std::vector<std::pair<std::string, std::string>>& args,
                         int64_t world);

LaunchConfig MakeLaunch(const Job& job, const Plan& plan, int32_t gpus_per_node);

}  // namespace unipool::perf
