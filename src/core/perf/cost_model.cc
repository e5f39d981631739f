#include "core/perf/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace unipool::perf {

// ---- Names -------------------------------------------------------------------

const char* RankOrderName(RankOrder o) {
  return o == RankOrder::kTpCpDpPp ? "tp-cp-dp-pp" : "tp-cp-pp-dp";
}

const char* CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllGather:
      return "all-gather";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kP2P:
      return "p2p";
  }
  return "?";
}

const char* AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kDirect:
      return "direct";
  }
  return "?";
}

const char* CommPartName(CommPart c) {
  switch (c) {
    case CommPart::kTp:
      return "TP all-reduce";
    case CommPart::kCp:
      return "CP all-gather";
    case CommPart::kEp:
      return "EP all-to-all";
    case CommPart::kPp:
      return "PP p2p";
    case CommPart::kDpGrad:
      return "DP grad reduce";
    case CommPart::kDpParam:
      return "DP param all-gather";
    case CommPart::kCount:
      break;
  }
  return "?";
}

std::string Describe(const Plan& p) {
  std::string s = "tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp);
  if (p.vpp > 1) s += " v" + std::to_string(p.vpp);
  s += " dp" + std::to_string(p.dp) + " cp" + std::to_string(p.cp) + " ep" + std::to_string(p.ep);
  if (p.etp > 0 && p.etp != p.tp) s += " etp" + std::to_string(p.etp);
  s += " mbs" + std::to_string(p.micro_batch) + " zero" + std::to_string(p.zero);
  s += std::string(" rc=") + RecomputeName(p.recompute);
  if (p.sequence_parallel && p.tp > 1) s += " sp";
  if (p.pp > 1 && p.dp > 1) s += std::string(" ") + RankOrderName(p.order);
  return s;
}

// ---- Plan checks ---------------------------------------------------------------

namespace {

Status Broken(const std::string& what) { return InvalidArgument("plan: " + what); }

Status CheckModelSplit(const ModelSpec& m, const Plan& p) {
  if (m.heads % p.tp != 0)
    return Broken("tp=" + std::to_string(p.tp) + " does not divide the " + std::to_string(m.heads) +
                  " attention heads");
  // Megatron-Core splits the query groups over TP (divide() in its attention).
  if (m.kv_heads % p.tp != 0) {
    return Broken("tp=" + std::to_string(p.tp) + " does not divide the " +
                  std::to_string(m.kv_heads) + " KV heads");
  }
  if (m.dense_layers() > 0 && m.ffn_hidden % p.tp != 0)
    return Broken("tp does not divide ffnHiddenSize");
  if (m.is_moe() && (m.moe.expert_ffn_hidden % p.expert_tp() != 0 || p.tp % p.expert_tp() != 0))
    return Broken("etp=" + std::to_string(p.expert_tp()) +
                  " must divide tp and the expert FFN width");
  if (p.pp > m.layers)
    return Broken("pp=" + std::to_string(p.pp) + " exceeds the " + std::to_string(m.layers) +
                  " layers");
  if (p.vpp > 1 && (p.pp == 1 || int64_t{p.pp} * p.vpp > m.layers)) {
    return Broken("interleaving needs pp > 1 and pp x vpp <= layers");
  }
  if (p.cp > 1 && m.seq_len % (2 * p.cp) != 0)
    return Broken("2 x cp must divide the sequence length");
  if (!m.is_moe() && p.ep != 1) return Broken("ep > 1 needs a mixture-of-experts model");
  if (!m.is_moe() && p.etp > 0 && p.etp != p.tp)
    return Broken("etp needs a mixture-of-experts model");
  if (m.is_moe() && (m.moe.experts % p.ep != 0 || (p.expert_tp() == p.tp && p.dp % p.ep != 0) ||
                     (int64_t{p.tp} * p.cp * p.dp) % (int64_t{p.expert_tp()} * p.ep) != 0)) {
    return Broken("ep=" + std::to_string(p.ep) +
                  " must divide the experts and dp (or, with etp < tp, tp x cp x dp / etp)");
  }
  return Status::Ok();
}

}  // namespace

Status CheckPlan(const Job& job, int64_t gpus, const Plan& p) {
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1 || p.ep < 1 || p.vpp < 1 || p.micro_batch < 1) {
    return Broken("every degree and the micro-batch must be at least 1");
  }
  if (p.zero < 0 || p.zero > 3) return Broken("zero must be 0, 1, 2 or 3");
  if (p.gpus() != gpus) {
    return Broken("tp x pp x dp x cp = " + std::to_string(p.gpus()) + ", not the " +
                  std::to_string(gpus) + " GPUs");
  }
  UNIPOOL_RETURN_IF_ERROR(CheckModelSplit(job.model, p));
  const int64_t per_step = int64_t{p.dp} * p.micro_batch;
  if (job.global_batch % per_step != 0) {
    return Broken("dp x micro-batch = " + std::to_string(per_step) +
                  " does not divide the global batch of " + std::to_string(job.global_batch));
  }
  if (p.vpp > 1 && (job.global_batch / per_step) % p.pp != 0) {
    return Broken("interleaving needs the number of micro-batches to be a multiple of pp");
  }
  return Status::Ok();
}

