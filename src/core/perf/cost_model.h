// The cost model: given a model, a global batch, the hardware a job spans and
// a parallel plan, predict the time of one training step (and its breakdown)
// and the memory each GPU needs (and its breakdown). docs/plan.md derives
// every formula; each constant below names its source.
//
// Structure (per micro-batch, per GPU of the slowest pipeline stage):
//   layer time  = GEMMs / (peak x GEMM efficiency(shape))
//               + attention core / (peak x attention efficiency)
//               + element-wise traffic / (HBM bandwidth x HBM efficiency)
//               + exposed TP / CP / EP communication
//   stage time  = layers_per_stage x layer time + logits (last stage) + PP p2p
//   step        = (m + (p-1)/v) x stage time              (1F1B, interleaved)
//               + exposed DP / ZeRO communication + optimizer step
// Collectives use an alpha-beta model over the tiers the group spans
// (CollectiveTime): the cheaper of a flat ring, a hierarchical ring (one
// level per tier) and a double binary tree.
//
// Pure, deterministic, allocation-free in Evaluate's hot path.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/base/units.h"
#include "core/perf/hardware.h"
#include "core/perf/model.h"
#include "core/perf/stack.h"

namespace unipool::perf {

// ---- Named constants ---------------------------------------------------------
// Bytes per parameter for mixed-precision Adam: Rajbhandari et al., "ZeRO",
// SC'20, section 3.1: 2 (bf16 weights) + 2 (bf16 gradients) + K = 12 (fp32
// master weights, Adam momentum and variance).
inline constexpr double kWeightBytes = 2;
inline constexpr double kGradBytes = 2;
inline constexpr double kOptimizerBytes = 12;
// Bytes an activation element takes (bf16) and a communicated element takes.
inline constexpr double kActBytes = 2;
// Memory the CUDA context, NCCL channels, cuBLAS workspaces and the caching
// allocator's fragmentation take outside the model's tensors (PyTorch CUDA
// context ~0.5-1 GB, NCCL ~0.5 GB per communicator set). Engineering estimate.
inline constexpr double kRuntimeReserveBytes = 2e9;
// HBM traffic of the Adam step per parameter the GPU updates: read fp32
// master, grad, m, v (16 B), write master, m, v (12 B), write bf16 weight (2 B).
inline constexpr double kOptimizerTrafficBytes = 30;
// Fixed work of every step outside the layers: optimizer kernel launches,
// gradient-norm all-reduce and clipping, loss reduction, data-loader
// hand-off (Megatron-LM step profiles show a few tens of ms). Estimate.
inline constexpr double kStepOverheadS = 0.04;
// Fraction of HBM datasheet bandwidth element-wise kernels reach (STREAM-like
// copy on A100/H100 reaches 80-90%).
inline constexpr double kHbmEfficiency = 0.85;
// GEMM efficiency falls off when the smallest GEMM dimension d is small:
// eff(d) = e_max x d / (d + kGemmHalfDim). Tile-quantization model; the
// half-efficiency dimension is of the order of one 128-wide tensor-core tile.
inline constexpr double kGemmHalfDim = 96;
// Fraction of the link rate NCCL's bus bandwidth reaches (nccl-tests on DGX
// A100/H100: ~230 of 300 GB/s NVLink, ~23 of 25 GB/s HDR IB per NIC).
inline constexpr double kScaleUpLinkEfficiency = 0.78;
inline constexpr double kScaleOutLinkEfficiency = 0.92;
// NCCL per-call software overhead (kernel launch + protocol setup), once per
// collective; per ring step only the tier's latency counts.
inline constexpr double kCollectiveOverheadS = 8e-6;
// Share of TP communication hidden behind GEMMs with userbuffer overlap
// (Megatron-Core --tp-comm-overlap; NVIDIA TE reports most of the AG/RS hidden).
// Only when the TP group sits inside one scale-up domain (TE userbuffers use
// CUDA IPC over NVLink).
inline constexpr double kTpOverlapFraction = 0.6;
// Share of the backward (forward for parameter gathers) that gradient
// reduction can hide behind (bucketed overlap; the last bucket cannot hide).
inline constexpr double kDpOverlapFraction = 0.85;
// Extra attention-core work of FlashAttention's backward pass relative to its
// forward (Dao 2023, FlashAttention-2: backward ~2.5x forward FLOPs).
inline constexpr double kFlashBackwardFactor = 2.5;
// Element-wise HBM traffic per byte of stored activation (Korthikanti et al.
// count): each stored tensor is written once and read back in the backward,
// and the fused kernels read their inputs once. Calibrated.
inline constexpr double kElementwiseTrafficPerActByte = 1.0;
// Eager PyTorch element-wise ops against fused kernels: by our count of a
// Llama layer (torchtitan's model code), about 4x the traffic. Per token
// and layer, fused: ~36h bytes forward (the stored activations), 108h with
// the backward; eager: ~148h forward (two RMSNorms computed in fp32, each
// upcast, square, mean, scale, downcast, weight: ~36 bytes per element; the
// complex-number rotary embedding of Q and K, ~25h; SwiGLU's SiLU and product
// over the FFN width, ~35h; residual adds and the attention-output copy,
// ~16h) and ~2x that in the backward, ~410h.
inline constexpr double kEagerElementwiseFactor = 4.0;

// Share of the other micro-batch's compute that hides a layer's EP
// all-to-all with Megatron-Core's EP overlap (--overlap-moe-expert-parallel-comm:
// the forward of one micro-batch and the backward of another interleave, so
// one's dispatch/combine runs under the other's attention and experts; the
// dependencies inside a layer keep part of it exposed). Estimate.
inline constexpr double kEpOverlapFraction = 0.5;

// MoE layer costs outside the dense-GEMM model. Estimates, in the absence of
// published kernel profiles:
//  - kGroupedGemmHalfDim: the routed experts run as one grouped GEMM of many
//    small per-expert problems with uneven token counts, so tile and wave
//    quantization bite harder than in one GEMM (twice kGemmHalfDim).
//  - kMoeLoadImbalance: dropless routing waits for the most loaded EP rank;
//    with balancing losses (or DeepSeek-V3's bias-based balancing) the
//    busiest rank carries ~10% more tokens than the mean.
//  - kPermutePasses: token permute and unpermute (Megatron-Core's
//    moe_permute_fusion kernels) read and write every routed copy: 4 passes
//    of the copies' bytes.
inline constexpr double kGroupedGemmHalfDim = 192;
inline constexpr double kMoeLoadImbalance = 1.1;
inline constexpr double kPermutePasses = 4;

// All-to-all: NCCL issues one send/receive pair per peer; each costs about a
// microsecond of setup on top of the tier latency (nccl-tests alltoall at
// small sizes). Estimate.
inline constexpr double kAllToAllPerPeerS = 1e-6;
// The logit layer: fp32 logits kept for the loss (Korthikanti et al.: 4 s b V
// / t bytes), and the HBM traffic of the vocabulary-parallel cross-entropy
// per logit over forward and backward (write, read for max/sum, gradient).
inline constexpr double kLogitActivationBytes = 4;
inline constexpr double kLossTrafficBytesPerLogit = 12;
// Megatron-LM's unfused vocabulary-parallel cross-entropy (tensor_parallel/
// cross_entropy.py, 2021 to Megatron-Core 0.8 without --cross-entropy-loss-fusion)
// runs one PyTorch op per step over the logits, in fp32. Forward: .float() of
// the bf16 logits (read 2, write 4 bytes), max (4), subtract the max (4 + 4),
// exp (4 + 4), sum (4), divide by the sum (4 + 4): 38 bytes; backward: scale
// the saved softmax by the output gradient (4 + 4) and cast back (4 + 2):
// 14 bytes. 52 bytes per logit by that count (Framework::fused_cross_entropy).
inline constexpr double kUnfusedLossTrafficBytesPerLogit = 52;

// ---- Jobs and plans --------------------------------------------------------

struct Job {
  ModelSpec model;
  int64_t global_batch = 0;  // sequences per step
  Framework framework;
};

// How the ranks of each group are laid out: Megatron's default places TP
// fastest, then CP, then DP, then PP (tp-cp-dp-pp, PP across the widest
// network); tp-cp-pp-dp keeps pipeline neighbours close and spreads DP
// (Llama 3's layout).
enum class RankOrder { kTpCpDpPp, kTpCpPpDp };
const char* RankOrderName(RankOrder o);

struct Plan {
  int32_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  // Expert tensor parallelism; 0 = tp. Megatron-Core's "MoE parallel
  // folding": the expert layers split the same TP x CP x DP ranks as
  // ETP x EP x expert-DP, so with etp < tp EP may exceed DP (Qwen3-235B:
  // TP2 DP16 EP32 ETP1).
  int32_t etp = 0;
  int32_t vpp = 1;          // virtual (interleaved) stages per pipeline rank
  int32_t micro_batch = 1;  // sequences per micro-batch
  Recompute recompute = Recompute::kNone;
  int32_t zero = 0;               // 0 (plain DP), 1, 2, 3 (= FSDP FULL_SHARD)
  bool sequence_parallel = true;  // meaningful when tp > 1
  RankOrder order = RankOrder::kTpCpDpPp;

