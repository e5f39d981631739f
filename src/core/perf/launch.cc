#include "core/perf/launch.h"

#include <algorithm>

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
  if (p.sequence_parallel && p.tp > 1) a.push_back({"--sequence-parallel", ""});
}

void Model(const ModelSpec& m, Args& a) {
  a.push_back({"--num-layers", std::to_string(m.layers)});
  a.push_back({"--hidden-size", std::to_string(m.hidden)});
  a.push_back({"--ffn-hidden-size", std::to_string(m.ffn_hidden)});
  a.push_back({"--num-attention-heads", std::to_string(m.heads)});
  if (m.kv_heads != m.heads) {
    a.push_back({"--group-query-attention", ""});
    a.push_back({"--num-query-groups", std::to_string(m.kv_heads)});
  }
  if (m.head_dim > 0) a.push_back({"--kv-channels", std::to_string(m.head_dim)});
  a.push_back({"--seq-length", std::to_string(m.seq_len)});
  a.push_back({"--max-position-embeddings", std::to_string(m.seq_len)});
  if (m.activation == FfnActivation::kSwiglu) a.push_back({"--swiglu", ""});
  if (!m.tied_embeddings) a.push_back({"--untie-embeddings-and-output-weights", ""});
  if (m.is_moe()) {
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
    a.push_back({"--moe-token-dispatcher-type", "alltoall"});
  }
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

LaunchConfig MakeLaunch(const Job& job, const Plan& plan, int32_t gpus_per_node) {
  LaunchConfig c;
  Parallelism(plan, job.model, c.megatron);
  Model(job.model, c.megatron);
  Schedule(job, plan, gpus_per_node, c.megatron);
  DeepSpeedConfig& ds = c.deepspeed;
  ds.train_batch_size = job.global_batch;
  ds.train_micro_batch_size_per_gpu = plan.micro_batch;
  ds.gradient_accumulation_steps = job.global_batch / (int64_t{plan.dp} * plan.micro_batch);
  ds.zero_stage = plan.zero;
  ds.overlap_comm = job.framework.dp_overlap;
  ds.activation_checkpointing = plan.recompute == Recompute::kFull;
  ds.tensor_parallel = plan.tp;
  ds.pipeline_stages = plan.pp;
  const int32_t per_node = std::max(1, gpus_per_node);
  c.torchrun.nproc_per_node = static_cast<int32_t>(std::min<int64_t>(per_node, plan.gpus()));
  c.torchrun.nnodes = (plan.gpus() + c.torchrun.nproc_per_node - 1) / c.torchrun.nproc_per_node;
  return c;
}

}  // namespace unipool::perf