// ---- Collectives -----------------------------------------------------------

int64_t MembersWithin(const HardwareView& hw, const GroupShape& g, int t) {
  const int64_t span = hw.tiers[t].group_gpus;
  auto within = [span](int64_t size, int64_t stride) {
    if (size <= 1) return int64_t{1};
    return stride >= span ? int64_t{1} : std::min(size, std::max<int64_t>(1, span / stride));
  };
  return std::min(g.members(), within(g.size, g.stride) * within(g.size2, g.stride2));
}

double RingAllReduceSeconds(double bytes, int64_t n, double bytes_per_s, double latency_s) {
  if (n <= 1) return 0;
  const double k = static_cast<double>(n - 1);
  return 2 * k / n * bytes / bytes_per_s + 2 * k * latency_s;
}

std::vector<int32_t> ChunkLayers(int32_t layers, int32_t pp, int32_t vpp) {
  const int32_t chunks = pp * vpp;
  std::vector<int32_t> sizes(static_cast<size_t>(chunks), layers / chunks);
  for (int32_t j = 0; j < layers % chunks; ++j) ++sizes[static_cast<size_t>(j)];
  return sizes;
}

int32_t MaxStageLayers(int32_t layers, int32_t pp) { return (layers + pp - 1) / pp; }

double BubbleFraction(int64_t p, int64_t v, int64_t m) {
  return static_cast<double>(p - 1) / (static_cast<double>(v) * m);
}

namespace {

// Bandwidth one GPU reaches across tier t, after NCCL's efficiency.
double LinkBw(const HardwareView& hw, int t) {
  return hw.tiers[t].bytes_per_s * (t == 0 ? kScaleUpLinkEfficiency : kScaleOutLinkEfficiency);
}

// Members of the group per tier group, lowest tier first, up to the first
// tier that holds the whole group. Returns that tier.
struct Span {
  std::array<int64_t, 16> within{};  // members inside one group of tier t
  int top = 0;
};

Span SpanOf(const HardwareView& hw, const GroupShape& g) {
  Span s;
  const int tiers = std::min<int>(static_cast<int>(hw.tiers.size()), 16);
  for (int t = 0; t < tiers; ++t) {
    s.within[t] = MembersWithin(hw, g, t);
    s.top = t;
    if (s.within[t] >= g.members()) break;
  }
  return s;
}

// The narrowest edge of a flat ring: NVLink inside tier 0, and at tier t >= 1
// the aggregate uplinks of the group members inside one tier-(t-1) group.
double RingBandwidth(const HardwareView& hw, const Span& s, bool aggregate) {
  double bw = std::numeric_limits<double>::infinity();
  if (s.within[0] > 1) bw = LinkBw(hw, 0);
  for (int t = 1; t <= s.top; ++t) {
    if (s.within[t] > s.within[t - 1]) {
      const double links = aggregate ? static_cast<double>(s.within[t - 1]) : 1.0;
      bw = std::min(bw, links * LinkBw(hw, t));
    }
  }
  return bw;
}

// Ring, hierarchical and tree times of a reduce (all-reduce: passes = 2;
// reduce-scatter or all-gather: passes = 1); returns the cheapest.
CommCost ReduceTime(const HardwareView& hw, const Span& s, int64_t n, double bytes, int passes,
                    bool aggregate) {
  const double alpha_top = hw.tiers[s.top].latency_s;
  const double k = static_cast<double>(n - 1);
  CommCost best;
  best.top_tier = s.top;
  best.algorithm = Algorithm::kRing;
  best.seconds = passes * (k / n * bytes / RingBandwidth(hw, s, aggregate) + k * alpha_top) +
                 kCollectiveOverheadS;
  // Hierarchical: a ring per tier, each on the data left by the tier below.
  double hier = kCollectiveOverheadS;
  int64_t below = 1;
  for (int t = 0; t <= s.top; ++t) {
    const double m = static_cast<double>(s.within[t]) / below;
    if (m > 1) {
      hier +=
          passes * ((m - 1) / m * bytes / below / LinkBw(hw, t) + (m - 1) * hw.tiers[t].latency_s);
    }
    below = s.within[t];
  }
  if (aggregate && hier < best.seconds) {  // a node-level algorithm: needs the node's links
    best.seconds = hier;
    best.algorithm = Algorithm::kHierarchical;
  }
  if (passes == 2) {  // NCCL double binary tree: full bandwidth, log-depth latency
    const double tree = 2 * bytes / RingBandwidth(hw, s, aggregate) +
                        2 * std::ceil(std::log2(static_cast<double>(n))) * alpha_top +
                        kCollectiveOverheadS;
    if (tree < best.seconds) {
      best.seconds = tree;
      best.algorithm = Algorithm::kTree;
    }
  }
  return best;
}

CommCost AllToAllTime(const HardwareView& hw, const Span& s, int64_t n, double bytes) {
  double t_max = 0;
  int64_t below = 1;
  for (int t = 0; t <= s.top; ++t) {
    // Traffic leaving a tier-(t-1) group crosses tier t's links.
    const double crossing = static_cast<double>(std::min(s.within[t], n) - below) / n * bytes;
    if (crossing > 0) t_max = std::max(t_max, crossing / LinkBw(hw, t));
    below = s.within[t];
  }
  const double latency =
      hw.tiers[s.top].latency_s + kCollectiveOverheadS + (n - 1) * kAllToAllPerPeerS;
  return {t_max + latency, s.top, Algorithm::kDirect};
}

}  // namespace

