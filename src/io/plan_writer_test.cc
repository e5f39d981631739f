#include "io/plan_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace unipool::io {
namespace {

using nlohmann::json;

struct Fixture {
  perf::Job job{*perf::FindBuiltinModel("llama3-70b"), 256, {}};
  perf::HardwareView hw;
  perf::PlanSearch search;
  perf::LaunchConfig launch;
  explicit Fixture(bool deepspeed = false) {
    perf::UniformCluster u;
    u.gpu = *FindBuiltinGpuModel("H100-SXM");
    u.gpus = 128;
    hw = *perf::ViewOf(*Topology::Build(perf::UniformClusterSpec(u)), 128);
    perf::SearchOptions o;
    o.top_k = 3;
    o.explain = true;
    o.deepspeed = deepspeed;
    search = *perf::Search(job, hw, o);
    launch = perf::MakeLaunch(job, search.top.front().plan, 8);
  }
  PlanReport Report() { return {&job, &hw, "test", &search, &launch, nullptr, true}; }
};

TEST(PlanWriterTest, JsonHasPlansBreakdownsAndLaunch) {
  Fixture f;
  const json j = json::parse(PlanJson(f.Report()));
  EXPECT_EQ(j["model"]["name"], "llama3-70b");
  EXPECT_EQ(j["hardware"]["gpus"], 128);
  ASSERT_EQ(j["plans"].size(), 3u);
  const json& best = j["plans"][0];
  EXPECT_EQ(best["rank"], 1);
  EXPECT_GT(best["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(best["mfu"].get<double>(), 0.2);
  EXPECT_EQ(best["time"]["comm"].size(), 6u);
  EXPECT_TRUE(best["memory"]["fits"].get<bool>());
  const double parts =
      best["time"]["compute_s"].get<double>() + best["time"]["recompute_s"].get<double>() +
      best["time"]["bubble_s"].get<double>() + best["time"]["optimizer_s"].get<double>() +
      best["time"]["exposed_comm_s"].get<double>();
  EXPECT_NEAR(parts, best["step_s"].get<double>(), 1e-6);
  EXPECT_FALSE(j["explain"]["why_best"].get<std::string>().empty());
  EXPECT_FALSE(j["explain"]["alternatives"].empty());
  EXPECT_EQ(j["launch"]["megatron_args"][0], "--tensor-model-parallel-size");
  EXPECT_NE(j["launch"]["torchtitan_toml"].get<std::string>().find("[parallelism]"),
            std::string::npos);
  // Planned under DeepSpeed's rules, the config is there; else the reason.
  Fixture ds(true);
  const json d = json::parse(PlanJson(ds.Report()));
  EXPECT_EQ(d["launch"]["deepspeed_config"]["train_batch_size"], 256);
  EXPECT_FALSE(d["launch"].contains("deepspeed_unsupported"));
  EXPECT_EQ(j["launch"].contains("deepspeed_config"), f.launch.deepspeed_ok.ok());
}

// Issue 16: MoE, Blackwell and FP8 predictions carried no warning in the
// output; each plan now says how well its class is calibrated.
TEST(PlanWriterTest, SaysHowWellThePredictionIsCalibrated) {
  Fixture dense;
  const json d = json::parse(PlanJson(dense.Report()));
  EXPECT_EQ(d["calibration"]["class"], "dense BF16 on A100/H100");
  EXPECT_TRUE(d["calibration"]["calibrated"].get<bool>());
  EXPECT_GE(d["calibration"]["rows"].get<int>(), 60);
  EXPECT_NE(PlanText(dense.Report()).find("Calibration: 65 published runs"), std::string::npos);
  for (const char* preset : {"mixtral-8x7b", "deepseek-v3"}) {
    perf::Job job{*perf::FindBuiltinModel(preset), 256, {}};
    perf::UniformCluster u;
    u.gpu = *FindBuiltinGpuModel("H100-SXM");
    u.gpus = 256;
    const perf::HardwareView hw = *perf::ViewOf(*Topology::Build(perf::UniformClusterSpec(u)), 256);
    perf::SearchOptions o;
    o.top_k = 1;
    const perf::PlanSearch s = *perf::Search(job, hw, o);
    const PlanReport r{&job, &hw, "test", &s, nullptr, nullptr, false};
    const std::string text = PlanText(r);
    EXPECT_NE(text.find("Warning: uncalibrated: the prediction was checked on 5 published runs "
                        "of its class (mixture-of-experts)"),
              std::string::npos)
        << preset << "\n"
        << text;
  }
}

TEST(PlanWriterTest, TorchtitanTomlForLlama405b) {
  perf::Job job{*perf::FindBuiltinModel("llama3-405b"), 2048, {}};
  job.framework.fp8 = true;
  perf::Plan p;
  p.tp = 8;
  p.pp = 16;
  p.vpp = 2;
  p.dp = 128;
  p.zero = 3;
  p.recompute = perf::Recompute::kFull;
  const std::string toml = TorchtitanToml(perf::MakeLaunch(job, p, 8));
  for (const char* want :
       {"name = \"llama3\"", "flavor = \"405B\"", "converters = [\"float8\"]",
        "local_batch_size = 16", "global_batch_size = 2048", "seq_len = 8192",
        "data_parallel_shard_degree = 128", "fsdp_reshard_after_forward = \"always\"",
        "tensor_parallel_degree = 8", "pipeline_parallel_degree = 16",
        "pipeline_parallel_schedule = \"Interleaved1F1B\"", "pipeline_parallel_microbatch_size = 1",
        "pipeline_parallel_layers_per_stage = 4", "mode = \"full\""}) {
    EXPECT_NE(toml.find(want), std::string::npos) << want << "\n" << toml;
  }
}

TEST(PlanWriterTest, TextShowsEverySection) {
  Fixture f;
  const std::string text = PlanText(f.Report());
  for (const char* want :
       {"Model llama3-70b: 70.6B parameters", "RANK", "Best plan:", "pipeline bubble",
        "Memory per GPU:", "Why it wins:", "ALTERNATIVE", "torchrun --nnodes 16 --nproc-per-node 8",
        "DeepSpeed config", "torchtitan job config", "[activation_checkpoint]"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
}

TEST(PlanWriterTest, MegatronArgsQuoteShellSpecials) {
  perf::LaunchConfig c;
  c.megatron = {{"--num-layers", "61"}, {"--swiglu", ""}, {"--moe-layer-freq", "([0]*3+[1]*58)"}};
  EXPECT_EQ(MegatronArgs(c), "--num-layers 61 --swiglu --moe-layer-freq '([0]*3+[1]*58)'");
}

TEST(PlanWriterTest, DeepSpeedConfigIsValidJson) {
  perf::LaunchConfig c;
  c.deepspeed.train_batch_size = 1024;
  c.deepspeed.train_micro_batch_size_per_gpu = 2;
  c.deepspeed.gradient_accumulation_steps = 4;
  c.deepspeed.zero_stage = 3;
  c.deepspeed.activation_checkpointing = true;
  const json j = json::parse(DeepSpeedJson(c));
  EXPECT_EQ(j["zero_optimization"]["stage"], 3);
  EXPECT_TRUE(j["zero_optimization"].contains("stage3_prefetch_bucket_size"));
  EXPECT_EQ(j["bf16"]["enabled"], true);
  EXPECT_TRUE(j.contains("activation_checkpointing"));
  EXPECT_FALSE(j.contains("pipeline"));
}

TEST(PlanWriterTest, HumanDuration) {
  EXPECT_EQ(HumanDuration(0.25), "250 ms");
  EXPECT_EQ(HumanDuration(30), "30.0 s");
  EXPECT_EQ(HumanDuration(3600), "60.0 min");
  EXPECT_EQ(HumanDuration(36000), "10.0 h");
  EXPECT_EQ(HumanDuration(86400 * 10), "10.0 days");
  EXPECT_EQ(HumanDuration(1.0 / 0.0), "never");
}

}  // namespace
}  // namespace unipool::io
