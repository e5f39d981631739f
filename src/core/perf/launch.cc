#include "core/perf/launch.h"

#include <algorithm>
#include <cstdio>

namespace unipool::perf {
namespace {

using Args = std::vector<std::pair<std::string, std::string>>;

// Megatron-Core's --pipeline-model-parallel-layout: one segment per model
// chunk in virtual-stage order, '|' between them; E = embedding, t =
// decoder layer, L = loss ("Custom Pipeline Model Parallel Layout",
// Megatron-Core user guide).
std::string PipelineLayout(const ModelSpec& m, const Plan& p) {
  const std::vector<int32_t> chunks = ChunkLayers(m.layers, p.pp, p.vpp);
  std::string s;
  for (size_t j = 0; j < chunks.size(); ++j) {
    if (j > 0) s += "|";
    std::string seg = j == 0 ? "E" : "";
    if (chunks[j] > 0) {
      if (!seg.empty()) seg += ",";
      seg += chunks[j] == 1 ? "t" : "t*" + std::to_string(chunks[j]);
    }
    if (j + 1 == chunks.size()) seg += seg.empty() ? "L" : ",L";
    s += seg;
  }
  return s;
}

void Parallelism(const Plan& p, const ModelSpec& m, Args& a) {
  a.push_back({"--tensor-model-parallel-size", std::to_string(p.tp)});
  a.push_back({"--pipeline-model-parallel-size", std::to_string(p.pp)});
  const int32_t chunks = p.pp * p.vpp;
  if (p.pp > 1 && m.layers % chunks != 0) {
    // Uneven chunks: the layout names every chunk's layers (the cost model
    // assumes the same layout, ChunkLayers).
    a.push_back({"--pipeline-model-parallel-layout", PipelineLayout(m, p)});
  } else if (p.vpp > 1) {
    a.push_back({"--num-layers-per-virtual-pipeline-stage", std::to_string(m.layers / chunks)});
  }
  if (p.cp > 1) a.push_back({"--context-parallel-size", std::to_string(p.cp)});
  if (p.ep > 1) a.push_back({"--expert-model-parallel-size", std::to_string(p.ep)});
  if (p.expert_tp() != p.tp) {
    a.push_back({"--expert-tensor-parallel-size", std::to_string(p.expert_tp())});
  }
  if (p.sequence_parallel && p.tp > 1) a.push_back({"--sequence-parallel", ""});
}

void Attention(const ModelSpec& m, Args& a) {
  a.push_back({"--num-attention-heads", std::to_string(m.heads)});
  if (m.mla.enabled()) {
    a.push_back({"--multi-latent-attention", ""});
    if (m.mla.q_lora_rank > 0) a.push_back({"--q-lora-rank", std::to_string(m.mla.q_lora_rank)});
    a.push_back({"--kv-lora-rank", std::to_string(m.mla.kv_lora_rank)});
    a.push_back({"--qk-head-dim", std::to_string(m.mla.qk_head_dim)});
    a.push_back({"--qk-pos-emb-head-dim", std::to_string(m.mla.qk_rope_head_dim)});
    a.push_back({"--v-head-dim", std::to_string(m.mla.v_head_dim)});
    return;
  }
  if (m.kv_heads != m.heads) {
    a.push_back({"--group-query-attention", ""});
    a.push_back({"--num-query-groups", std::to_string(m.kv_heads)});
  }
  if (m.head_dim > 0) a.push_back({"--kv-channels", std::to_string(m.head_dim)});
}

// Normalization, positions, biases, dropout, embeddings and the tokenizer:
// without them stock Megatron-LM builds a GPT-2-style network.
void Architecture(const ModelSpec& m, Args& a) {
  const perf::Architecture& x = m.arch;
  a.push_back({"--normalization", NormName(x.norm)});
  char eps[32];
  std::snprintf(eps, sizeof eps, "%g", x.norm_epsilon);
  a.push_back({"--norm-epsilon", eps});
  if (x.positions == PositionEmbedding::kRope) {
    a.push_back({"--position-embedding-type", "rope"});
    char base[32];
    std::snprintf(base, sizeof base, "%.0f", x.rotary_base);
    a.push_back({"--rotary-base", base});
  } else {
    a.push_back({"--position-embedding-type",
                 x.positions == PositionEmbedding::kLearned ? "learned_absolute" : "none"});
  }
  if (m.activation == FfnActivation::kSwiglu) a.push_back({"--swiglu", ""});
  if (!x.linear_bias) a.push_back({"--disable-bias-linear", ""});
  char drop[32];
  std::snprintf(drop, sizeof drop, "%g", x.dropout);
  a.push_back({"--attention-dropout", drop});
  a.push_back({"--hidden-dropout", drop});
  if (!m.tied_embeddings) a.push_back({"--untie-embeddings-and-output-weights", ""});
  if (x.tokenizer.empty()) {
    a.push_back({"--tokenizer-type", "NullTokenizer"});  // synthetic data; the vocabulary size
    a.push_back({"--vocab-size", std::to_string(m.vocab)});
  } else {
    a.push_back({"--tokenizer-type", "HuggingFaceTokenizer"});
    a.push_back({"--tokenizer-model", x.tokenizer});
  }
}

void Experts(const ModelSpec& m, Args& a) {
  if (!m.is_moe()) return;
  a.push_back({"--num-experts", std::to_string(m.moe.experts)});
  a.push_back({"--moe-router-topk", std::to_string(m.moe.top_k)});
  a.push_back({"--moe-ffn-hidden-size", std::to_string(m.moe.expert_ffn_hidden)});
  if (m.moe.shared_experts > 0) {
    a.push_back({"--moe-shared-expert-intermediate-size",
                 std::to_string(m.moe.shared_experts * m.moe.expert_ffn_hidden)});
  }
  if (m.moe.dense_layers > 0) {
    // [0]*k + [1]*(L-k): the first k layers keep a dense FFN.
    a.push_back({"--moe-layer-freq", "([0]*" + std::to_string(m.moe.dense_layers) + "+[1]*" +
                                         std::to_string(m.moe_layers()) + ")"});
  }
  const RouterSpec& r = m.router;
  if (r.sigmoid) {
    a.push_back({"--moe-router-score-function", "sigmoid"});
    a.push_back({"--moe-router-enable-expert-bias", ""});  // auxiliary-loss-free balancing
    a.push_back({"--moe-router-load-balancing-type", "seq_aux_loss"});
    a.push_back({"--moe-aux-loss-coeff", "0.0001"});
  } else {
    a.push_back({"--moe-router-load-balancing-type", "aux_loss"});
    a.push_back({"--moe-aux-loss-coeff", "0.01"});
  }
  if (r.groups > 0) {
    a.push_back({"--moe-router-num-groups", std::to_string(r.groups)});
    a.push_back({"--moe-router-group-topk", std::to_string(r.group_top_k)});
  }
  if (r.top_k_scaling > 0) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", r.top_k_scaling);
    a.push_back({"--moe-router-topk-scaling-factor", f});
  }
  a.push_back({"--moe-grouped-gemm", ""});
  a.push_back({"--moe-token-dispatcher-type", "alltoall"});
}

void Model(const ModelSpec& m, Args& a) {
  a.push_back({"--num-layers", std::to_string(m.layers)});
  a.push_back({"--hidden-size", std::to_string(m.hidden)});
  a.push_back({"--ffn-hidden-size", std::to_string(m.ffn_hidden)});
  Attention(m, a);
  a.push_back({"--seq-length", std::to_string(m.seq_len)});
  a.push_back({"--max-position-embeddings", std::to_string(m.seq_len)});
  Architecture(m, a);
  Experts(m, a);
  if (m.mtp_layers > 0) a.push_back({"--mtp-num-layers", std::to_string(m.mtp_layers)});
}

void Schedule(const Job& job, const Plan& p, int32_t gpus_per_node, Args& a) {
  a.push_back({"--micro-batch-size", std::to_string(p.micro_batch)});
  a.push_back({"--global-batch-size", std::to_string(job.global_batch)});
  if (p.recompute == Recompute::kSelective) {
    a.push_back({"--recompute-activations", ""});
  } else if (p.recompute == Recompute::kFull) {
    a.push_back({"--recompute-granularity", "full"});
    a.push_back({"--recompute-method", "uniform"});
    a.push_back({"--recompute-num-layers", "1"});
  }
  if (p.zero >= 1) a.push_back({"--use-distributed-optimizer", ""});
  if (p.zero >= 2)
    a.push_back({"--data-parallel-sharding-strategy",
                 "optim_grads" + std::string(p.zero == 3 ? "_params" : "")});
  if (p.zero >= 2) a.push_back({"--use-custom-fsdp", ""});
  if (job.framework.flash_attention) a.push_back({"--attention-backend", "flash"});
  a.push_back({"--bf16", ""});
  if (job.framework.fp8) a.push_back({"--fp8-format", "hybrid"});
  if (job.framework.dp_overlap && p.dp * p.cp > 1) {
    a.push_back({"--overlap-grad-reduce", ""});
    if (p.zero >= 1) a.push_back({"--overlap-param-gather", ""});
  }
  if (job.framework.tp_comm_overlap && p.tp > 1 && p.sequence_parallel &&
      p.tp <= gpus_per_node) {  // userbuffers work inside one node
    a.push_back({"--tp-comm-overlap", ""});
  }
  if (p.order == RankOrder::kTpCpPpDp && p.pp > 1 && p.dp > 1) {
    a.push_back({"--use-tp-pp-dp-mapping", ""});
  }
}

}  // namespace