CommCost CollectiveTime(const HardwareView& hw, Collective c, const GroupShape& g, double bytes,
                        bool aggregate_uplinks) {
  const int64_t n = g.members();
  if (n <= 1 || bytes <= 0) return {};
  const Span s = SpanOf(hw, g);
  switch (c) {
    case Collective::kAllReduce:
      return ReduceTime(hw, s, n, bytes, 2, aggregate_uplinks);
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      return ReduceTime(hw, s, n, bytes, 1, aggregate_uplinks);
    case Collective::kAllToAll:
      return AllToAllTime(hw, s, n, bytes);
    case Collective::kP2P:
      return {bytes / LinkBw(hw, s.top) + hw.tiers[s.top].latency_s + kCollectiveOverheadS, s.top,
              Algorithm::kDirect};
  }
  return {};
}

// ---- Memory ----------------------------------------------------------------

ModelStateBytes ModelState(double params, int32_t zero, int64_t dp) {
  const double d = static_cast<double>(std::max<int64_t>(1, dp));
  ModelStateBytes b;
  b.weights = params * kWeightBytes / (zero >= 3 ? d : 1);
  b.grads = params * kGradBytes / (zero >= 2 ? d : 1);
  b.optimizer = params * kOptimizerBytes / (zero >= 1 ? d : 1);
  return b;
}

double LayerActivationBytes(const ModelSpec& m, const Plan& p, bool moe_layer, bool flash,
                            Recompute recompute) {
  const double t = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double sbh = static_cast<double>(p.micro_batch) * m.seq_len / p.cp * m.hidden;
  const double tokens = static_cast<double>(p.micro_batch) * m.seq_len / p.cp;
  if (recompute == Recompute::kFull) return kActBytes * sbh / (sp ? t : 1);
  // Replicated across TP ranks without SP (Korthikanti's "10"): two layer-norm
  // inputs (4), attention and MLP inputs (2 + 2), two dropout masks (1 + 1).
  const double replicated = 10 * sbh;
  // Sharded by TP: Q, K, V, the attention output, and the FFN.
  const double q = static_cast<double>(m.q_dim()), kv = static_cast<double>(m.kv_dim());
  double sharded = kActBytes * tokens * (2 * q + 2 * kv);
  const double width =
      moe_layer ? static_cast<double>(m.moe.expert_ffn_hidden) : static_cast<double>(m.ffn_hidden);
  const double per_token_ffn = kActBytes * width * (m.activation == FfnActivation::kSwiglu ? 3 : 2);
  const double ffn_tokens = moe_layer ? tokens * (m.moe.top_k + m.moe.shared_experts) : tokens;
  sharded += per_token_ffn * ffn_tokens;
  if (moe_layer) sharded += kActBytes * tokens * m.moe.top_k * m.hidden;  // dispatched copies
  // Attention scores: softmax output (2), dropout mask (1), dropout output (2)
  // per score; each of the s/cp local queries sees all s keys.
  double scores = 0;
  if (!flash && recompute == Recompute::kNone) {
    scores = 5.0 * m.heads * tokens * static_cast<double>(m.seq_len);
  }
  return replicated / (sp ? t : 1) + (sharded + scores) / t;
}

// ---- Evaluation ------------------------------------------------------------

Duration TimeBreakdown::exposed_comm() const {
  Duration d;
  for (const Duration& c : comm) d += c;
  return d;
}

