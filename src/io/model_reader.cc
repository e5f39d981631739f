#include "io/model_reader.h"

#include <fstream>
#include <initializer_list>

#include "io/cluster_reader.h"
#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

using perf::FfnActivation;
using perf::ModelSpec;

constexpr int64_t kMaxWidth = int64_t{1} << 24;  // 16M: wider than any model
constexpr int32_t kMaxLayers = 100000;

Status ReadMoe(const YAML::Node& node, perf::MoeSpec* out) {
  Result<Fields> f = Fields::Of(
      node, "spec.moe", {"experts", "topK", "sharedExperts", "expertFfnHiddenSize", "denseLayers"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(f->Int32("experts", &out->experts, 1, 1 << 16, true));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("topK", &out->top_k, 1, 1 << 16, true));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("sharedExperts", &out->shared_experts, 0, 1 << 10));
  UNIPOOL_RETURN_IF_ERROR(
      f->Int("expertFfnHiddenSize", &out->expert_ffn_hidden, 1, kMaxWidth, true));
  return f->Int32("denseLayers", &out->dense_layers, 0, kMaxLayers);
}

Status ReadActivation(const Fields& f, FfnActivation* out) {
  std::string act;
  UNIPOOL_RETURN_IF_ERROR(f.String("activation", &act));
  if (act.empty()) return Status::Ok();
  if (act == "gelu") {
    *out = FfnActivation::kGelu;
  } else if (act == "swiglu") {
    *out = FfnActivation::kSwiglu;
  } else {
    return Expected(f.Get("activation"), f.PathOf("activation"), "gelu or swiglu");
  }
  return Status::Ok();
}

// A string field that must be one of `names`; *out takes the index.
template <typename E>
Status ReadEnum(const Fields& f, const char* key, std::initializer_list<const char*> names,
                E* out) {
  std::string v;
  UNIPOOL_RETURN_IF_ERROR(f.String(key, &v));
  if (v.empty()) return Status::Ok();
  int i = 0;
  std::string list;
  for (const char* n : names) {
    if (v == n) {
      *out = static_cast<E>(i);
      return Status::Ok();
    }
    list += (i++ > 0 ? (i == static_cast<int>(names.size()) ? " or " : ", ") : "") + std::string(n);
  }
  return Expected(f.Get(key), f.PathOf(key), list);
}

// Architecture details for the launch settings (Megatron-LM's flags).
Status ReadArchitecture(const Fields& f, perf::Architecture* a) {
  UNIPOOL_RETURN_IF_ERROR(ReadEnum(f, "normalization", {"layernorm", "rmsnorm"}, &a->norm));
  UNIPOOL_RETURN_IF_ERROR(f.Double("normEpsilon", &a->norm_epsilon, 1e-12, 1));
  UNIPOOL_RETURN_IF_ERROR(
      ReadEnum(f, "positionEmbedding", {"learned", "rope", "none"}, &a->positions));
  UNIPOOL_RETURN_IF_ERROR(f.Double("rotaryBase", &a->rotary_base, 1, 1e12));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("bias", &a->linear_bias));
  UNIPOOL_RETURN_IF_ERROR(f.Double("dropout", &a->dropout, 0, 1));
  return f.String("tokenizer", &a->tokenizer);
}

