// ModelSpec: the shape of a decoder-only transformer (dense GPT/Llama-style
// or mixture-of-experts) as the planner needs it, the built-in presets, and
// the closed-form counts derived from the shape: parameters and the
// Megatron-LM FLOPs per training step.
//
// Conventions (docs/plan.md has the derivations):
//  - Matrix parameters only count towards FLOPs; layer norms and biases are
//    counted in the parameter total (2h per layer + h final) but not in FLOPs.
//  - FLOPs follow Narayanan et al. SC'21 eq. (3): a multiply-add is 2 FLOPs,
//    backward = 2 x forward, the causal attention term is NOT halved, the
//    logit layer is counted once per pass. For a GPT with 4h GeLU FFN and
//    multi-head attention the model FLOPs per step of B sequences equal
//    72 B s l h^2 (1 + s/6h + V/12lh) exactly.
//  - Full recomputation adds one forward pass of the transformer layers (not
//    the logit layer): 96 B s l h^2 (1 + s/6h + V/16lh) in total.
//    Selective recomputation (Korthikanti et al. MLSys'23) adds the attention
//    core forward: 4 B s^2 q per layer (q = heads x head_dim).
//
// Pure: no I/O. Thread-safe (all functions are pure).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace unipool::perf {

enum class FfnActivation { kGelu, kSwiglu };
const char* FfnActivationName(FfnActivation a);

struct MoeSpec {
  int32_t experts = 0;            // routed experts per MoE layer; 0 = dense model
  int32_t top_k = 0;              // routed experts per token
  int32_t shared_experts = 0;     // always-active experts per MoE layer
  int64_t expert_ffn_hidden = 0;  // FFN width of one expert
  int32_t dense_layers = 0;       // the first layers keep a dense FFN (DeepSeek-V3: 3)
};

// What the cost model does not need but a framework must be told to build
// the same network (Megatron-LM's architecture flags); the defaults are a
// GPT-3-style model.
enum class Norm { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearned, kRope, kNone };
const char* NormName(Norm n);                            // "LayerNorm", "RMSNorm"
const char* PositionEmbeddingName(PositionEmbedding p);  // "learned", "rope", "none"

struct Architecture {
  Norm norm = Norm::kLayerNorm;
  double norm_epsilon = 1e-5;
  PositionEmbedding positions = PositionEmbedding::kLearned;
  double rotary_base = 10000;  // RoPE theta
  bool linear_bias = true;     // biases in the attention and MLP linears
  double dropout = 0.1;        // attention and hidden dropout
  std::string tokenizer;       // a Hugging Face tokenizer id; empty = none named
};

// Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values go
// through low-rank projections. All zero = standard attention.
struct MlaSpec {
  int32_t q_lora_rank = 0;
  int32_t kv_lora_rank = 0;
  int32_t qk_head_dim = 0;       // the part of each head without RoPE
  int32_t qk_rope_head_dim = 0;  // the decoupled RoPE part
  int32_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
};

// How the router scores experts (softmax for Mixtral; sigmoid with
// node-group-limited routing for DeepSeek-V3).
struct RouterSpec {
  bool sigmoid = false;
  int32_t groups = 0;        // expert groups (DeepSeek-V3: 8, one per node)
  int32_t group_top_k = 0;   // groups a token may use (DeepSeek-V3: 4)
  double top_k_scaling = 0;  // routed-expert output scale (DeepSeek-V3: 2.5)
};

struct ModelSpec {
  std::string name;
  int32_t layers = 0;
  int64_t hidden = 0;
  int64_t ffn_hidden = 0;  // dense FFN width (for MoE: of the dense layers)
  FfnActivation activation = FfnActivation::kGelu;
  int32_t heads = 0;
  int32_t kv_heads = 0;  // = heads for multi-head, 1 for multi-query, else GQA
  int64_t head_dim = 0;  // 0 means hidden / heads
  int64_t vocab = 0;
  int64_t seq_len = 0;
  bool tied_embeddings = false;
  MoeSpec moe;
  RouterSpec router;
  Architecture arch;
  MlaSpec mla;
  int32_t mtp_layers = 0;  // multi-token-prediction modules (DeepSeek-V3: 1)

  bool is_moe() const { return moe.experts > 0; }
  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden / heads; }
  int64_t q_dim() const { return heads * head_size(); }
  int64_t kv_dim() const { return kv_heads * head_size(); }
  int32_t moe_layers() const { return is_moe() ? layers - moe.dense_layers : 0; }
  int32_t dense_layers() const { return layers - moe_layers(); }
};

// Checks ranges and divisibility (hidden by heads, heads by kv_heads, top_k
// <= experts, ...). The message names the field: "kvHeads: must divide ...".
Status Validate(const ModelSpec& m);

// Parameter counts (as doubles: 10^12 overflows nothing, and the cost model
// works in doubles).
struct ParamCounts {
  double attention_per_layer = 0;  // Q, K, V, output projections
  double dense_ffn_per_layer = 0;  // one dense FFN
  double expert_ffn = 0;           // one expert's FFN
  double router_per_layer = 0;     // h x experts
  double norms_per_layer = 0;      // 2h
  double embedding = 0;            // V x h (input)
  double output = 0;               // V x h, 0 when tied
  double total = 0;                // everything
  double active = 0;               // what one token touches (top-k + shared experts)
};
ParamCounts CountParams(const ModelSpec& m);

// Matrix parameters one token multiplies through in one layer's GEMMs
// (attention projections + active FFN + router).
double ActiveMatmulParamsPerLayer(const ModelSpec& m, bool moe_layer);

enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);

// FLOPs of one training step over `sequences` sequences of m.seq_len tokens.
struct StepFlops {
  double model = 0;      // forward + backward (Megatron-LM convention, MFU numerator)
  double recompute = 0;  // extra forward work of activation recomputation
  double hardware() const { return model + recompute; }
};
StepFlops TrainingFlops(const ModelSpec& m, double sequences, Recompute recompute);

// The built-in presets, sorted by name: gpt3-175b, gpt-1t, llama3-8b,
// llama3-70b, llama3-405b, mixtral-8x7b, qwen3-235b-a22b, deepseek-v3.
const std::vector<ModelSpec>& BuiltinModels();
std::optional<ModelSpec> FindBuiltinModel(std::string_view name);

}  // namespace unipool::perf