namespace {

Duration Nanos(double seconds) { return Duration(std::llround(seconds * 1e9)); }

// Rank strides of each dimension in the plan's rank order.
struct Strides {
  int64_t tp = 1, cp = 1, dp = 1, pp = 1;
};

Strides StridesOf(const Plan& p) {
  Strides s;
  s.cp = p.tp;
  if (p.order == RankOrder::kTpCpDpPp) {
    s.dp = int64_t{p.tp} * p.cp;
    s.pp = s.dp * p.dp;
  } else {
    s.pp = int64_t{p.tp} * p.cp;
    s.dp = s.pp * p.pp;
  }
  return s;
}

// Everything one layer of one kind costs per micro-batch on one GPU.
struct LayerCost {
  double fwd = 0, bwd = 0, rc = 0;  // compute
  double tp_total = 0, tp_exposed = 0;
  double cp_total = 0, cp_exposed = 0;
  double ep_total = 0, ep_exposed = 0;
  double gemm_eff = 0;
  int tp_tier = -1, cp_tier = -1, ep_tier = -1;
};

struct Context {
  const Job& job;
  const HardwareView& hw;
  const Plan& plan;
  GpuEfficiency eff;
  Strides strides;
  double peak = 0;       // FLOP/s of the GEMMs (the FP8 peak with FP8)
  double peak_bf16 = 0;  // FLOP/s of the attention core: Transformer Engine's FP8 recipes
                         // keep the fused attention in BF16
  bool fp8 = false;      // FP8 GEMMs in effect (the job asks and the GPU has them)
  double hbm = 0;     // bytes/s reached by element-wise kernels
  double tokens = 0;  // per micro-batch per GPU (s b / cp)
};

// The EP group of one expert layer. ETP = TP: EP is carved out of DP (ep
// ranks one DP stride apart). ETP < TP (Megatron-Core's parallel folding):
// the group takes the tp/etp TP ranks first (stride etp), then DP ranks.
GroupShape ExpertGroup(const Context& c) {
  const Plan& p = c.plan;
  if (p.expert_tp() == p.tp) return {p.ep, c.strides.dp};
  const int64_t inner = std::min<int64_t>(p.ep, p.tp / p.expert_tp());
  return {inner, p.expert_tp(), p.ep / inner, c.strides.dp};
}

// The replicas of one expert, over which its gradients are reduced.
GroupShape ExpertReplicas(const Context& c) {
  const Plan& p = c.plan;
  if (p.expert_tp() == p.tp) return {p.cp, c.strides.cp, p.dp / p.ep, c.strides.dp * p.ep};
  const int64_t tp_folded = std::min<int64_t>(p.ep, p.tp / p.expert_tp());
  const int64_t dp_in_ep = p.ep / tp_folded;  // DP ranks the EP group spans
  return {p.expert_dp(), c.strides.dp * dp_in_ep};
}

double GemmEfficiency(const Context& c, double dim) {
  return c.eff.gemm_max * dim / (dim + kGemmHalfDim) * (c.fp8 ? c.eff.fp8_vs_bf16 : 1);
}

double GemmSeconds(const Context& c, double flops, double dim) {
  return flops / (c.peak * GemmEfficiency(c, dim));
}

// The routed experts' grouped GEMM: many small GEMMs with uneven token counts
// (kGroupedGemmHalfDim) on the most loaded rank (kMoeLoadImbalance).
double GroupedGemmSeconds(const Context& c, double flops, double dim) {
  const double eff =
      c.eff.gemm_max * dim / (dim + kGroupedGemmHalfDim) * (c.fp8 ? c.eff.fp8_vs_bf16 : 1);
  return kMoeLoadImbalance * flops / (c.peak * eff);
}

// Forward GEMM and attention-core seconds of one layer.
struct ForwardParts {
  double gemm = 0, attention = 0, elementwise = 0, scores_elementwise = 0, gemm_eff = 0;
  double every_other_gemm = 0;  // the projections op-level SAC recomputes
};

// Of the layer's projections in forward order (Q, K, V, output; gate, up,
// down), the share of the FLOPs in the even-numbered ones: K, the output and
// the second FFN matrix (torchtitan's "every second mm").
double EveryOtherShare(const ModelSpec& m, double attn_params, double ffn_params) {
  const double h = static_cast<double>(m.hidden);
  const double attn_even = h * static_cast<double>(m.kv_dim() + m.q_dim());
  const double ffn_matrices = m.activation == FfnActivation::kSwiglu ? 3 : 2;
  return (attn_even + ffn_params / ffn_matrices) / (attn_params + ffn_params);
}

ForwardParts LayerForward(const Context& c, bool moe_layer) {
  const ModelSpec& m = c.job.model;
  const Plan& p = c.plan;
  const double t = p.tp, T = c.tokens, h = static_cast<double>(m.hidden);
  const ParamCounts pc = CountParams(m);
  ForwardParts f;
  const double attn_dim = std::min({T, static_cast<double>(m.q_dim()) / t, h});
  const double attn_flops = 2 * T * pc.attention_per_layer / t;
  f.gemm = GemmSeconds(c, attn_flops, attn_dim);
  double ffn_flops = 0;
  if (!moe_layer) {
    ffn_flops = 2 * T * pc.dense_ffn_per_layer / t;
    f.gemm += GemmSeconds(c, ffn_flops, std::min({T, m.ffn_hidden / t, h}));
    f.every_other_gemm =
        f.gemm * EveryOtherShare(m, pc.attention_per_layer, pc.dense_ffn_per_layer);
  } else {
    // The experts' grouped GEMMs are no aten.mm: only the attention's count.
    f.every_other_gemm = f.gemm * EveryOtherShare(m, pc.attention_per_layer, 0);
    // Tokens per local expert: with etp < tp each rank dispatches its own
    // sequence-parallel share and holds whole (etp-split) experts.
    const double etp = p.expert_tp();
    const double routed_tokens = T * m.moe.top_k * p.ep / m.moe.experts * etp / t;
    const double fe = static_cast<double>(m.moe.expert_ffn_hidden);
    ffn_flops = 2 * T * (m.moe.top_k + m.moe.shared_experts) * pc.expert_ffn / t;
    f.gemm += GroupedGemmSeconds(c, 2 * T * m.moe.top_k * pc.expert_ffn / t,
                                 std::min({routed_tokens, fe / etp, h}));
    f.gemm +=
        GemmSeconds(c, 2 * T * m.moe.shared_experts * pc.expert_ffn / t, std::min({T, fe / t, h}));
    f.gemm += GemmSeconds(c, 2 * T * pc.router_per_layer, std::min(T, h));
  }
  f.gemm_eff = (attn_flops + ffn_flops) / (c.peak * f.gemm);
  // Attention core: QK^T and AV, 4 T s q / t; causal kernels skip half.
  const bool flash = c.job.framework.flash_attention;
  const double core = 4 * T * static_cast<double>(m.seq_len) * m.q_dim() / t;
  const double head = static_cast<double>(m.head_size());
  f.attention = flash ? 0.5 * core / (c.peak_bf16 * c.eff.attention)
                      : core / (c.peak_bf16 * c.eff.gemm_max * head / (head + kGemmHalfDim));
  const double act = LayerActivationBytes(m, p, moe_layer, flash, Recompute::kNone);
  const double act_sel = LayerActivationBytes(m, p, moe_layer, flash, Recompute::kSelective);
  const double fusion = c.job.framework.fused_elementwise ? 1 : kEagerElementwiseFactor;
  f.elementwise = fusion * kElementwiseTrafficPerActByte * act / c.hbm;
  if (moe_layer) {
    // Token permute before dispatch and unpermute after combine: each reads
    // and writes the top-k copies of this rank's tokens.
    const bool sp = p.sequence_parallel && p.tp > 1;
    const double copies = kActBytes * T / (sp ? t : 1) * m.moe.top_k * h;
    f.elementwise += kPermutePasses * copies / c.hbm;
  }
  f.scores_elementwise = kElementwiseTrafficPerActByte * (act - act_sel) / c.hbm;
  return f;
}

LayerCost CostLayer(const Context& c, bool moe_layer) {
  const ModelSpec& m = c.job.model;
  const Plan& p = c.plan;
  const Framework& fw = c.job.framework;
  const ForwardParts f = LayerForward(c, moe_layer);
  LayerCost l;
  l.gemm_eff = f.gemm_eff;
  l.fwd = f.gemm + f.attention + f.elementwise;
  const double attn_bwd = f.attention * (fw.flash_attention ? kFlashBackwardFactor : 2.0);
  l.bwd = 2 * f.gemm + attn_bwd + 2 * f.elementwise;
  if (p.recompute == Recompute::kFull) l.rc = l.fwd;
  if (p.recompute == Recompute::kSelective) {
    l.rc = fw.selective_every_other_matmul ? f.every_other_gemm + f.elementwise
                                           : f.attention + f.scores_elementwise;
  }
  const int passes = p.recompute == Recompute::kFull ? 3 : 2;  // fwd, bwd, recompute
  const double act_msg = kActBytes * c.tokens * m.hidden;
  if (p.tp > 1) {
    const CommCost ar = CollectiveTime(c.hw, Collective::kAllReduce, {p.tp, 1}, act_msg);
    l.tp_total = 2.0 * passes * ar.seconds;  // two per pass (attention, MLP)
    // Userbuffer overlap needs the TP group inside one scale-up domain.
    const bool overlap = fw.tp_comm_overlap && ar.top_tier == 0;
    l.tp_exposed = l.tp_total * (overlap ? 1 - kTpOverlapFraction : 1);
    l.tp_tier = ar.top_tier;
  }
  if (p.cp > 1) {  // ring attention: gather K and V of every chunk
    // Of its TP rank's heads only: kv_heads / tp of them, or one (replicated)
    // when there are fewer KV heads than TP ranks.
    const double kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / p.tp);
    const double kv = 2 * kActBytes * c.tokens * kv_heads * m.head_size() * p.cp;
    const CommCost ag = CollectiveTime(c.hw, Collective::kAllGather, {p.cp, c.strides.cp}, kv);
    l.cp_total = ag.seconds * (passes + 1);  // backward also reduce-scatters dK, dV
    l.cp_exposed = std::max(0.0, ag.seconds - f.attention) +
                   std::max(0.0, 2 * ag.seconds - attn_bwd) +
                   (passes == 3 ? std::max(0.0, ag.seconds - f.attention) : 0);
    l.cp_tier = ag.top_tier;
  }
  if (moe_layer && p.ep > 1) {  // dispatch and combine, each pass
    const bool sp = p.sequence_parallel && p.tp > 1;
    const double msg = kActBytes * c.tokens * m.moe.top_k * m.hidden / (sp ? p.tp : 1);
    CommCost a2a = CollectiveTime(c.hw, Collective::kAllToAll, ExpertGroup(c), msg);
    if (a2a.top_tier >= 1 && m.router.group_top_k > 0 && m.router.group_top_k < m.moe.top_k) {
      // Node-limited routing (DeepSeek-V3 section 2.1.2: a token reaches at most
      // M = 4 nodes) with node-deduplicated dispatch (DeepEP): a token crosses
      // the network once per node, not once per expert.
      a2a = CollectiveTime(c.hw, Collective::kAllToAll, ExpertGroup(c),
                           msg * m.router.group_top_k / m.moe.top_k);
    }
    l.ep_total = 2.0 * passes * a2a.seconds;
    // With EP overlap a forward and a backward micro-batch interleave, so one's
    // all-to-all runs under the other's compute (kEpOverlapFraction of it).
    const double hide = fw.ep_overlap ? kEpOverlapFraction * (l.fwd + l.bwd + l.rc) : 0;
    l.ep_exposed = std::max(0.0, l.ep_total - hide);
    l.ep_tier = a2a.top_tier;
  }
  return l;
}