Status ReadSpec(const YAML::Node& node, ModelSpec* out) {
  Result<Fields> f = Fields::Of(
      node, "spec",
      {"base", "layers", "hiddenSize", "ffnHiddenSize", "activation", "attentionHeads", "kvHeads",
       "headDim", "vocabSize", "seqLength", "tiedEmbeddings", "moe", "normalization", "normEpsilon",
       "positionEmbedding", "rotaryBase", "bias", "dropout", "tokenizer"});
  if (!f.ok()) return f.status();
  std::string base;
  UNIPOOL_RETURN_IF_ERROR(f->String("base", &base));
  const std::string name = out->name;
  if (!base.empty()) {
    std::optional<ModelSpec> preset = perf::FindBuiltinModel(base);
    if (!preset) return Expected(f->Get("base"), f->PathOf("base"), "a built-in model preset");
    *out = *preset;
    out->name = name;
  }
  const bool req = base.empty();  // a preset supplies every field
  UNIPOOL_RETURN_IF_ERROR(f->Int32("layers", &out->layers, 1, kMaxLayers, req));
  UNIPOOL_RETURN_IF_ERROR(f->Int("hiddenSize", &out->hidden, 1, kMaxWidth, req));
  UNIPOOL_RETURN_IF_ERROR(f->Int("ffnHiddenSize", &out->ffn_hidden, 1, kMaxWidth));
  if (out->ffn_hidden == 0) out->ffn_hidden = 4 * out->hidden;
  UNIPOOL_RETURN_IF_ERROR(ReadActivation(*f, &out->activation));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("attentionHeads", &out->heads, 1, 1 << 16, req));
  if (!f->Has("kvHeads") && req) out->kv_heads = out->heads;
  UNIPOOL_RETURN_IF_ERROR(f->Int32("kvHeads", &out->kv_heads, 1, 1 << 16));
  UNIPOOL_RETURN_IF_ERROR(f->Int("headDim", &out->head_dim, 1, 1 << 16));
  UNIPOOL_RETURN_IF_ERROR(f->Int("vocabSize", &out->vocab, 1, int64_t{1} << 26, req));
  UNIPOOL_RETURN_IF_ERROR(f->Int("seqLength", &out->seq_len, 1, int64_t{1} << 26, req));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("tiedEmbeddings", &out->tied_embeddings));
  if (f->Has("moe")) UNIPOOL_RETURN_IF_ERROR(ReadMoe(f->Get("moe"), &out->moe));
  UNIPOOL_RETURN_IF_ERROR(ReadArchitecture(*f, &out->arch));
  // Cross-field rules; the error points at the field it names.
  Status st = perf::Validate(*out);
  if (!st.ok()) {
    const std::string& msg = st.message();
    const std::string field = msg.substr(0, msg.find(':'));
    SourceLoc at = LocOf(node);
    const YAML::Node moe = f->Get("moe");
    if (field.rfind("moe.", 0) == 0 && moe.IsMap()) {
      const std::string key = field.substr(4);
      at = moe[key].IsDefined() ? LocOf(moe[key]) : LocOf(moe);
    } else if (f->Has(field.c_str())) {
      at = LocOf(f->Get(field.c_str()));
    }
    return InvalidArgument("spec." + msg, at);
  }
  return Status::Ok();
}

Status ReadDocument(const YAML::Node& doc, ModelSpec* out) {
  Result<Fields> f = Fields::Of(doc, "model file", {"apiVersion", "kind", "metadata", "spec"});
  if (!f.ok()) return f.status();
  std::string api, kind;
  UNIPOOL_RETURN_IF_ERROR(f->String("apiVersion", &api, true));
  if (api != "unipool/v1") return Expected(f->Get("apiVersion"), "apiVersion", "unipool/v1");
  UNIPOOL_RETURN_IF_ERROR(f->String("kind", &kind, true));
  if (kind != "Model") return Expected(f->Get("kind"), "kind", "Model");
  if (!f->Has("metadata")) return InvalidArgument("metadata: required field is missing", f->loc());
  Result<Fields> meta = Fields::Of(f->Get("metadata"), "metadata", {"name", "description"});
  if (!meta.ok()) return meta.status();
  UNIPOOL_RETURN_IF_ERROR(meta->String("name", &out->name, true));
  if (!f->Has("spec")) return InvalidArgument("spec: required field is missing", f->loc());
  return ReadSpec(f->Get("spec"), out);
}

}  // namespace

Result<perf::ModelSpec> ParseModelSpec(std::string_view text) {
  Result<YAML::Node> doc = LoadDocument(text, "Model");
  if (!doc.ok()) return doc.status();
  ModelSpec spec;
  try {
    UNIPOOL_RETURN_IF_ERROR(ReadDocument(*doc, &spec));
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp may throw on odd nodes
    return InvalidArgument("cannot read: " + OneLine(e.msg), {e.mark.line + 1, e.mark.column + 1});
  }
  return spec;
}

Result<perf::ModelSpec> LoadModel(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<ModelSpec> spec = ParseModelSpec(*text);
  if (!spec.ok()) return InvalidArgument(WithFile(path, spec.status()));
  return spec;
}

Result<perf::ModelSpec> LoadModelOrPreset(const std::string& name_or_path) {
  if (std::optional<ModelSpec> preset = perf::FindBuiltinModel(name_or_path)) return *preset;
  if (std::ifstream(name_or_path)) return LoadModel(name_or_path);
  std::string known;
  for (const ModelSpec& m : perf::BuiltinModels()) known += (known.empty() ? "" : ", ") + m.name;
  return InvalidArgument(name_or_path + ": no such model file or preset (presets: " + known + ")");
}

}  // namespace unipool::io