  int64_t gpus() const { return int64_t{tp} * pp * dp * cp; }
  int32_t expert_tp() const { return etp > 0 ? etp : tp; }
  // Replicas of each expert: TP x CP x DP / (ETP x EP).
  int64_t expert_dp() const { return int64_t{tp} * cp * dp / (int64_t{expert_tp()} * ep); }
  auto operator<=>(const Plan&) const = default;  // stable order for ties
};
// "tp8 pp16 v2 dp64 cp1 ep1 mbs1 zero1 rc=selective sp tp-cp-dp-pp"
std::string Describe(const Plan& p);

// Checks the plan against the job: degrees multiply to the GPU count,
// divisibility of heads, layers, experts, batch. kInvalidArgument naming the
// first broken rule.
Status CheckPlan(const Job& job, int64_t gpus, const Plan& plan);

// ---- Collectives -----------------------------------------------------------

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kP2P };
const char* CollectiveName(Collective c);

// The ranks of one group: `size` ranks `stride` apart, optionally times a
// second dimension (size2 ranks stride2 apart) for groups such as DP x CP
// that are not one stride in the rank order.
struct GroupShape {
  int64_t size = 1;
  int64_t stride = 1;
  int64_t size2 = 1;
  int64_t stride2 = 1;
  int64_t members() const { return size * size2; }
};