// Parameters on one GPU of the heaviest stage: dense (replicated over DP x CP)
// and expert (replicated over DP x CP / EP).
struct StageParams {
  double dense = 0, expert = 0;
  double layers = 0, dense_layers = 0, moe_layers = 0;
  double largest_layer = 0;  // one layer's parameters on this GPU (ZeRO-3 gathers)
};

StageParams StageParamsOf(const ModelSpec& m, const Plan& p) {
  const ParamCounts pc = CountParams(m);
  StageParams s;
  // The layers are dealt to the p x v chunks as evenly as possible and the
  // larger chunks round-robin over the stages (StageLayout), so the heaviest
  // stage holds ceil(L / p) layers whatever v is.
  s.layers = static_cast<double>(MaxStageLayers(m.layers, p.pp));
  const double moe_share = static_cast<double>(m.moe_layers()) / m.layers;
  s.moe_layers = s.layers * moe_share;
  s.dense_layers = s.layers - s.moe_layers;
  const double t = p.tp;
  const double shared = m.moe.shared_experts * pc.expert_ffn + pc.router_per_layer;
  s.dense = (s.layers * (pc.attention_per_layer + pc.norms_per_layer) +
             s.dense_layers * pc.dense_ffn_per_layer + s.moe_layers * shared) /
            t;
  // Embedding on the first stage, output layer (or the tied copy) on the last.
  s.dense += (p.pp == 1 ? pc.embedding + pc.output : pc.embedding) / t;
  const double ep_etp = static_cast<double>(p.ep) * p.expert_tp();
  s.expert = s.moe_layers * m.moe.experts * pc.expert_ffn / ep_etp;
  const double moe_layer = (m.moe.experts * pc.expert_ffn) / ep_etp + shared / t;
  const double dense_layer = pc.dense_ffn_per_layer / t;
  s.largest_layer = pc.attention_per_layer / t + std::max(m.is_moe() ? moe_layer : 0.0,
                                                          m.dense_layers() > 0 ? dense_layer : 0.0);
  return s;
}

