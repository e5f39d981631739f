#include "core/perf/launch.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/perf/planner.h"

namespace unipool::perf {
namespace {

std::string Arg(const LaunchConfig& c, const std::string& flag) {
  auto it = std::find_if(c.megatron.begin(), c.megatron.end(),
                         [&](const auto& kv) { return kv.first == flag; });
  return it == c.megatron.end() ? "<absent>" : it->second;
}

TEST(LaunchTest, MegatronArgumentsForLlama405b) {
  Job job{*FindBuiltinModel("llama3-405b"), 2048, {}};
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.vpp = 2;  // 126 layers in 32 chunks: 30 of 4, then two of 3 on the last stages
  p.dp = 128;
  p.zero = 1;
  p.recompute = Recompute::kFull;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  EXPECT_EQ(Arg(c, "--tensor-model-parallel-size"), "8");
  EXPECT_EQ(Arg(c, "--pipeline-model-parallel-size"), "16");
  EXPECT_EQ(Arg(c, "--num-layers-per-virtual-pipeline-stage"), "<absent>");
  std::string layout = "E,t*4";
  for (int j = 1; j < 30; ++j) layout += "|t*4";
  layout += "|t*3|t*3,L";
  EXPECT_EQ(Arg(c, "--pipeline-model-parallel-layout"), layout);
  EXPECT_EQ(Arg(c, "--num-query-groups"), "8");
  EXPECT_EQ(Arg(c, "--swiglu"), "");
  EXPECT_EQ(Arg(c, "--global-batch-size"), "2048");
  EXPECT_EQ(Arg(c, "--recompute-granularity"), "full");
  EXPECT_EQ(Arg(c, "--use-distributed-optimizer"), "");
  EXPECT_EQ(Arg(c, "--sequence-parallel"), "");
  EXPECT_EQ(Arg(c, "--context-parallel-size"), "<absent>");
  EXPECT_EQ(c.torchrun.nnodes, 2048);
  EXPECT_EQ(c.torchrun.nproc_per_node, 8);
  EXPECT_EQ(c.deepspeed.gradient_accumulation_steps, 16);
  EXPECT_EQ(c.deepspeed.zero_stage, 1);
  EXPECT_TRUE(c.deepspeed.activation_checkpointing);
}

TEST(LaunchTest, EvenChunksUseTheVirtualStageSize) {
  Job job{*FindBuiltinModel("gpt3-175b"), 1536, {}};  // 96 layers
  Plan p;
  p.tp = 8;
  p.pp = 12;
  p.vpp = 4;
  p.dp = 16;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  EXPECT_EQ(Arg(c, "--num-layers-per-virtual-pipeline-stage"), "2");
  EXPECT_EQ(Arg(c, "--pipeline-model-parallel-layout"), "<absent>");
}

HardwareView View(int64_t gpus) {
  UniformCluster u;
  u.gpu = *FindBuiltinGpuModel("H100-SXM");
  u.gpus = gpus;
  Result<Topology> t = Topology::Build(UniformClusterSpec(u));
  EXPECT_TRUE(t.ok());
  return *ViewOf(*t, gpus);
}

// Issue 16: stock Megatron-LM built a GPT-2-style network from the Llama 3
// arguments (no RMSNorm, RoPE base, bias or tokenizer flags).
TEST(LaunchTest, Llama3ArgumentsNameEveryArchitectureChoice) {
  Job job{*FindBuiltinModel("llama3-405b"), 2048, {}};
  Plan p;
  p.tp = 8;
  p.pp = 16;
  p.dp = 128;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"--num-layers", "126"},
      {"--hidden-size", "16384"},
      {"--ffn-hidden-size", "53248"},
      {"--num-attention-heads", "128"},
      {"--group-query-attention", ""},
      {"--num-query-groups", "8"},
      {"--seq-length", "8192"},
      {"--max-position-embeddings", "8192"},
      {"--normalization", "RMSNorm"},
      {"--norm-epsilon", "1e-05"},
      {"--position-embedding-type", "rope"},
      {"--rotary-base", "500000"},
      {"--swiglu", ""},
      {"--disable-bias-linear", ""},
      {"--attention-dropout", "0"},
      {"--hidden-dropout", "0"},
      {"--untie-embeddings-and-output-weights", ""},
      {"--tokenizer-type", "HuggingFaceTokenizer"},
      {"--tokenizer-model", "meta-llama/Llama-3.1-405B"},
      {"--bf16", ""}};
  for (const auto& [flag, value] : want) EXPECT_EQ(Arg(c, flag), value) << flag;
  EXPECT_TRUE(CheckMegatronArgs(c.megatron, p.gpus()).ok());
}

