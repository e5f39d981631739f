#include "core/perf/stack.h"

#include <gtest/gtest.h>

#include "core/topology/gpu_model.h"

namespace unipool::perf {
namespace {

TEST(StackTest, EveryNamedProfileResolvesAndNamesItself) {
  for (const std::string& name : StackNames()) {
    Result<Framework> f = StackProfile(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_EQ(f->stack, name);
  }
  EXPECT_FALSE(StackProfile("megatron-2021")->flash_attention);
  EXPECT_TRUE(StackProfile("torchtitan-fsdp2")->zero3_node_aggregation);
  EXPECT_TRUE(StackProfile("mcore-2025")->ep_overlap);
  EXPECT_FALSE(StackProfile("nemo-2024")->ep_overlap);
}

TEST(StackTest, AnUnknownProfileListsTheKnownOnes) {
  Result<Framework> f = StackProfile("jax-2030");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("pytorch-fsdp"), std::string::npos);
}

TEST(StackTest, APowerCapSlowsTheComputeBoundWorkByTheCubeRootOfItsShare) {
  GpuModel h100 = *FindBuiltinGpuModel("H100-SXM");
  EXPECT_DOUBLE_EQ(PowerCapClockFactor(h100), 1.0);
  const GpuEfficiency full = EfficiencyOf(h100, Framework{});
  h100.power_limit = Watts(500);
  const double clock = PowerCapClockFactor(h100);
  EXPECT_NEAR(clock, 0.894, 0.001);  // (500/700)^(1/3)
  const GpuEfficiency capped = EfficiencyOf(h100, Framework{});
  EXPECT_DOUBLE_EQ(capped.gemm_max, full.gemm_max * clock);
  EXPECT_DOUBLE_EQ(capped.attention, full.attention * clock);
  EXPECT_DOUBLE_EQ(capped.fp8_vs_bf16, full.fp8_vs_bf16);  // a ratio of two capped rates
  h100.power_limit = Watts(900);                           // above the board power: no cap
  EXPECT_DOUBLE_EQ(PowerCapClockFactor(h100), 1.0);
}

// torchtitan's SDPA runs FlashAttention-2: a third of peak on Hopper only.
TEST(StackTest, SdpaFlashAttention2CapsAttentionOnHopperOnly) {
  const Framework titan = *StackProfile("torchtitan-fsdp2");
  const GpuModel h100 = *FindBuiltinGpuModel("H100-SXM");
  EXPECT_DOUBLE_EQ(EfficiencyOf(h100, titan).attention, kFlash2HopperAttention);
  EXPECT_GT(EfficiencyOf(h100, Framework{}).attention, kFlash2HopperAttention);
  EXPECT_DOUBLE_EQ(EfficiencyOf(h100, titan).gemm_max, EfficiencyOf(h100, Framework{}).gemm_max);
  const GpuModel a100 = *FindBuiltinGpuModel("A100-SXM4-80GB");
  EXPECT_DOUBLE_EQ(EfficiencyOf(a100, titan).attention, EfficiencyOf(a100, Framework{}).attention);
}

}  // namespace
}  // namespace unipool::perf