// Activations of the stage that keeps the most (first stage: in-flight
// micro-batches; last stage: the logits).
double StageActivations(const Context& c, const StageParams& sp, int64_t micro_batches) {
  const ModelSpec& m = c.job.model;
  const Plan& p = c.plan;
  const bool flash = c.job.framework.flash_attention;
  const double per_layer =
      (sp.dense_layers * LayerActivationBytes(m, p, false, flash, p.recompute) +
       sp.moe_layers * LayerActivationBytes(m, p, true, flash, p.recompute)) /
      sp.layers;
  const double chunk_layers = sp.layers / p.vpp;
  // Micro-batch chunks the first stage holds: p for 1F1B, Megatron's
  // interleaved warm-up 2(p-1) + (v-1) p, plus the one in flight.
  const int64_t chunks = p.vpp == 1 ? std::min<int64_t>(micro_batches, p.pp)
                                    : std::min<int64_t>(micro_batches * p.vpp,
                                                        2 * (p.pp - 1) + (p.vpp - 1) * p.pp + 1);
  const double logits =
      kLogitActivationBytes * c.tokens * m.vocab / p.tp;  // fp32 logits for the loss
  double first = chunks * chunk_layers * per_layer;
  double last =
      (p.pp == 1 ? first : chunk_layers * per_layer * (p.vpp == 1 ? 1 : (p.vpp - 1) * p.pp + 1)) +
      logits;
  if (p.pp == 1) first = last;
  double working = 0;  // one layer's full activations while it is recomputed
  if (p.recompute != Recompute::kNone) {
    working = LayerActivationBytes(m, p, m.is_moe(), flash, Recompute::kNone);
  }
  return std::max(first, last) + working;
}

MemoryBreakdown MemoryOf(const Context& c, const StageParams& sp, int64_t micro_batches) {
  const Plan& p = c.plan;
  const int64_t dp_dense = int64_t{p.dp} * p.cp;
  const int64_t dp_expert = p.expert_dp();
  const ModelStateBytes d = ModelState(sp.dense, p.zero, dp_dense);
  const ModelStateBytes e = ModelState(sp.expert, p.zero, dp_expert);
  double buffers = 0;
  if (p.zero == 3) buffers += kWeightBytes * sp.largest_layer;  // the gathered layer
  if (c.job.model.is_moe() && p.ep > 1) {
    buffers += 2 * kActBytes * c.tokens * c.job.model.moe.top_k * c.job.model.hidden;
  }
  MemoryBreakdown mem;
  mem.weights = Bytes(std::llround(d.weights + e.weights));
  mem.grads = Bytes(std::llround(d.grads + e.grads));
  mem.optimizer = Bytes(std::llround(d.optimizer + e.optimizer));
  mem.activations = Bytes(std::llround(StageActivations(c, sp, micro_batches)));
  mem.buffers = Bytes(std::llround(buffers));
  mem.reserve = Bytes(std::llround(kRuntimeReserveBytes));
  mem.total = mem.weights + mem.grads + mem.optimizer + mem.activations + mem.buffers + mem.reserve;
  mem.usable = c.hw.gpu.hbm;
  return mem;
}