TEST(LaunchTest, EveryPresetFamilyHasItsArchitectureFlags) {
  const Plan one;
  auto args = [&](const char* preset) {
    return MakeLaunch(Job{*FindBuiltinModel(preset), 64, {}}, one, 8);
  };
  const LaunchConfig gpt = args("gpt3-175b");
  EXPECT_EQ(Arg(gpt, "--normalization"), "LayerNorm");
  EXPECT_EQ(Arg(gpt, "--position-embedding-type"), "learned_absolute");
  EXPECT_EQ(Arg(gpt, "--disable-bias-linear"), "<absent>");
  EXPECT_EQ(Arg(gpt, "--untie-embeddings-and-output-weights"), "<absent>");
  EXPECT_EQ(Arg(gpt, "--swiglu"), "<absent>");
  EXPECT_EQ(Arg(gpt, "--attention-dropout"), "0.1");
  const LaunchConfig mixtral = args("mixtral-8x7b");
  EXPECT_EQ(Arg(mixtral, "--rotary-base"), "1000000");
  EXPECT_EQ(Arg(mixtral, "--num-experts"), "8");
  EXPECT_EQ(Arg(mixtral, "--moe-router-load-balancing-type"), "aux_loss");
  EXPECT_EQ(Arg(mixtral, "--moe-grouped-gemm"), "");
  const LaunchConfig dsv3 = args("deepseek-v3");
  EXPECT_EQ(Arg(dsv3, "--multi-latent-attention"), "");
  EXPECT_EQ(Arg(dsv3, "--kv-lora-rank"), "512");
  EXPECT_EQ(Arg(dsv3, "--q-lora-rank"), "1536");
  EXPECT_EQ(Arg(dsv3, "--qk-pos-emb-head-dim"), "64");
  EXPECT_EQ(Arg(dsv3, "--num-query-groups"), "<absent>");
  EXPECT_EQ(Arg(dsv3, "--moe-router-score-function"), "sigmoid");
  EXPECT_EQ(Arg(dsv3, "--moe-router-num-groups"), "8");
  EXPECT_EQ(Arg(dsv3, "--moe-router-group-topk"), "4");
  EXPECT_EQ(Arg(dsv3, "--moe-router-topk-scaling-factor"), "2.5");
  EXPECT_EQ(Arg(dsv3, "--mtp-num-layers"), "1");
  EXPECT_EQ(Arg(dsv3, "--norm-epsilon"), "1e-06");
}

// Issue 16: the DeepSpeed config of a 405B plan combined ZeRO-2 with pipeline
// stages, which DeepSpeed's pipeline engine asserts against.
TEST(LaunchTest, DeepSpeedRefusesZeroTwoWithPipelineStages) {
  Job job{*FindBuiltinModel("llama3-405b"), 2048, {}};
  Plan p;
  p.tp = 8;
  p.pp = 2;
  p.dp = 1024;
  p.zero = 2;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  EXPECT_EQ(c.deepspeed_ok.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.deepspeed_ok.message().find("ZeRO 0-1 only"), std::string::npos);
  EXPECT_FALSE(CheckDeepSpeedConfig(c.deepspeed, p.gpus()).ok());
  p.zero = 1;
  const LaunchConfig ok = MakeLaunch(job, p, 8);
  EXPECT_TRUE(ok.deepspeed_ok.ok());
  EXPECT_TRUE(CheckDeepSpeedConfig(ok.deepspeed, p.gpus()).ok());
}

// Issue 16: at CP=2 the context parallelism was dropped from the DeepSpeed
// config and train_batch_size = micro x accumulation x dp no longer held.
TEST(LaunchTest, ContextParallelismIsKeptWhereItCanBeAndRefusedWhereItCannot) {
  Job job{*FindBuiltinModel("llama3-70b"), 512, {}};
  Plan p;
  p.tp = 8;
  p.cp = 2;
  p.pp = 1;
  p.dp = 16;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  EXPECT_EQ(Arg(c, "--context-parallel-size"), "2");
  EXPECT_TRUE(CheckMegatronArgs(c.megatron, p.gpus()).ok());
  EXPECT_NE(c.deepspeed_ok.message().find("no context parallelism"), std::string::npos);
  EXPECT_FALSE(CheckDeepSpeedConfig(c.deepspeed, p.gpus()).ok());  // the identity breaks
  EXPECT_EQ(c.torchtitan.cp, 2);
  EXPECT_EQ(c.torchtitan.global_batch_size, 512);
}