namespace {

struct ArgView {
  const Args& a;
  const std::string* Find(const char* flag) const {
    for (const auto& [f, v] : a) {
      if (f == flag) return &v;
    }
    return nullptr;
  }
  bool Has(const char* flag) const { return Find(flag) != nullptr; }
  int64_t Int(const char* flag, int64_t def) const {
    const std::string* v = Find(flag);
    return v ? std::stoll(*v) : def;
  }
};

Status Rule(bool ok, const std::string& what) {
  return ok ? Status::Ok() : InvalidArgument("megatron: " + what);
}

// Layers per segment of a layout "E,t*4|t*4|...|t*3,L"; -1 when malformed.
std::vector<int64_t> LayoutLayers(const std::string& layout) {
  std::vector<int64_t> out(1, 0);
  for (size_t i = 0; i < layout.size(); ++i) {
    const char ch = layout[i];
    if (ch == '|') {
      out.push_back(0);
    } else if (ch == 't') {
      int64_t n = 1;
      if (i + 1 < layout.size() && layout[i + 1] == '*') {
        size_t used = 0;
        n = std::stoll(layout.substr(i + 2), &used);
        i += 1 + used;
      }
      out.back() += n;
    } else if (ch != 'E' && ch != 'L' && ch != ',') {
      return {-1};
    }
  }
  return out;
}

Status CheckPipelineArgs(const ArgView& v) {
  const int64_t layers = v.Int("--num-layers", 0), pp = v.Int("--pipeline-model-parallel-size", 1);
  if (const std::string* layout = v.Find("--pipeline-model-parallel-layout")) {
    const std::vector<int64_t> seg = LayoutLayers(*layout);
    int64_t total = 0;
    for (int64_t n : seg) total += n;
    UNIPOOL_RETURN_IF_ERROR(Rule(seg.front() >= 0, "malformed pipeline layout"));
    UNIPOOL_RETURN_IF_ERROR(
        Rule(static_cast<int64_t>(seg.size()) % pp == 0, "layout segments not a multiple of pp"));
    UNIPOOL_RETURN_IF_ERROR(Rule(total == layers, "the layout holds " + std::to_string(total) +
                                                      " layers, not " + std::to_string(layers)));
    return Rule(!v.Has("--num-layers-per-virtual-pipeline-stage"),
                "a layout and --num-layers-per-virtual-pipeline-stage together");
  }
  UNIPOOL_RETURN_IF_ERROR(
      Rule(layers % pp == 0, "num-layers must divide by pipeline-model-parallel-size"));
  if (const std::string* per = v.Find("--num-layers-per-virtual-pipeline-stage")) {
    const int64_t n = std::stoll(*per);
    UNIPOOL_RETURN_IF_ERROR(Rule(pp > 1, "virtual stages need pipeline-model-parallel-size > 1"));
    return Rule(n > 0 && (layers / pp) % n == 0,
                "layers per pipeline stage must divide by the virtual stage size");
  }
  return Status::Ok();
}

}  // namespace