// Members of `g` that share one group of tier t (>= 1, <= members()).
int64_t MembersWithin(const HardwareView& hw, const GroupShape& g, int t);

enum class Algorithm { kRing, kHierarchical, kTree, kDirect };
const char* AlgorithmName(Algorithm a);

struct CommCost {
  double seconds = 0;
  int top_tier = -1;  // highest tier the group spans; -1 for a group of one
  Algorithm algorithm = Algorithm::kDirect;
};

// Time of one collective on one group while every other group of the same
// kind runs at once. `bytes` is the per-GPU buffer: the full buffer for
// all-reduce, the input of reduce-scatter, the output of all-gather, what one
// GPU sends in all-to-all, the message of p2p.
// With aggregate_uplinks (NCCL's multi-channel rings), a ring crossing tier t
// uses the uplinks of all group members inside one tier-(t-1) group at once
// (8 GPUs of a DGX node: 8 NICs); without, one GPU's link is the bottleneck.
CommCost CollectiveTime(const HardwareView& hw, Collective c, const GroupShape& g, double bytes,
                        bool aggregate_uplinks = true);

// The textbook ring all-reduce: 2 (n-1)/n x bytes / bw + 2 (n-1) x latency.
double RingAllReduceSeconds(double bytes, int64_t n, double bytes_per_s, double latency_s);

// Pipeline bubble as a fraction of the ideal time: (p-1) / (v m).
double BubbleFraction(int64_t p, int64_t v, int64_t m);

// ---- Pipeline layout -------------------------------------------------------