// Every preset, planned under DeepSpeed's rules, gives a config DeepSpeed
// accepts; every plan of every preset gives Megatron arguments it accepts.
TEST(LaunchTest, PlannedLaunchesPassTheFrameworksOwnRules) {
  for (const ModelSpec& m : BuiltinModels()) {
    const int64_t gpus = m.name == "gpt-1t" || m.name == "deepseek-v3" ? 2048 : 512;
    const Job job{m, 1024, {}};
    const HardwareView hw = View(gpus);
    SearchOptions o;
    o.top_k = 10;
    Result<PlanSearch> megatron = Search(job, hw, o);
    ASSERT_TRUE(megatron.ok()) << m.name << ": " << megatron.status().ToString();
    for (const RankedPlan& r : megatron->top) {
      const LaunchConfig c = MakeLaunch(job, r.plan, 8);
      const Status st = CheckMegatronArgs(c.megatron, gpus);
      EXPECT_TRUE(st.ok()) << m.name << " " << Describe(r.plan) << ": " << st.ToString();
    }
    o.deepspeed = true;
    Result<PlanSearch> ds = Search(job, hw, o);
    ASSERT_TRUE(ds.ok()) << m.name << ": " << ds.status().ToString();
    for (const RankedPlan& r : ds->top) {
      const LaunchConfig c = MakeLaunch(job, r.plan, 8);
      EXPECT_TRUE(c.deepspeed_ok.ok()) << m.name << ": " << c.deepspeed_ok.ToString();
      const Status st = CheckDeepSpeedConfig(c.deepspeed, gpus);
      EXPECT_TRUE(st.ok()) << m.name << " " << Describe(r.plan) << ": " << st.ToString();
    }
  }
}

TEST(LaunchTest, MegatronRulesCatchBrokenArguments) {
  Job job{*FindBuiltinModel("llama3-70b"), 512, {}};
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.vpp = 5;
  p.dp = 8;
  LaunchConfig c = MakeLaunch(job, p, 8);
  ASSERT_TRUE(CheckMegatronArgs(c.megatron, 256).ok());
  EXPECT_FALSE(CheckMegatronArgs(c.megatron, 100).ok());  // world not a multiple of tp x pp
  auto set = [&](const std::string& flag, const std::string& value) {
    LaunchConfig b = c;
    for (auto& kv : b.megatron) {
      if (kv.first == flag) kv.second = value;
    }
    return CheckMegatronArgs(b.megatron, 256);
  };
  EXPECT_FALSE(set("--num-layers-per-virtual-pipeline-stage", "3").ok());  // 20 per stage
  EXPECT_FALSE(set("--num-query-groups", "4").ok());                       // 4 groups over tp 8
  EXPECT_FALSE(set("--global-batch-size", "100").ok());
  p.vpp = 3;  // 80 layers in 12 chunks: a layout
  c = MakeLaunch(job, p, 8);
  EXPECT_TRUE(CheckMegatronArgs(c.megatron, 256).ok());
  EXPECT_FALSE(set("--pipeline-model-parallel-layout", "E,t*7|t*7,L").ok());
}

TEST(LaunchTest, MoeArguments) {
  Job job{*FindBuiltinModel("deepseek-v3"), 1024, {}};
  Plan p;
  p.ep = 64;
  p.dp = 64;
  p.tp = 1;
  const LaunchConfig c = MakeLaunch(job, p, 8);
  EXPECT_EQ(Arg(c, "--expert-model-parallel-size"), "64");
  EXPECT_EQ(Arg(c, "--num-experts"), "256");
  EXPECT_EQ(Arg(c, "--moe-router-topk"), "8");
  EXPECT_EQ(Arg(c, "--moe-layer-freq"), "([0]*3+[1]*58)");
  EXPECT_EQ(Arg(c, "--tensor-model-parallel-size"), "1");
  EXPECT_EQ(Arg(c, "--sequence-parallel"), "<absent>");
}

}  // namespace
}  // namespace unipool::perf
