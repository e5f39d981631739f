#include "core/perf/model.h"

#include <algorithm>
#include <cctype>

namespace unipool::perf {

const char* FfnActivationName(FfnActivation a) {
  return a == FfnActivation::kSwiglu ? "swiglu" : "gelu";
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

namespace {

Status Field(const char* field, const std::string& cause) {
  return InvalidArgument(std::string(field) + ": " + cause);
}

Status ValidateMoe(const ModelSpec& m) {
  const MoeSpec& e = m.moe;
  if (!m.is_moe()) {
    if (e.top_k != 0 || e.shared_experts != 0 || e.dense_layers != 0) {
      return Field("moe.experts", "must be at least 1 when other moe fields are set");
    }
    return Status::Ok();
  }
  if (e.top_k < 1 || e.top_k > e.experts) {
    return Field("moe.topK", "must be from 1 to moe.experts (" + std::to_string(e.experts) + ")");
  }
  if (e.expert_ffn_hidden < 1) return Field("moe.expertFfnHiddenSize", "must be at least 1");
  if (e.shared_experts < 0) return Field("moe.sharedExperts", "must not be negative");
  if (e.dense_layers < 0 || e.dense_layers >= m.layers) {
    return Field("moe.denseLayers", "must be from 0 to layers - 1");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const ModelSpec& m) {
  if (m.layers < 1) return Field("layers", "must be at least 1");
  if (m.hidden < 1) return Field("hiddenSize", "must be at least 1");
  if (m.heads < 1) return Field("attentionHeads", "must be at least 1");
  if (m.kv_heads < 1 || m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    return Field("kvHeads", "must divide attentionHeads (" + std::to_string(m.heads) + ")");
  }
  if (m.head_dim == 0 && m.hidden % m.heads != 0) {
    return Field("attentionHeads", "must divide hiddenSize (" + std::to_string(m.hidden) +
                                       ") unless headDim is given");
  }
  if (m.head_dim < 0) return Field("headDim", "must not be negative");
  if (m.vocab < 1) return Field("vocabSize", "must be at least 1");
  if (m.seq_len < 1) return Field("seqLength", "must be at least 1");
  if (m.dense_layers() > 0 && m.ffn_hidden < 1) {
    return Field("ffnHiddenSize", "must be at least 1");
  }
  return ValidateMoe(m);
}

static double FfnParams(const ModelSpec& m, double width) {
  const double matrices = m.activation == FfnActivation::kSwiglu ? 3 : 2;
  return matrices * static_cast<double>(m.hidden) * width;
}

ParamCounts CountParams(const ModelSpec& m) {
  ParamCounts c;
  const double h = static_cast<double>(m.hidden);
  c.attention_per_layer = h * (2.0 * m.q_dim() + 2.0 * m.kv_dim());
  c.dense_ffn_per_layer = FfnParams(m, static_cast<double>(m.ffn_hidden));
  c.expert_ffn = m.is_moe() ? FfnParams(m, static_cast<double>(m.moe.expert_ffn_hidden)) : 0;
  c.router_per_layer = m.is_moe() ? h * m.moe.experts : 0;
  c.norms_per_layer = 2 * h;
  c.embedding = static_cast<double>(m.vocab) * h;
  c.output = m.tied_embeddings ? 0 : c.embedding;
  const double per_layer = c.attention_per_layer + c.norms_per_layer;
  const double moe_layer_all =
      (m.moe.experts + m.moe.shared_experts) * c.expert_ffn + c.router_per_layer;
  const double moe_layer_active =
      (m.moe.top_k + m.moe.shared_experts) * c.expert_ffn + c.router_per_layer;
  const double common =
      m.layers * per_layer + m.dense_layers() * c.dense_ffn_per_layer + c.embedding + c.output + h;
  c.total = common + m.moe_layers() * moe_layer_all;
  c.active = common + m.moe_layers() * moe_layer_active;
  return c;
}

double ActiveMatmulParamsPerLayer(const ModelSpec& m, bool moe_layer) {
  const ParamCounts c = CountParams(m);
  if (!moe_layer) return c.attention_per_layer + c.dense_ffn_per_layer;
  return c.attention_per_layer + (m.moe.top_k + m.moe.shared_experts) * c.expert_ffn +
         c.router_per_layer;
}

StepFlops TrainingFlops(const ModelSpec& m, double sequences, Recompute recompute) {
  const double s = static_cast<double>(m.seq_len);
  const double attention_core = 4.0 * s * s * static_cast<double>(m.q_dim());
  const double layers_fwd =
      m.dense_layers() * (2.0 * s * ActiveMatmulParamsPerLayer(m, false) + attention_core) +
      m.moe_layers() * (2.0 * s * ActiveMatmulParamsPerLayer(m, true) + attention_core);
  const double logits_fwd = 2.0 * s * static_cast<double>(m.hidden) * m.vocab;
  StepFlops f;
  f.model = 3.0 * sequences * (layers_fwd + logits_fwd);
  if (recompute == Recompute::kFull) f.recompute = sequences * layers_fwd;
  if (recompute == Recompute::kSelective) f.recompute = sequences * m.layers * attention_core;
  return f;
}

const char* NormName(Norm n) { return n == Norm::kRmsNorm ? "RMSNorm" : "LayerNorm"; }

const char* PositionEmbeddingName(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearned:
      return "learned";
    case PositionEmbedding::kRope:
      return "rope";
    case PositionEmbedding::kNone:
      return "none";
  }
  return "?";
}

namespace {

// Llama-family architecture: RMSNorm, RoPE, no biases, no dropout.
Architecture LlamaStyle(double rotary_base, std::string tokenizer) {
  Architecture a;
  a.norm = Norm::kRmsNorm;
  a.positions = PositionEmbedding::kRope;
  a.rotary_base = rotary_base;
  a.linear_bias = false;
  a.dropout = 0;
  a.tokenizer = std::move(tokenizer);
  return a;
}

ModelSpec Dense(std::string name, int32_t layers, int64_t hidden, int64_t ffn, FfnActivation act,
                int32_t heads, int32_t kv_heads, int64_t vocab, int64_t seq, bool tied) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = ffn;
  m.activation = act;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.vocab = vocab;
  m.seq_len = seq;
  m.tied_embeddings = tied;
  return m;
}

std::vector<ModelSpec> MakeBuiltins() {
  using A = FfnActivation;
  std::vector<ModelSpec> v;
  // Brown et al. 2020, Table 2.1; vocabulary padded to 51,200 as Megatron-LM does.
  // GPT-3 architecture: pre-LayerNorm, learned positions, biases, GPT-2 BPE.
  ModelSpec gpt3 = Dense("gpt3-175b", 96, 12288, 49152, A::kGelu, 96, 96, 51200, 2048, true);
  gpt3.arch.tokenizer = "gpt2";
  v.push_back(gpt3);
  // Narayanan et al. SC'21, Table 1 (the 1T row).
  ModelSpec gpt1t = Dense("gpt-1t", 128, 25600, 102400, A::kGelu, 160, 160, 51200, 2048, true);
  gpt1t.arch.tokenizer = "gpt2";
  v.push_back(gpt1t);
  // Meta, "The Llama 3 Herd of Models" 2024, Table 3; 8K pre-training context;
  // RoPE base frequency 500,000; RMSNorm eps 1e-5 (the released config.json).
  const struct {
    const char* name;
    int32_t layers;
    int64_t hidden, ffn;
    int32_t heads;
    const char* tokenizer;
  } llamas[] = {{"llama3-8b", 32, 4096, 14336, 32, "meta-llama/Meta-Llama-3-8B"},
                {"llama3-70b", 80, 8192, 28672, 64, "meta-llama/Meta-Llama-3-70B"},
                {"llama3-405b", 126, 16384, 53248, 128, "meta-llama/Llama-3.1-405B"}};
  for (const auto& l : llamas) {
    ModelSpec m =
        Dense(l.name, l.layers, l.hidden, l.ffn, A::kSwiglu, l.heads, 8, 128256, 8192, false);
    m.arch = LlamaStyle(500000, l.tokenizer);
    v.push_back(m);
  }
  // Jiang et al. 2024 "Mixtral of Experts", Table 1; RoPE base 1e6 (config.json).
  ModelSpec mixtral = Dense("mixtral-8x7b", 32, 4096, 14336, A::kSwiglu, 32, 8, 32000, 4096, false);
  mixtral.moe = {8, 2, 0, 14336, 0};
  mixtral.arch = LlamaStyle(1e6, "mistralai/Mixtral-8x7B-v0.1");
  v.push_back(mixtral);
  // Qwen3 technical report 2025 (arXiv 2505.09388), Table 2, and the released
  // config.json: 94 layers, hidden 4096, 64 query / 4 KV heads of 128, 128
  // experts of width 1536, top-8, no shared expert; RoPE base 1e6.
  ModelSpec qwen3 =
      Dense("qwen3-235b-a22b", 94, 4096, 12288, A::kSwiglu, 64, 4, 151936, 4096, false);
  qwen3.head_dim = 128;
  qwen3.moe = {128, 8, 0, 1536, 0};
  qwen3.arch = LlamaStyle(1e6, "Qwen/Qwen3-235B-A22B");
  qwen3.arch.norm_epsilon = 1e-6;
  v.push_back(qwen3);
  // DeepSeek-V3 technical report 2024, section 4.2: 61 layers, 1 shared + 256
  // routed experts of width 2048, top-8, first 3 layers dense (width 18432).
  // Multi-head latent attention is approximated by 128 heads of 56 (4h^2
  // attention parameters, close to MLA's); 671B total, ~37B active.
  ModelSpec dsv3 = Dense("deepseek-v3", 61, 7168, 18432, A::kSwiglu, 128, 128, 129280, 4096, false);
  dsv3.head_dim = 56;
  dsv3.moe = {256, 8, 1, 2048, 3};
  // Section 2.1.2: sigmoid affinities, 8 groups (nodes), at most 4 per token,
  // routed output scaled by 2.5 (config.json routed_scaling_factor); MLA
  // ranks from section 4.2; one MTP module; RMSNorm eps 1e-6.
  dsv3.router = {true, 8, 4, 2.5};
  dsv3.mla = {1536, 512, 128, 64, 128};
  dsv3.mtp_layers = 1;
  dsv3.arch = LlamaStyle(10000, "deepseek-ai/DeepSeek-V3");
  dsv3.arch.norm_epsilon = 1e-6;
  v.push_back(dsv3);
  std::sort(v.begin(), v.end(),
            [](const ModelSpec& a, const ModelSpec& b) { return a.name < b.name; });
  return v;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const std::vector<ModelSpec>& BuiltinModels() {
  static const std::vector<ModelSpec> kModels = MakeBuiltins();
  return kModels;
}

std::optional<ModelSpec> FindBuiltinModel(std::string_view name) {
  for (const ModelSpec& m : BuiltinModels()) {
    if (EqualsIgnoreCase(m.name, name)) return m;
  }
  return std::nullopt;
}

}  // namespace unipool::perf
