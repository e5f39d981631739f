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
  Fixture() {
    perf::UniformCluster u;
    u.gpu = *FindBuiltinGpuModel("H100-SXM");
    u.gpus = 128;
    hw = *perf::ViewOf(*Topology::Build(perf::UniformClusterSpec(u)), 128);
    perf::SearchOptions o;
    o.top_k = 3;
    o.explain = true;
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
  EXPECT_EQ(j["launch"]["deepspeed_config"]["train_batch_size"], 256);
}

TEST(PlanWriterTest, TextShowsEverySection) {
  Fixture f;
  const std::string text = PlanText(f.Report());
  for (const char* want : {"Model llama3-70b: 70.6B parameters", "RANK", "Best plan:",
                           "pipeline bubble", "Memory per GPU:", "Why it wins:", "ALTERNATIVE",
                           "torchrun --nnodes 16 --nproc-per-node 8", "\"zero_optimization\""}) {
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