Status CheckMegatronArgs(const Args& args, int64_t world) {
  const ArgView v{args};
  const int64_t tp = v.Int("--tensor-model-parallel-size", 1);
  const int64_t pp = v.Int("--pipeline-model-parallel-size", 1);
  const int64_t cp = v.Int("--context-parallel-size", 1);
  const int64_t ep = v.Int("--expert-model-parallel-size", 1);
  UNIPOOL_RETURN_IF_ERROR(Rule(world % (tp * pp * cp) == 0, "tp x pp x cp must divide the world"));
  const int64_t dp = world / (tp * pp * cp);
  const int64_t heads = v.Int("--num-attention-heads", 0);
  UNIPOOL_RETURN_IF_ERROR(Rule(heads % tp == 0, "attention heads must divide by tp"));
  if (v.Has("--group-query-attention")) {
    UNIPOOL_RETURN_IF_ERROR(
        Rule(v.Int("--num-query-groups", 1) % tp == 0, "query groups must divide by tp"));
  }
  UNIPOOL_RETURN_IF_ERROR(CheckPipelineArgs(v));
  if (v.Has("--num-experts")) {
    UNIPOOL_RETURN_IF_ERROR(Rule(v.Int("--num-experts", 0) % ep == 0, "experts must divide by ep"));
    UNIPOOL_RETURN_IF_ERROR(Rule(world % (ep * pp * v.Int("--expert-tensor-parallel-size", 1)) == 0,
                                 "expert-tensor x ep x pp must divide the world"));
  } else {
    UNIPOOL_RETURN_IF_ERROR(Rule(ep == 1, "expert parallelism without experts"));
  }
  const int64_t mbs = v.Int("--micro-batch-size", 1), gbs = v.Int("--global-batch-size", 0);
  UNIPOOL_RETURN_IF_ERROR(Rule(gbs > 0 && gbs % (mbs * dp) == 0,
                               "global batch must divide by micro-batch x data-parallel size"));
  if (v.Has("--tp-comm-overlap")) {
    UNIPOOL_RETURN_IF_ERROR(
        Rule(v.Has("--sequence-parallel"), "--tp-comm-overlap needs --sequence-parallel"));
  }
  return Status::Ok();
}

