// `unipool plan`: the auto-parallel planner. Reads a model (preset or file)
// and a cluster (file, or N GPUs of one model on a uniform network), searches
// the parallel plans and prints the best ones with their breakdowns, the
// explanation, and launch settings. With a target (--train-tokens and
// --deadline-days, or --target-tokens-per-s) it also chooses the GPU count.
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "core/perf/hardware.h"
#include "core/perf/launch.h"
#include "core/perf/planner.h"
#include "core/perf/sizing.h"
#include "io/cluster_reader.h"
#include "io/model_reader.h"
#include "io/plan_writer.h"

namespace unipool::cli {
namespace {

struct PlanOptions {
  std::string model;
  std::string cluster;
  int64_t gpus = 0;
  std::string gpu = "H100-SXM";
  int32_t gpus_per_node = 8;
  int32_t scale_up = 0;
  int32_t power_limit = 0;  // watts; 0 = the board power
  int64_t global_batch = 0;
  int64_t global_batch_tokens = 0;
  int top = 5;
  bool explain = false;
  std::string output = "text";
  std::string deepspeed_out;
  std::string torchtitan_out;
  bool list_models = false;
  // Fixed plan dimensions (0 = search).
  int32_t tp = 0, pp = 0, dp = 0, cp = 0, ep = 0, etp = 0, vpp = 0, mbs = 0, zero = -1;
  std::string recompute, order, sequence_parallel;
  // Framework.
  bool no_flash = false, no_tp_overlap = false, no_dp_overlap = false, no_ep_overlap = false;
  bool no_loss_fusion = false, fp8 = false, eager = false;
  bool ignore_memory = false;
  std::string stack = "mcore-2025";
  // Sizing.
  double train_tokens = 0, deadline_days = 0, target_tps = 0;
  int64_t max_gpus = 0;
  double node_failure_rate = 1.6e-4;
  double restart_minutes = 10;
};

constexpr int64_t kDefaultBatchTokens = int64_t{1} << 22;  // 4M tokens per step

struct Cluster {
  Topology topo;
  std::string name;
};

Result<Topology> UniformTopology(const PlanOptions& o, int64_t gpus) {
  std::optional<GpuModel> gpu = FindBuiltinGpuModel(o.gpu);
  if (!gpu) return InvalidArgument("--gpu: unknown GPU model '" + o.gpu + "'");
  perf::UniformCluster u;
  u.gpu = *gpu;
  u.gpus = gpus;
  u.gpus_per_node = o.gpus_per_node;
  u.scale_up_gpus = o.scale_up;
  if (o.power_limit > 0) {
    if (o.power_limit > u.gpu.power.value()) {
      return InvalidArgument("--power-limit: " + std::to_string(o.power_limit) +
                             " W is above the " + u.gpu.name + "'s board power of " +
                             std::to_string(u.gpu.power.value()) + " W");
    }
    u.gpu.power_limit = Watts(o.power_limit);
    u.gpu = WithPowerDefaults(u.gpu);
  }
  Result<Topology> t = Topology::Build(perf::UniformClusterSpec(u));
  if (!t.ok()) return InvalidArgument("--gpus: " + t.status().message());
  return t;
}

bool Sizing(const PlanOptions& o) {
  return o.target_tps > 0 || o.train_tokens > 0 || o.deadline_days > 0;
}

Result<Topology> LoadCluster(const PlanOptions& o) {
  if (!o.cluster.empty()) {
    if (o.power_limit > 0) {
      return InvalidArgument(
          "--power-limit is for the made-up cluster; with --cluster, give "
          "powerLimitWatts in the file's gpuModels");
    }
    return io::LoadTopology(o.cluster);
  }
  const int64_t gpus = Sizing(o) ? (o.max_gpus > 0 ? o.max_gpus : 65536) : o.gpus;
  if (gpus <= 0) return InvalidArgument("give --cluster FILE or --gpus N");
  return UniformTopology(o, gpus);
}

Result<perf::Job> MakeJob(const PlanOptions& o) {
  Result<perf::ModelSpec> model = io::LoadModelOrPreset(o.model);
  if (!model.ok()) return model.status();
  perf::Job job;
  job.model = *model;
  const int64_t tokens = o.global_batch_tokens > 0 ? o.global_batch_tokens : kDefaultBatchTokens;
  job.global_batch =
      o.global_batch > 0 ? o.global_batch : std::max<int64_t>(1, tokens / job.model.seq_len);
  Result<perf::Framework> stack = perf::StackProfile(o.stack);
  if (!stack.ok()) return InvalidArgument("--stack: " + stack.status().message());
  job.framework = *stack;
  // The switches turn a profile's features off (or FP8 on).
  if (o.no_flash) job.framework.flash_attention = false;
  if (o.no_tp_overlap) job.framework.tp_comm_overlap = false;
  if (o.eager) job.framework.fused_elementwise = false;
  if (o.no_dp_overlap) job.framework.dp_overlap = false;
  if (o.no_ep_overlap) job.framework.ep_overlap = false;
  if (o.no_loss_fusion) job.framework.fused_cross_entropy = false;
  job.framework.fp8 = o.fp8;
  return job;
}

// One plan to evaluate, not a search: then memory over the GPU's is a
// warning (a published plan the memory model rejects still gets its time).
bool EveryDimensionFixed(const PlanOptions& o) {
  return o.tp > 0 && o.pp > 0 && o.cp > 0 && o.vpp > 0 && o.mbs > 0 && o.zero >= 0 &&
         !o.recompute.empty();
}

perf::SearchOptions MakeSearch(const PlanOptions& o) {
  perf::SearchOptions s;
  s.top_k = o.top;
  s.explain = o.explain;
  s.tp = o.tp;
  s.pp = o.pp;
  s.dp = o.dp;
  s.cp = o.cp;
  s.ep = o.ep;
  s.etp = o.etp;
  s.vpp = o.vpp;
  s.micro_batch = o.mbs;
  s.zero = o.zero;
  if (o.recompute == "none") s.recompute = perf::Recompute::kNone;
  if (o.recompute == "selective") s.recompute = perf::Recompute::kSelective;
  if (o.recompute == "full") s.recompute = perf::Recompute::kFull;
  if (o.order == "tp-cp-dp-pp") s.order = perf::RankOrder::kTpCpDpPp;
  if (o.order == "tp-cp-pp-dp") s.order = perf::RankOrder::kTpCpPpDp;
  if (!o.sequence_parallel.empty()) s.sequence_parallel = o.sequence_parallel == "on";
  s.ignore_memory = o.ignore_memory || EveryDimensionFixed(o);
  s.deepspeed = !o.deepspeed_out.empty();  // the config written must be one DeepSpeed runs
  return s;
}

int Fail(const Status& st) {
  std::cerr << "error: " << st.message() << "\n";
  return st.code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailed;
}

int ListModels() {
  for (const perf::ModelSpec& m : perf::BuiltinModels()) {
    std::printf("%-14s %7.1fB params, %3d layers, hidden %6lld, seq %lld%s\n", m.name.c_str(),
                perf::CountParams(m).total / 1e9, m.layers, static_cast<long long>(m.hidden),
                static_cast<long long>(m.seq_len), m.is_moe() ? ", MoE" : "");
  }
  return kExitOk;
}

int Emit(const PlanOptions& o, const perf::Job& job, const perf::HardwareView& hw,
         const std::string& cluster_name, const perf::PlanSearch& search,
         const perf::SizingResult* sizing) {
  const perf::LaunchConfig launch =
      perf::MakeLaunch(job, search.top.front().plan, hw.gpus_per_node);
  io::PlanReport r{&job, &hw, cluster_name, &search, &launch, sizing, o.explain};
  std::cout << (o.output == "json" ? io::PlanJson(r) : io::PlanText(r));
  if (!o.deepspeed_out.empty()) {
    if (!launch.deepspeed_ok.ok()) return Fail(InvalidArgument(launch.deepspeed_ok.message()));
    std::ofstream f(o.deepspeed_out);
    f << io::DeepSpeedJson(launch);
    if (!f) return Fail(InvalidArgument("--deepspeed-config: cannot write " + o.deepspeed_out));
  }
  if (!o.torchtitan_out.empty()) {
    std::ofstream f(o.torchtitan_out);
    f << io::TorchtitanToml(launch);
    if (!f) return Fail(InvalidArgument("--torchtitan-config: cannot write " + o.torchtitan_out));
  }
  return kExitOk;
}

int RunSizing(const PlanOptions& o, const perf::Job& job, const Topology& topo) {
  perf::SizingTarget target;
  target.tokens = o.train_tokens;
  target.deadline_s = o.deadline_days * 86400;
  target.tokens_per_s = o.target_tps;
  perf::FailureModel f;
  f.node_failures_per_hour = o.node_failure_rate;
  f.restart_s = o.restart_minutes * 60;
  Result<perf::SizingResult> r = perf::Size(job, topo, target, f, MakeSearch(o));
  if (!r.ok()) return Fail(r.status());
  Result<perf::HardwareView> hw = perf::ViewOf(topo, r->chosen.gpus);
  if (!hw.ok()) return Fail(hw.status());
  return Emit(o, job, *hw, topo.name(), r->search, &*r);
}

int RunPlan(const PlanOptions& o) {
  if (o.list_models) return ListModels();
  if (o.model.empty()) return Fail(InvalidArgument("--model: required (a preset or a model file)"));
  if (Sizing(o) && o.target_tps <= 0 && (o.train_tokens <= 0 || o.deadline_days <= 0)) {
    return Fail(InvalidArgument(
        "sizing needs --train-tokens with --deadline-days, or --target-tokens-per-s"));
  }
  Result<perf::Job> job = MakeJob(o);
  if (!job.ok()) return Fail(job.status());
  Result<Topology> topo = LoadCluster(o);
  if (!topo.ok()) return Fail(topo.status());
  if (Sizing(o)) return RunSizing(o, *job, *topo);
  const int64_t gpus = o.gpus > 0 ? o.gpus : topo->num_gpus().value();
  Result<perf::HardwareView> hw = perf::ViewOf(*topo, gpus);
  if (!hw.ok()) return Fail(InvalidArgument("--gpus: " + hw.status().message()));
  Result<perf::PlanSearch> search = perf::Search(*job, *hw, MakeSearch(o));
  if (!search.ok()) return Fail(search.status());
  return Emit(o, *job, *hw, topo->name(), *search, nullptr);
}

void AddFixedOptions(CLI::App* cmd, PlanOptions& o) {
  cmd->add_option("--tp", o.tp, "fix tensor parallelism")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--pp", o.pp, "fix pipeline parallelism")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--dp", o.dp, "fix data parallelism")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--cp", o.cp, "fix context parallelism")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--ep", o.ep, "fix expert parallelism")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--etp", o.etp, "fix expert tensor parallelism (1 folds EP over TP x DP)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--vpp", o.vpp, "fix virtual pipeline stages")->check(CLI::Range(1, 1 << 10));
  cmd->add_option("--mbs", o.mbs, "fix the micro-batch size")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--zero", o.zero, "fix the ZeRO stage (3 = FSDP)")->check(CLI::Range(0, 3));
  cmd->add_option("--recompute", o.recompute, "fix activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  cmd->add_option("--sequence-parallel", o.sequence_parallel,
                  "sequence parallelism with TP (default on; BLOOM, OPT and MT-NLG ran without)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--order", o.order, "fix the rank order")
      ->check(CLI::IsMember({"tp-cp-dp-pp", "tp-cp-pp-dp"}));
}

