#include "core/perf/hardware.h"

#include <gtest/gtest.h>

namespace unipool::perf {
namespace {

Topology Uniform(int64_t gpus, double oversub = 1) {
  UniformCluster u;
  u.gpu = *FindBuiltinGpuModel("H100-SXM");
  u.gpus = gpus;
  u.leaf_gpus = 256;
  u.oversubscription = oversub;
  Result<Topology> t = Topology::Build(UniformClusterSpec(u));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

TEST(HardwareTest, ViewOfUniformCluster) {
  const Topology topo = Uniform(1024, 4);
  Result<HardwareView> hw = ViewOf(topo, 1024);
  ASSERT_TRUE(hw.ok());
  ASSERT_EQ(hw->tiers.size(), 3u);
  EXPECT_EQ(hw->gpu.name, "H100-SXM");
  EXPECT_EQ(hw->scale_up_gpus(), 8);
  EXPECT_EQ(hw->tiers[1].group_gpus, 256);
  EXPECT_EQ(hw->tiers[2].group_gpus, 1024);
  EXPECT_DOUBLE_EQ(hw->tiers[0].bytes_per_s, 3600e9 / 8);  // NVLink 4
  EXPECT_DOUBLE_EQ(hw->tiers[1].bytes_per_s, 400e9 / 8);   // one 400G NIC per GPU
  EXPECT_DOUBLE_EQ(hw->tiers[2].bytes_per_s, 100e9 / 8);   // 4:1 oversubscribed spine
  EXPECT_DOUBLE_EQ(hw->tiers[1].latency_s, 2e-6);
}

TEST(HardwareTest, AllocationDropsTiersItDoesNotSpan) {
  const Topology topo = Uniform(1024);
  Result<HardwareView> hw = ViewOf(topo, 64);
  ASSERT_TRUE(hw.ok());
  ASSERT_EQ(hw->tiers.size(), 2u);
  EXPECT_EQ(hw->tiers.back().group_gpus, 64);
  hw = ViewOf(topo, 8);
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(hw->tiers.size(), 1u);
}

TEST(HardwareTest, AllocationLargerThanClusterIsAnError) {
  const Topology topo = Uniform(64);
  EXPECT_EQ(ViewOf(topo, 65).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ViewOf(topo, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(HardwareTest, LinkRatesByGeneration) {
  EXPECT_EQ(ScaleUpGbps(*FindBuiltinGpuModel("A100-SXM4-80GB")), 2400);
  EXPECT_EQ(ScaleOutGbps(*FindBuiltinGpuModel("A100-SXM4-80GB")), 200);
  EXPECT_EQ(ScaleUpGbps(*FindBuiltinGpuModel("B200")), 7200);
  EXPECT_EQ(ScaleOutGbps(*FindBuiltinGpuModel("B200")), 800);
}

}  // namespace
}  // namespace unipool::perf