Status DeepSpeedSupports(const Plan& p) {
  if (p.pp > 1 && p.zero >= 2) {
    return FailedPrecondition(
        "DeepSpeed's pipeline engine runs ZeRO 0-1 only; this plan has "
        "ZeRO-" +
        std::to_string(p.zero) + " with pp=" + std::to_string(p.pp) +
        " (use --zero 1, or Megatron-LM)");
  }
  if (p.cp > 1) {
    return FailedPrecondition("DeepSpeed has no context parallelism; this plan has cp=" +
                              std::to_string(p.cp) + " (use --cp 1, or Megatron-LM)");
  }
  if (p.vpp > 1) {
    return FailedPrecondition(
        "DeepSpeed's pipeline engine has no interleaved schedule; this "
        "plan has v=" +
        std::to_string(p.vpp) + " (use --vpp 1)");
  }
  return Status::Ok();
}

Status CheckDeepSpeedConfig(const DeepSpeedConfig& c, int64_t world) {
  if (c.train_micro_batch_size_per_gpu < 1 || c.gradient_accumulation_steps < 1 ||
      c.train_batch_size < 1) {
    return InvalidArgument("deepspeed: batch sizes and gradient_accumulation_steps must be > 0");
  }
  const int64_t mp = int64_t{c.tensor_parallel} * c.pipeline_stages;
  if (mp < 1 || world % mp != 0) {
    return InvalidArgument("deepspeed: tensor x pipeline parallel does not divide the world");
  }
  const int64_t dp = world / mp;
  if (c.train_batch_size != c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * dp) {
    return InvalidArgument("deepspeed: train_batch_size " + std::to_string(c.train_batch_size) +
                           " != micro " + std::to_string(c.train_micro_batch_size_per_gpu) +
                           " x accumulation " + std::to_string(c.gradient_accumulation_steps) +
                           " x data-parallel " + std::to_string(dp));
  }
  if (c.zero_stage < 0 || c.zero_stage > 3) return InvalidArgument("deepspeed: zero stage 0-3");
  if (c.pipeline_stages > 1 && c.zero_stage >= 2) {
    return InvalidArgument("deepspeed: ZeRO-2 and ZeRO-3 are incompatible with pipeline stages");
  }
  return Status::Ok();
}