Context MakeContext(const Job& job, const HardwareView& hw, const Plan& plan) {
  Context c{job, hw, plan, EfficiencyOf(hw.gpu, job.framework), StridesOf(plan)};
  const bool fp8 = job.framework.fp8 && hw.gpu.peak_fp8.value() > 0;
  c.peak = static_cast<double>(fp8 ? hw.gpu.peak_fp8.value() : hw.gpu.peak_bf16.value()) * 1e9;
  c.peak_bf16 = static_cast<double>(hw.gpu.peak_bf16.value()) * 1e9;
  c.fp8 = fp8;
  c.hbm = static_cast<double>(hw.gpu.hbm_bandwidth.value()) / 8 * kHbmEfficiency;
  if (c.hbm <= 0) c.hbm = 1e12;
  c.tokens = static_cast<double>(plan.micro_batch) * job.model.seq_len / plan.cp;
  return c;
}

// Data-parallel synchronisation of one step: gradient reduction and (ZeRO)
// parameter gathers, with what the backward/forward of a micro-batch hides.
struct DpCost {
  double grad_total = 0, grad_exposed = 0, param_total = 0, param_exposed = 0;
  int tier = -1;
};

DpCost DataParallelCost(const Context& c, const StageParams& sp, int64_t m, double fwd_mb,
                        double bwd_mb) {
  const Plan& p = c.plan;
  DpCost r;
  const GroupShape dense{p.cp, c.strides.cp, p.dp, c.strides.dp};
  const GroupShape expert = ExpertReplicas(c);
  const bool overlap = c.job.framework.dp_overlap;
  const double hide_bwd = overlap ? kDpOverlapFraction * bwd_mb : 0;
  const double hide_fwd = overlap ? kDpOverlapFraction * fwd_mb : 0;
  // ZeRO-3 gathers and scatters parameter by parameter: see kZero3NodeAggregation.
  const bool aggregate = p.zero < 3 || c.job.framework.zero3_node_aggregation;
  auto time = [&](Collective k, double params) {
    const CommCost a = CollectiveTime(c.hw, k, dense, params * kGradBytes, aggregate);
    const CommCost b = CollectiveTime(c.hw, k, expert, sp.expert * kGradBytes, aggregate);
    r.tier = std::max({r.tier, a.top_tier, b.top_tier});
    return a.seconds + b.seconds;
  };
  if (p.zero == 0) {
    r.grad_total = time(Collective::kAllReduce, sp.dense);
    r.grad_exposed = std::max(0.0, r.grad_total - hide_bwd);
  } else if (p.zero <= 2) {
    const double rs = time(Collective::kReduceScatter, sp.dense);
    const int64_t times = p.zero == 2 ? m : 1;  // ZeRO-2 reduces every micro-batch
    r.grad_total = times * rs;
    r.grad_exposed = times * std::max(0.0, rs - hide_bwd);
    r.param_total = time(Collective::kAllGather, sp.dense);
    r.param_exposed = std::max(0.0, r.param_total - hide_fwd);
  } else {  // ZeRO-3: gather for forward, recompute and backward, every micro-batch
    const double rs = time(Collective::kReduceScatter, sp.dense);
    const double ag = time(Collective::kAllGather, sp.dense);
    const int gathers_bwd = p.recompute == Recompute::kFull ? 2 : 1;
    r.grad_total = m * rs;
    r.param_total = m * ag * (1 + gathers_bwd);
    const double exposed_fwd = std::max(0.0, ag - hide_fwd);
    const double exposed_bwd = std::max(0.0, gathers_bwd * ag + rs - hide_bwd);
    const double share = rs / (gathers_bwd * ag + rs);
    r.grad_exposed = m * exposed_bwd * share;
    r.param_exposed = m * (exposed_fwd + exposed_bwd * (1 - share));
  }
  return r;
}

}  // namespace

MemoryBreakdown EstimateMemory(const Job& job, const HardwareView& hw, const Plan& plan) {
  const Context c = MakeContext(job, hw, plan);
  const int64_t m = job.global_batch / (int64_t{plan.dp} * plan.micro_batch);
  return MemoryOf(c, StageParamsOf(job.model, plan), m);
}

