#include "core/perf/launch.h"

#include <gtest/gtest.h>

#include <algorithm>

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
