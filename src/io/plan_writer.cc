#include "io/plan_writer.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/perf/calibration.h"
#include "io/summary_writer.h"
#include "io/table.h"

namespace unipool::io {
namespace {

using nlohmann::ordered_json;
using perf::CommPart;

std::string Fmt(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string Gb(Bytes b) { return Fmt("%.1f GB", static_cast<double>(b.value()) / 1e9); }
std::string Pct(double x) { return Fmt("%.1f%%", x * 100); }
std::string Billions(double x) { return Fmt("%.1fB", x / 1e9); }

constexpr size_t kParts = static_cast<size_t>(CommPart::kCount);

std::string TierOf(const perf::HardwareView& hw, int t) {
  return t >= 0 && t < static_cast<int>(hw.tiers.size()) ? hw.tiers[t].name : "";
}

// ---- Text ------------------------------------------------------------------

void Header(const PlanReport& r, std::ostringstream& out) {
  const perf::ModelSpec& m = r.job->model;
  const perf::ParamCounts pc = perf::CountParams(m);
  out << "Model " << m.name << ": " << Billions(pc.total) << " parameters";
  if (m.is_moe()) out << " (" << Billions(pc.active) << " active)";
  out << ", " << m.layers << " layers, hidden " << m.hidden << ", " << m.heads << " heads ("
      << m.kv_heads << " KV), seq " << m.seq_len << ", vocab " << m.vocab << "\n";
  out << "Hardware: " << Thousands(r.hw->gpus) << " x " << r.hw->gpu.name << " on '"
      << r.cluster_name << "'; tiers:";
  for (const perf::TierView& t : r.hw->tiers) {
    out << " " << t.name << " (" << Thousands(t.group_gpus) << " GPUs, "
        << Fmt("%.0f Gb/s", t.bytes_per_s * 8 / 1e9) << ")";
  }
  out << "\nGlobal batch: " << Thousands(r.job->global_batch) << " sequences ("
      << Thousands(r.job->global_batch * m.seq_len) << " tokens)\n";
  const perf::PlanSearch& s = *r.search;
  out << "Searched " << Thousands(s.considered) << " plans: " << Thousands(s.evaluated)
      << " costed, " << Thousands(s.pruned_memory) << " pruned for memory\n\n";
}

void Ranking(const PlanReport& r, std::ostringstream& out) {
  Table t({"RANK", "PLAN", "STEP", "TOKENS/S", "TFLOP/S/GPU", "MFU", "MEMORY/GPU"});
  int rank = 1;
  for (const perf::RankedPlan& p : r.search->top) {
    const perf::Estimate& e = p.estimate;
    t.Add({std::to_string(rank++), perf::Describe(p.plan), Fmt("%.3f s", e.step_s),
           Thousands(std::llround(e.tokens_per_s)), Fmt("%.1f", e.model_tflops_per_gpu), Pct(e.mfu),
           Gb(e.memory.total)});
  }
  out << t.Render() << "\n";
}

void Breakdown(const PlanReport& r, const perf::RankedPlan& best, std::ostringstream& out) {
  const perf::Estimate& e = best.estimate;
  const perf::TimeBreakdown& tb = e.time;
  out << "Best plan: " << perf::Describe(best.plan) << "\n";
  Table t({"  TIME", "SECONDS", "SHARE", "NOTE"});
  auto row = [&](const std::string& name, Duration d, const std::string& note) {
    t.Add({"  " + name, Fmt("%.3f", ToSeconds(d)), Pct(ToSeconds(d) / e.step_s), note});
  };
  row("compute", tb.compute, Fmt("GEMMs at %.0f%% of peak", e.gemm_efficiency * 100));
  row("recompute", tb.recompute, perf::RecomputeName(best.plan.recompute));
  row("pipeline bubble", tb.bubble, Fmt("(p-1)/(v m) = %.1f%%", e.bubble_fraction * 100));
  for (size_t i = 0; i < kParts; ++i) {
    if (tb.comm_total[i].value() == 0) continue;
    row(perf::CommPartName(static_cast<CommPart>(i)) + std::string(" (exposed)"), tb.comm[i],
        "of " + Fmt("%.3f s", ToSeconds(tb.comm_total[i])) + " over " +
            TierOf(*r.hw, tb.comm_tier[i]));
  }
  row("optimizer + step overhead", tb.optimizer, "");
  row("step", tb.step,
      Thousands(std::llround(e.tokens_per_s_per_gpu)) + " tokens/s/GPU, " +
          Fmt("%.1f", e.model_tflops_per_gpu) + " TFLOP/s/GPU, MFU " + Pct(e.mfu));
  out << t.Render();
  const perf::MemoryBreakdown& m = e.memory;
  out << "  Memory per GPU: " << Gb(m.total) << " of " << Gb(m.usable) << " = weights "
      << Gb(m.weights) << " + gradients " << Gb(m.grads) << " + optimizer " << Gb(m.optimizer)
      << " + activations " << Gb(m.activations) << " + buffers " << Gb(m.buffers) << " + runtime "
      << Gb(m.reserve) << "\n\n";
}

void Explanation(const PlanReport& r, std::ostringstream& out) {
  const perf::PlanSearch& s = *r.search;
  out << "Why it wins: " << s.why_best << "\n";
  Table t({"  ALTERNATIVE", "STEP", "WHY IT LOSES"});
  for (const perf::Alternative& a : s.alternatives) {
    t.Add({"  " + a.change, a.fits ? Fmt("%+.1f%%", a.slowdown * 100) : "-", a.reason});
  }
  out << t.Render() << "\n";
}

void Sizing(const PlanReport& r, std::ostringstream& out) {
  const perf::SizingResult& s = *r.sizing;
  Table t({"GPUS", "BEST PLAN", "TOKENS/S", "MTBF", "FAILURES", "WALL TIME", "MEETS"});
  for (const perf::SizingOption& o : s.tried) {
    t.Add({Thousands(o.gpus), perf::Describe(o.best.plan),
           Thousands(std::llround(o.best.estimate.tokens_per_s)), HumanDuration(o.failures.mtbf_s),
           Fmt("%.1f", o.failures.expected_failures), HumanDuration(o.failures.wall_s),
           o.meets_target ? "yes" : "no"});
  }
  out << "Sizing:\n" << t.Render();
  const perf::SizingOption& c = s.chosen;
  out << "Chosen: " << Thousands(c.gpus) << " GPUs"
      << (c.meets_target ? "" : " (misses the target: the fastest tried)")
      << "; expected wall time " << HumanDuration(c.failures.wall_s) << " with "
      << Fmt("%.1f", c.failures.expected_failures) << " failures (job MTBF "
      << HumanDuration(c.failures.mtbf_s) << "), checkpoint of "
      << HumanBytes(Bytes(std::llround(c.failures.checkpoint_bytes))) << " every "
      << HumanDuration(c.failures.interval_s) << " (write "
      << HumanDuration(c.failures.checkpoint_write_s) << ")\n\n";
}

void Launch(const perf::LaunchConfig& c, std::ostringstream& out) {
  out << "Launch (Megatron-LM, on every node):\n  " << TorchrunLine(c) << "\n";
  if (c.deepspeed_ok.ok()) {
    out << "DeepSpeed config:\n" << DeepSpeedJson(c);
  } else {
    out << "DeepSpeed config: none: " << c.deepspeed_ok.message()
        << "; --deepspeed-config plans under DeepSpeed's rules\n";
  }
  out << "torchtitan job config (--torchtitan-config):\n" << TorchtitanToml(c);
}

// ---- JSON ------------------------------------------------------------------

ordered_json PlanJsonOf(const perf::Plan& p) {
  return {{"tp", p.tp},
          {"pp", p.pp},
          {"vpp", p.vpp},
          {"dp", p.dp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"micro_batch", p.micro_batch},
          {"zero", p.zero},
          {"recompute", perf::RecomputeName(p.recompute)},
          {"sequence_parallel", p.sequence_parallel && p.tp > 1},
          {"rank_order", perf::RankOrderName(p.order)},
          {"summary", perf::Describe(p)}};
}

ordered_json EstimateJson(const perf::HardwareView& hw, const perf::Estimate& e) {
  const perf::TimeBreakdown& tb = e.time;
  ordered_json comm = ordered_json::array();
  for (size_t i = 0; i < kParts; ++i) {
    comm.push_back({{"name", perf::CommPartName(static_cast<CommPart>(i))},
                    {"exposed_s", ToSeconds(tb.comm[i])},
                    {"total_s", ToSeconds(tb.comm_total[i])},
                    {"tier", TierOf(hw, tb.comm_tier[i])}});
  }
  const perf::MemoryBreakdown& m = e.memory;
  return {{"step_s", e.step_s},
          {"tokens_per_s", e.tokens_per_s},
          {"tokens_per_s_per_gpu", e.tokens_per_s_per_gpu},
          {"model_tflops_per_gpu", e.model_tflops_per_gpu},
          {"mfu", e.mfu},
          {"hfu", e.hfu},
          {"micro_batches", e.micro_batches},
          {"bubble_fraction", e.bubble_fraction},
          {"time",
           {{"compute_s", ToSeconds(tb.compute)},
            {"recompute_s", ToSeconds(tb.recompute)},
            {"bubble_s", ToSeconds(tb.bubble)},
            {"optimizer_s", ToSeconds(tb.optimizer)},
            {"exposed_comm_s", ToSeconds(tb.exposed_comm())},
            {"comm", comm}}},
          {"memory",
           {{"total_bytes", m.total.value()},
            {"usable_bytes", m.usable.value()},
            {"weights_bytes", m.weights.value()},
            {"grads_bytes", m.grads.value()},
            {"optimizer_bytes", m.optimizer.value()},
            {"activations_bytes", m.activations.value()},
            {"buffers_bytes", m.buffers.value()},
            {"runtime_bytes", m.reserve.value()},
            {"fits", m.fits()}}}};
}

ordered_json DeepSpeedObject(const perf::DeepSpeedConfig& d) {
  ordered_json zero = {{"stage", d.zero_stage},
                       {"overlap_comm", d.overlap_comm},
                       {"contiguous_gradients", true},
                       {"reduce_bucket_size", 500000000}};
  if (d.zero_stage == 3) {
    zero["stage3_prefetch_bucket_size"] = 50000000;
    zero["stage3_param_persistence_threshold"] = 100000;
  }
  ordered_json j = {{"train_batch_size", d.train_batch_size},
                    {"train_micro_batch_size_per_gpu", d.train_micro_batch_size_per_gpu},
                    {"gradient_accumulation_steps", d.gradient_accumulation_steps},
                    {"gradient_clipping", d.gradient_clipping},
                    {"bf16", {{"enabled", d.bf16}}},
                    {"zero_optimization", zero}};
  if (d.tensor_parallel > 1) j["tensor_parallel"] = {{"autotp_size", d.tensor_parallel}};
  if (d.pipeline_stages > 1) j["pipeline"] = {{"stages", d.pipeline_stages}};
  if (d.activation_checkpointing) {
    j["activation_checkpointing"] = {{"partition_activations", d.tensor_parallel > 1},
                                     {"contiguous_memory_optimization", true},
                                     {"number_checkpoints", nullptr}};
  }
  return j;
}

}  // namespace

std::string HumanDuration(double s) {
  if (!std::isfinite(s)) return "never";
  if (s < 1) return Fmt("%.0f ms", s * 1e3);
  if (s < 120) return Fmt("%.1f s", s);
  if (s < 7200) return Fmt("%.1f min", s / 60);
  if (s < 3 * 86400) return Fmt("%.1f h", s / 3600);
  return Fmt("%.1f days", s / 86400);
}

std::string MegatronArgs(const perf::LaunchConfig& c) {
  std::string s;
  for (const auto& [flag, value] : c.megatron) {
    s += (s.empty() ? "" : " ") + flag;
    if (!value.empty()) {
      const bool quote = value.find_first_of("()[]*+ ") != std::string::npos;
      s += " " + (quote ? "'" + value + "'" : value);
    }
  }
  return s;
}

std::string TorchrunLine(const perf::LaunchConfig& c) {
  return "torchrun --nnodes " + std::to_string(c.torchrun.nnodes) + " --nproc-per-node " +
         std::to_string(c.torchrun.nproc_per_node) +
         " --rdzv-backend c10d --rdzv-endpoint $MASTER_ADDR:29500 " + c.torchrun.script + " " +
         MegatronArgs(c);
}

std::string DeepSpeedJson(const perf::LaunchConfig& c) {
  return DeepSpeedObject(c.deepspeed).dump(2) + "\n";
}

std::string TorchtitanToml(const perf::LaunchConfig& c) {
  const perf::TorchtitanConfig& t = c.torchtitan;
  std::ostringstream o;
  auto str = [](const std::string& v) { return "\"" + v + "\""; };
  o << "[model]\nname = " << str(t.model_name) << "\n";
  if (t.flavor.empty()) {
    o << "# no torchtitan flavor has this shape: add one with the sizes of the plan's model\n";
  } else {
    o << "flavor = " << str(t.flavor) << "\n";
  }
  if (t.float8) o << "converters = [\"float8\"]\n";
  o << "\n[training]\nlocal_batch_size = " << t.local_batch_size
    << "\nglobal_batch_size = " << t.global_batch_size << "\nseq_len = " << t.seq_len
    << "\nmixed_precision_param = \"bfloat16\"\n";
  o << "\n[parallelism]\ndata_parallel_replicate_degree = " << t.dp_replicate
    << "\ndata_parallel_shard_degree = " << t.dp_shard
    << "\nfsdp_reshard_after_forward = " << str(t.reshard_after_forward)
    << "\ntensor_parallel_degree = " << t.tp << "\ncontext_parallel_degree = " << t.cp
    << "\nexpert_parallel_degree = " << t.ep << "\npipeline_parallel_degree = " << t.pp << "\n";
  if (t.pp > 1) {
    o << "pipeline_parallel_schedule = " << str(t.pp_schedule)
      << "\npipeline_parallel_microbatch_size = " << t.pp_microbatch_size
      << "\npipeline_parallel_layers_per_stage = " << t.pp_layers_per_stage << "\n";
  }
  o << "\n[activation_checkpoint]\nmode = " << str(t.activation_checkpoint) << "\n";
  return o.str();
}

const perf::CalibrationStatus& CalibrationOfReport(const PlanReport& r) {
  return perf::CalibrationOf(perf::ClassOf(*r.job, r.hw->gpu));
}

// "calibrated on 65 published runs of its class (dense BF16 on A100/H100):
// median |error| 7.5%, 80% within +-18.9%"
std::string CalibrationLine(const perf::CalibrationStatus& c) {
  if (c.rows == 0) return std::string("no published runs of its class (") + c.name + ")";
  return std::to_string(c.rows) + " published run" + (c.rows == 1 ? "" : "s") + " of its class (" +
         c.name + "): median |error| " + Fmt("%.1f%%", c.median_abs_error * 100) +
         ", 80% within +-" + Fmt("%.1f%%", c.p80_abs_error * 100);
}

std::vector<std::string> PlanWarnings(const PlanReport& r) {
  std::vector<std::string> w;
  const perf::CalibrationStatus& cal = CalibrationOfReport(r);
  if (!cal.calibrated()) {
    w.push_back("uncalibrated: the prediction was checked on " + CalibrationLine(cal) +
                "; read the numbers as rough (docs/plan.md, Calibration)");
  }
  if (r.search->top.empty()) return w;
  const perf::MemoryBreakdown& m = r.search->top.front().estimate.memory;
  if (!m.fits()) {
    w.push_back("the best plan needs " + Gb(m.total) + " per GPU, more than the " + Gb(m.usable) +
                " of HBM by the memory model (stock Megatron-LM schedules); it is evaluated "
                "anyway because memory is ignored (--ignore-memory, or every dimension fixed)");
  }
  return w;
}

std::string PlanText(const PlanReport& r) {
  std::ostringstream out;
  Header(r, out);
  const perf::CalibrationStatus& cal = CalibrationOfReport(r);
  if (cal.calibrated()) out << "Calibration: " << CalibrationLine(cal) << "\n";
  for (const std::string& w : PlanWarnings(r)) out << "Warning: " << w << "\n";
  if (r.sizing) Sizing(r, out);
  Ranking(r, out);
  if (!r.search->top.empty()) Breakdown(r, r.search->top.front(), out);
  if (r.explain) Explanation(r, out);
  if (r.launch) Launch(*r.launch, out);
  return out.str();
}

std::string PlanJson(const PlanReport& r) {
  const perf::ModelSpec& m = r.job->model;
  const perf::ParamCounts pc = perf::CountParams(m);
  ordered_json j;
  j["model"] = {{"name", m.name},     {"params", pc.total}, {"active_params", pc.active},
                {"layers", m.layers}, {"hidden", m.hidden}, {"seq_len", m.seq_len}};
  ordered_json tiers = ordered_json::array();
  for (const perf::TierView& t : r.hw->tiers) {
    tiers.push_back({{"name", t.name},
                     {"group_gpus", t.group_gpus},
                     {"gbps_per_gpu", t.bytes_per_s * 8 / 1e9},
                     {"latency_us", t.latency_s * 1e6}});
  }
  j["hardware"] = {
      {"cluster", r.cluster_name}, {"gpus", r.hw->gpus}, {"gpu", r.hw->gpu.name}, {"tiers", tiers}};
  j["global_batch"] = r.job->global_batch;
  const perf::CalibrationStatus& cal = CalibrationOfReport(r);
  j["calibration"] = {{"class", cal.name},
                      {"rows", cal.rows},
                      {"calibrated", cal.calibrated()},
                      {"median_abs_error", cal.median_abs_error},
                      {"p80_abs_error", cal.p80_abs_error},
                      {"stack", r.job->framework.stack}};
  j["warnings"] = PlanWarnings(r);
  j["search"] = {{"considered", r.search->considered},
                 {"evaluated", r.search->evaluated},
                 {"pruned_memory", r.search->pruned_memory}};
  ordered_json plans = ordered_json::array();
  int rank = 1;
  for (const perf::RankedPlan& p : r.search->top) {
    ordered_json o = {{"rank", rank++}, {"plan", PlanJsonOf(p.plan)}};
    o.update(EstimateJson(*r.hw, p.estimate));
    plans.push_back(o);
  }
  j["plans"] = plans;
  if (r.explain) {
    ordered_json alts = ordered_json::array();
    for (const perf::Alternative& a : r.search->alternatives) {
      alts.push_back({{"change", a.change},
                      {"plan", PlanJsonOf(a.plan)},
                      {"fits", a.fits},
                      {"slowdown", a.slowdown},
                      {"reason", a.reason}});
    }
    j["explain"] = {{"why_best", r.search->why_best}, {"alternatives", alts}};
  }
  if (r.sizing) {
    ordered_json tried = ordered_json::array();
    for (const perf::SizingOption& o : r.sizing->tried) {
      tried.push_back(
          {{"gpus", o.gpus},
           {"plan", perf::Describe(o.best.plan)},
           {"tokens_per_s", o.best.estimate.tokens_per_s},
           {"effective_tokens_per_s", o.effective_tokens_per_s},
           {"wall_s", std::isfinite(o.failures.wall_s) ? o.failures.wall_s : -1},
           {"expected_failures",
            std::isfinite(o.failures.expected_failures) ? o.failures.expected_failures : -1},
           {"meets_target", o.meets_target}});
    }
    const perf::SizingOption& c = r.sizing->chosen;
    j["sizing"] = {{"gpus", c.gpus},
                   {"meets_target", c.meets_target},
                   {"wall_s", c.failures.wall_s},
                   {"mtbf_s", c.failures.mtbf_s},
                   {"expected_failures", c.failures.expected_failures},
                   {"checkpoint_bytes", c.failures.checkpoint_bytes},
                   {"checkpoint_write_s", c.failures.checkpoint_write_s},
                   {"checkpoint_interval_s", c.failures.interval_s},
                   {"tried", tried}};
  }
  if (r.launch) {
    ordered_json args = ordered_json::array();
    for (const auto& [flag, value] : r.launch->megatron) {
      args.push_back(flag);
      if (!value.empty()) args.push_back(value);
    }
    j["launch"] = {{"megatron_args", args},
                   {"torchrun", TorchrunLine(*r.launch)},
                   {"torchtitan_toml", TorchtitanToml(*r.launch)}};
    if (r.launch->deepspeed_ok.ok()) {
      j["launch"]["deepspeed_config"] = DeepSpeedObject(r.launch->deepspeed);
    } else {
      j["launch"]["deepspeed_unsupported"] = r.launch->deepspeed_ok.message();
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace unipool::io
