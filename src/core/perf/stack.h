// What the software and the GPU achieve, as the cost model needs it: the
// software stack's switches (Framework) and its named profiles
// (StackProfile), and each GPU model's compute efficiencies (EfficiencyOf).
// docs/plan.md, "Software stacks", has the table.
//
// Pure: no I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/topology/gpu_model.h"

namespace unipool::perf {

// ZeRO-3 / FSDP gather and scatter each parameter's partitions separately,
// interleaved with compute on a side stream. The measured DeepSpeed ZeRO-3
// runs (Narayanan et al. SC'21, Table 2: 175B and 530B on 384-2240 A100s)
// are reproduced when each GPU moves its share over its own NIC only, not
// the node's NICs together as one NCCL ring does; we model it that way
// (conservative for newer FSDP2 with coalesced collectives).
inline constexpr bool kZero3NodeAggregation = false;

// Per-GPU-model compute efficiencies (fraction of dense peak). See
// EfficiencyOf() in stack.cc for the table and its sources.
struct GpuEfficiency {
  double gemm_max = 0.7;      // large bf16 GEMMs
  double attention = 0.5;     // FlashAttention-style fused attention
  double fp8_vs_bf16 = 0.75;  // FP8 GEMM efficiency relative to bf16's
};
// PyTorch's scaled_dot_product_attention on Hopper runs FlashAttention-2,
// which uses none of Hopper's new tensor-core instructions: 329 TF/s forward
// at 4608 tokens x 128 head dim on an H100 against 631 TF/s for cuDNN's
// fused attention (pytorch/pytorch#142132, torch 2.6 nightly of Dec 2024;
// the FlashAttention-3 paper, Shah et al. 2024: "only 35% utilization on the
// H100"). cuDNN attention stayed opt-in from pytorch#138522 (2.5.1) until
// cuDNN 9.15 (torch 2.10). The backward is no faster than the forward.
inline constexpr double kFlash2HopperAttention = 0.33;

struct Framework;

// Under a power cap below the board power (GpuModel::power_limit) the
// compute-bound GEMM and attention efficiencies scale with the clock the cap
// leaves (PowerCapClockFactor); memory-bound work is not scaled. With
// Framework::sdpa_flash2 on a Hopper GPU, attention runs at
// kFlash2HopperAttention.
GpuEfficiency EfficiencyOf(const GpuModel& gpu, const Framework& framework);

// The share of its clock a GPU keeps under its power cap while compute-bound:
// (cap / board power)^(1/3). First-order DVFS model: dynamic power is
// C V^2 f and, in the DVFS range, the voltage follows the clock, so power goes
// as f^3 (static power ignored, which makes the estimate mildly optimistic).
// Estimate, not fitted: 500 W of 700 keeps 89% of the clock. 1 without a cap.
double PowerCapClockFactor(const GpuModel& gpu);

// What the training software does; the defaults describe a current
// Megatron-Core / Transformer Engine stack ("mcore-2025").
struct Framework {
  std::string stack = "mcore-2025";  // the profile these settings came from (StackProfile)
  bool flash_attention = true;       // attention scores never stored; causal half computed
  bool tp_comm_overlap = true;       // --tp-comm-overlap
  bool dp_overlap = true;  // --overlap-grad-reduce/--overlap-param-gather, ZeRO overlap_comm
  bool fp8 = false;        // FP8 GEMMs where the GPU has them
  // ZeRO-3 / FSDP collectives over each node's NICs together (FSDP2's
  // coalesced all-gathers) rather than each GPU over its own NIC (DeepSpeed
  // ZeRO-3 of 2021, kZero3NodeAggregation).
  bool zero3_node_aggregation = kZero3NodeAggregation;
  // EP all-to-all overlapped with another micro-batch's compute
  // (Megatron-Core 0.13+ --overlap-moe-expert-parallel-comm, DeepSeek's DualPipe).
  bool ep_overlap = false;
  // Pipeline sends: each split over the TP ranks (Megatron's scatter/gather,
  // Narayanan et al. SC'21 4.1) and overlapped with the ranks' other work,
  // or the whole activation from every TP rank with the compute waiting
  // (DeepSpeed's PipelineEngine: runtime/pipe/p2p.py send() asserts
  // async_op is False; recv, send, recv-grad, send-grad each block).
  bool pp_p2p_split_overlapped = true;
  // With interleaving, each chunk's sends and receives posted before its
  // compute and waited for after it (Megatron-LM's overlap_p2p_comm: on by
  // default, --no-overlap-p2p-communication turns it off, forced off without
  // virtual stages), so only what outlasts the chunk's compute is exposed.
  bool pp_overlap = false;
  // Norms, activations, rotary embedding and residual adds run as fused
  // kernels (Transformer Engine, Apex, torch.compile), or as eager PyTorch
  // ops that each make their own pass over HBM (kEagerElementwiseFactor).
  bool fused_elementwise = true;
  // What "selective" recomputation recomputes: Megatron's attention core
  // (Korthikanti et al. MLSys'23), or torchtitan's op-level SAC, which saves
  // the outputs of matmuls, SDPA and reduce-scatters only, and of the matmuls
  // only every second one (torchtitan activation checkpointing, _custom_policy:
  // "Saves output of all compute ops, except every second mm"), so it
  // recomputes every element-wise op and every second projection.
  bool selective_every_other_matmul = false;
  // Attention through PyTorch SDPA's FlashAttention-2 kernel rather than
  // Transformer Engine's cuDNN fused attention (kFlash2HopperAttention).
  bool sdpa_flash2 = false;
  // The loss as one fused kernel (Transformer Engine's or Megatron-Core's
  // cross-entropy fusion, Megatron-Bridge's default) or Megatron-LM's op-by-op
  // fp32 cross-entropy (kUnfusedLossTrafficBytesPerLogit).
  bool fused_cross_entropy = true;
};

// The software stacks the planner knows, by name:
//   megatron-2021     Megatron-LM as in Narayanan et al. SC'21 / Korthikanti et al.
//                     MLSys'23: no fused attention, no TP or DP overlap, op-by-op loss
//   deepspeed-pipe    Megatron-DeepSpeed of 2022 (BLOOM, MT-NLG): no fused attention, no
//                     TP overlap, ZeRO overlap_comm, blocking whole-tensor pipeline sends,
//                     Megatron's op-by-op loss
//   pytorch-fsdp      PyTorch FSDP1 / FairScale (OPT's metaseq, MosaicML's llm-foundry):
//                     flat-parameter collectives over the node's NICs, flash attention,
//                     no TP overlap
//   nemo-2024         NeMo 2.0 on Megatron-Core 0.8-0.9 (Transformer Engine, flash
//                     attention, TP userbuffer and DP overlap)
//   mcore-2025        Megatron-Core 0.13+ / Megatron-Bridge: nemo-2024's switches plus the
//                     EP all-to-all overlap (the default)
//   torchtitan-fsdp2  torchtitan: FSDP2 with coalesced collectives, SDPA flash attention,
//                     no TP communication overlap (async TP off), op-level selective
//                     recomputation (torch.compile assumed: fused element-wise ops),
//                     SDPA's FlashAttention-2 (kFlash2HopperAttention)
// kInvalidArgument listing the names for an unknown one.
Result<Framework> StackProfile(std::string_view name);
const std::vector<std::string>& StackNames();

}  // namespace unipool::perf