// How `layers` transformer layers are dealt to pp x vpp model chunks: chunk j
// (in Megatron's virtual-stage order, j = virtual rank x pp + pipeline rank)
// holds floor(L / (p v)) layers, one more for the first L mod (p v) chunks,
// so the larger chunks fall round-robin on the stages and the heaviest stage
// holds ceil(L / p) layers. This is the layout Megatron-LM builds for evenly
// divisible counts and the one unipool writes as
// --pipeline-model-parallel-layout otherwise.
// REQUIRES: 1 <= pp, 1 <= vpp, pp x vpp <= layers.
std::vector<int32_t> ChunkLayers(int32_t layers, int32_t pp, int32_t vpp);
// ceil(layers / pp): the layers of the heaviest stage of that layout.
int32_t MaxStageLayers(int32_t layers, int32_t pp);

// ---- Memory ----------------------------------------------------------------

// Weights, gradients and optimizer state of `params` parameters sharded over
// `dp` ranks at a ZeRO stage (0-3): stage 1 shards the optimizer, 2 also the
// gradients, 3 also the weights.
struct ModelStateBytes {
  double weights = 0, grads = 0, optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
ModelStateBytes ModelState(double params, int32_t zero, int64_t dp);

// Activation bytes one transformer layer keeps for the backward pass of one
// micro-batch on one GPU (Korthikanti et al. MLSys'23, section 4, generalised
// to GQA, SwiGLU, MoE and context parallelism). For GPT with MHA and a 4h
// GeLU FFN: s b h (34 + 5 a s / h) with t = 1; s b h (10 + 24/t + 5 a s/(h t))
// with tensor parallelism; s b h / t (34 + 5 a s / h) with sequence
// parallelism; the 5 a s / h term is gone with selective recomputation or
// flash attention; 2 s b h (/ t with SP) with full recomputation.
double LayerActivationBytes(const ModelSpec& m, const Plan& p, bool moe_layer, bool flash_attention,
                            Recompute recompute);

// ---- Evaluation ------------------------------------------------------------

// Exposed communication, per kind, per step.
enum class CommPart { kTp, kCp, kEp, kPp, kDpGrad, kDpParam, kCount };
const char* CommPartName(CommPart c);  // "TP all-reduce", "DP reduce-scatter", ...

struct TimeBreakdown {
  Duration compute;    // forward + backward GEMMs, attention, element-wise, logits
  Duration recompute;  // recomputed forward work
  std::array<Duration, static_cast<size_t>(CommPart::kCount)> comm{};        // exposed
  std::array<Duration, static_cast<size_t>(CommPart::kCount)> comm_total{};  // before overlap
  std::array<int, static_cast<size_t>(CommPart::kCount)> comm_tier{};  // highest tier, -1 none
  Duration bubble;                                                     // pipeline fill and drain
  Duration optimizer;  // the Adam step and the fixed per-step work (kStepOverheadS)
  Duration step;       // the sum of all the above
  Duration exposed_comm() const;
};

struct MemoryBreakdown {
  Bytes weights, grads, optimizer, activations, buffers, reserve;
  Bytes total;   // sum
  Bytes usable;  // HBM size
  bool fits() const { return total <= usable; }
};

struct Estimate {
  TimeBreakdown time;
  MemoryBreakdown memory;
  int64_t micro_batches = 0;   // per pipeline per step
  double bubble_fraction = 0;  // (p-1)/(v m)
  double step_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;  // Megatron-LM model FLOPs (no recompute)
  double mfu = 0;                   // model FLOPs / (bf16 peak x step)
  double hfu = 0;                   // including recompute
  double gemm_efficiency = 0;       // of the dense layer GEMMs, for explanations
};

// Evaluates `plan` for `job` on `hw`. Errors: CheckPlan's. An estimate that
// does not fit in memory is still returned (memory.fits() is false).
Result<Estimate> Evaluate(const Job& job, const HardwareView& hw, const Plan& plan);

// As Evaluate, without CheckPlan (the planner checks as it enumerates).
Estimate EvaluateUnchecked(const Job& job, const HardwareView& hw, const Plan& plan);

// Memory only (cheap; the planner prunes with it).
MemoryBreakdown EstimateMemory(const Job& job, const HardwareView& hw, const Plan& plan);

}  // namespace unipool::perf