namespace {

DeepSpeedConfig DeepSpeedOf(const Job& job, const Plan& plan) {
  DeepSpeedConfig ds;
  ds.train_batch_size = job.global_batch;
  ds.train_micro_batch_size_per_gpu = plan.micro_batch;
  ds.gradient_accumulation_steps =
      std::max<int64_t>(1, job.global_batch / (int64_t{plan.dp} * plan.micro_batch));
  ds.zero_stage = plan.zero;
  ds.overlap_comm = job.framework.dp_overlap;
  ds.activation_checkpointing = plan.recompute == Recompute::kFull;
  ds.tensor_parallel = plan.tp;
  ds.pipeline_stages = plan.pp;
  return ds;
}

// torchtitan names Llama 3 sizes by flavor (torchtitan/models/llama3).
std::string TorchtitanFlavor(const ModelSpec& m) {
  if (m.arch.tokenizer.find("Llama") == std::string::npos && m.name.rfind("llama3", 0) != 0)
    return "";
  if (m.layers == 32 && m.hidden == 4096) return "8B";
  if (m.layers == 80 && m.hidden == 8192) return "70B";
  if (m.layers == 126 && m.hidden == 16384) return "405B";
  return "";
}

TorchtitanConfig TorchtitanOf(const Job& job, const Plan& p) {
  TorchtitanConfig t;
  t.flavor = TorchtitanFlavor(job.model);
  if (job.model.is_moe()) t.model_name = job.model.mla.enabled() ? "deepseek_v3" : "moe";
  t.seq_len = job.model.seq_len;
  t.global_batch_size = job.global_batch;
  // FSDP2 over the data-parallel ranks: ZeRO-3 reshards after forward; ZeRO-1
  // and 2 keep the gathered parameters (ZeRO-2's memory, at most ZeRO-1's);
  // plain DP replicates (torchtitan's HSDP/DDP "replicate" degree).
  if (p.zero == 0) {
    t.dp_replicate = p.dp;
  } else {
    t.dp_shard = p.dp;
    t.reshard_after_forward = p.zero == 3 ? "always" : "never";
  }
  t.tp = p.tp;
  t.pp = p.pp;
  t.cp = p.cp;
  t.ep = p.ep;
  if (p.pp > 1) {
    // One step's sequences per DP rank, split into micro-batches.
    t.local_batch_size = job.global_batch / p.dp;
    t.pp_microbatch_size = p.micro_batch;
    t.pp_schedule = p.vpp > 1 ? "Interleaved1F1B" : "1F1B";
    t.pp_layers_per_stage = MaxStageLayers(job.model.layers, p.pp * p.vpp);
  } else {
    t.local_batch_size = p.micro_batch;  // gradient accumulation makes up the global batch
  }
  t.activation_checkpoint = p.recompute == Recompute::kFull        ? "full"
                            : p.recompute == Recompute::kSelective ? "selective"
                                                                   : "none";
  t.float8 = job.framework.fp8;
  return t;
}

}  // namespace

LaunchConfig MakeLaunch(const Job& job, const Plan& plan, int32_t gpus_per_node) {
  LaunchConfig c;
  Parallelism(plan, job.model, c.megatron);
  Model(job.model, c.megatron);
  Schedule(job, plan, gpus_per_node, c.megatron);
  c.deepspeed = DeepSpeedOf(job, plan);
  c.deepspeed_ok = DeepSpeedSupports(plan);
  c.torchtitan = TorchtitanOf(job, plan);
  const int32_t per_node = std::max(1, gpus_per_node);
  c.torchrun.nproc_per_node = static_cast<int32_t>(std::min<int64_t>(per_node, plan.gpus()));
  c.torchrun.nnodes = (plan.gpus() + c.torchrun.nproc_per_node - 1) / c.torchrun.nproc_per_node;
  return c;
}

}  // namespace unipool::perf