void AddSizingOptions(CLI::App* cmd, PlanOptions& o) {
  cmd->add_option("--train-tokens", o.train_tokens, "sizing: tokens to train on")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--deadline-days", o.deadline_days, "sizing: wall-clock budget in days")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target-tokens-per-s", o.target_tps, "sizing: throughput goal")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-gpus", o.max_gpus, "sizing without --cluster: largest count tried")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--node-failure-rate", o.node_failure_rate, "failures per node-hour")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--restart-minutes", o.restart_minutes, "cost of one restart")
      ->check(CLI::Range(0.0, 1e5))
      ->capture_default_str();
}

}  // namespace

void AddPlanCommand(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Choose TP/PP/DP/CP/EP, micro-batch, ZeRO and recomputation for a training job");
  cmd->add_option("-m,--model", o->model, "model preset (see --list-models) or model file");
  cmd->add_flag("--list-models", o->list_models, "list the built-in model presets");
  cmd->add_option("-c,--cluster", o->cluster, "cluster file (YAML, kind: Cluster)");
  cmd->add_option("-g,--gpus", o->gpus, "GPUs of the job (default: the whole cluster)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--gpu", o->gpu, "GPU model without --cluster")->capture_default_str();
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "without --cluster")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--scale-up", o->scale_up, "NVLink domain size without --cluster")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--power-limit", o->power_limit,
                  "GPU power cap in W without --cluster (nvidia-smi -pl; cluster files: "
                  "powerLimitWatts)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-b,--global-batch", o->global_batch, "sequences per step")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  cmd->add_option("--global-batch-tokens", o->global_batch_tokens, "tokens per step (default 4M)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("-k,--top", o->top, "plans to show")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_flag("--explain", o->explain, "say why the best plan wins and close ones lose");
  cmd->add_option("-o,--output", o->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--deepspeed-config", o->deepspeed_out,
                  "write the DeepSpeed config here (plans under DeepSpeed's rules: ZeRO 0-1 with "
                  "pipeline stages, no CP, no interleaving)");
  cmd->add_option("--torchtitan-config", o->torchtitan_out, "write a torchtitan job file (TOML)");
  std::string stacks;
  for (const std::string& n : perf::StackNames()) stacks += (stacks.empty() ? "" : ", ") + n;
  cmd->add_option("--stack", o->stack, "software stack: " + stacks + " (docs/plan.md)")
      ->capture_default_str();
  cmd->add_flag("--no-flash-attention", o->no_flash, "attention without a fused kernel");
  cmd->add_flag("--no-tp-overlap", o->no_tp_overlap, "TP communication not overlapped");
  cmd->add_flag("--no-dp-overlap", o->no_dp_overlap, "DP communication not overlapped");
  cmd->add_flag("--no-ep-overlap", o->no_ep_overlap,
                "MoE all-to-all not overlapped with another micro-batch's compute");
  cmd->add_flag("--no-loss-fusion", o->no_loss_fusion,
                "cross-entropy op by op in fp32 (Megatron-LM without --cross-entropy-loss-fusion)");
  cmd->add_flag("--fp8", o->fp8, "FP8 GEMMs");
  cmd->add_flag("--eager", o->eager,
                "element-wise ops unfused, as eager PyTorch runs them (torchtitan without "
                "torch.compile)");
  cmd->add_flag("--ignore-memory", o->ignore_memory,
                "rank plans over the GPU's memory too, with a warning (implied when every "
                "dimension is fixed)");
  AddFixedOptions(cmd, *o);
  AddSizingOptions(cmd, *o);
  cmd->callback([o, &exit_code] { exit_code = RunPlan(*o); });
}

}  // namespace unipool::cli