Estimate EvaluateUnchecked(const Job& job, const HardwareView& hw, const Plan& plan) {
  const Context c = MakeContext(job, hw, plan);
  const ModelSpec& model = job.model;
  const int64_t m = job.global_batch / (int64_t{plan.dp} * plan.micro_batch);
  const StageParams sp = StageParamsOf(model, plan);

  // Phase 1: one micro-batch through the slowest stage.
  const LayerCost dense = CostLayer(c, false);
  const LayerCost moe = model.is_moe() ? CostLayer(c, true) : LayerCost{};
  auto sum = [&](double LayerCost::*f) {
    return sp.dense_layers * dense.*f + sp.moe_layers * moe.*f;
  };
  const double logit_fwd =
      GemmSeconds(c, 2 * c.tokens * model.hidden * model.vocab / plan.tp,
                  std::min<double>({c.tokens, static_cast<double>(model.hidden),
                                    static_cast<double>(model.vocab) / plan.tp}));
  const double loss_bytes = job.framework.fused_cross_entropy ? kLossTrafficBytesPerLogit
                                                              : kUnfusedLossTrafficBytesPerLogit;
  const double logit_elem = loss_bytes * c.tokens * model.vocab / plan.tp / c.hbm;  // fp32 loss
  const double logits = 3 * logit_fwd + logit_elem;
  const double fwd_mb = sum(&LayerCost::fwd), bwd_mb = sum(&LayerCost::bwd);
  double pp_msg = 0;
  CommCost p2p;
  const bool split = job.framework.pp_p2p_split_overlapped;
  if (plan.pp > 1) {
    pp_msg = kActBytes * c.tokens * model.hidden / (split ? plan.tp : 1);
    p2p = CollectiveTime(hw, Collective::kP2P, {2, c.strides.pp}, pp_msg);
  }
  // Per micro-batch and chunk: an activation forward and a gradient back;
  // blocking, each stage also waits for the two it receives.
  const double p2p_total_mb = (split ? 2.0 : 4.0) * plan.vpp * p2p.seconds;
  double p2p_mb = p2p_total_mb;
  if (job.framework.pp_overlap && plan.vpp > 1) {  // each send under its chunk's compute
    const double v = plan.vpp;
    p2p_mb =
        v * (std::max(0.0, p2p.seconds - fwd_mb / v) + std::max(0.0, p2p.seconds - bwd_mb / v));
  }
  const double compute_mb = fwd_mb + bwd_mb + logits;
  const double rc_mb = sum(&LayerCost::rc);
  const double tp_mb = sum(&LayerCost::tp_exposed), cp_mb = sum(&LayerCost::cp_exposed);
  const double ep_mb = sum(&LayerCost::ep_exposed);
  const double stage_mb = compute_mb + rc_mb + tp_mb + cp_mb + ep_mb + p2p_mb;

  // Phase 2: the pipeline schedule.
  const double bubble = static_cast<double>(plan.pp - 1) / plan.vpp * stage_mb;

  // Phase 3: data-parallel synchronisation and the optimizer.
  const DpCost dp = DataParallelCost(c, sp, m, fwd_mb, bwd_mb);
  const int64_t dp_dense = int64_t{plan.dp} * plan.cp;
  const double updated =
      plan.zero >= 1 ? sp.dense / dp_dense + sp.expert / plan.expert_dp() : sp.dense + sp.expert;
  const double optimizer = updated * kOptimizerTrafficBytes / c.hbm;

  // Phase 4: assemble.
  Estimate e;
  TimeBreakdown& tb = e.time;
  const double md = static_cast<double>(m);
  tb.compute = Nanos(md * compute_mb);
  tb.recompute = Nanos(md * rc_mb);
  auto set = [&](CommPart part, double exposed, double total, int tier) {
    tb.comm[static_cast<size_t>(part)] = Nanos(exposed);
    tb.comm_total[static_cast<size_t>(part)] = Nanos(total);
    tb.comm_tier[static_cast<size_t>(part)] = total > 0 ? tier : -1;
  };
  set(CommPart::kTp, md * tp_mb, md * sum(&LayerCost::tp_total),
      std::max(dense.tp_tier, moe.tp_tier));
  set(CommPart::kCp, md * cp_mb, md * sum(&LayerCost::cp_total),
      std::max(dense.cp_tier, moe.cp_tier));
  set(CommPart::kEp, md * ep_mb, md * sum(&LayerCost::ep_total), moe.ep_tier);
  set(CommPart::kPp, md * p2p_mb, md * p2p_total_mb, p2p.top_tier);
  set(CommPart::kDpGrad, dp.grad_exposed, dp.grad_total, dp.tier);
  set(CommPart::kDpParam, dp.param_exposed, dp.param_total, dp.tier);
  tb.bubble = Nanos(bubble);
  tb.optimizer = Nanos(optimizer + kStepOverheadS);
  tb.step = tb.compute + tb.recompute + tb.exposed_comm() + tb.bubble + tb.optimizer;

  e.memory = MemoryOf(c, sp, m);
  e.micro_batches = m;
  e.bubble_fraction = BubbleFraction(plan.pp, plan.vpp, m);
  e.step_s = ToSeconds(tb.step);
  const double gpus = static_cast<double>(plan.gpus());
  e.tokens_per_s = static_cast<double>(job.global_batch) * model.seq_len / e.step_s;
  e.tokens_per_s_per_gpu = e.tokens_per_s / gpus;
  const StepFlops flops =
      TrainingFlops(model, static_cast<double>(job.global_batch), plan.recompute);
  e.model_tflops_per_gpu = flops.model / e.step_s / gpus * 1e-12;
  const double peak = static_cast<double>(hw.gpu.peak_bf16.value()) * 1e9;
  e.mfu = flops.model / e.step_s / gpus / peak;
  e.hfu = flops.hardware() / e.step_s / gpus / peak;
  e.gemm_efficiency = dense.gemm_eff > 0 ? dense.gemm_eff : moe.gemm_eff;
  return e;
}

Result<Estimate> Evaluate(const Job& job, const HardwareView& hw, const Plan& plan) {
  UNIPOOL_RETURN_IF_ERROR(CheckPlan(job, hw.gpus, plan));
  return EvaluateUnchecked(job, hw, plan);
}

}  // namespace unipool::perf
