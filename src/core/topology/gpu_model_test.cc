#include "core/topology/gpu_model.h"

#include <gtest/gtest.h>

namespace unipool {
namespace {

TEST(GpuModelTest, PowerDefaultsFollowTheMeasuredH100Node) {
  std::optional<GpuModel> h100 = FindBuiltinGpuModel("h100-sxm");
  ASSERT_TRUE(h100.has_value());
  EXPECT_EQ(h100->idle_power, Watts(70));
  EXPECT_EQ(h100->train_power, Watts(600));
  EXPECT_EQ(h100->host_power, Watts(375));
  // A training node: 8 x (600 + 375) = 7.8 kW, 76% of a DGX H100's 10.2 kW.
  EXPECT_EQ(8 * (h100->train_power.value() + h100->host_power.value()), 7800);
}

TEST(GpuModelTest, EveryBuiltinModelHasAnOrderedPowerModel) {
  for (const GpuModel& m : BuiltinGpuModels()) {
    EXPECT_GT(m.idle_power.value(), 0) << m.name;
    EXPECT_LT(m.idle_power, m.train_power) << m.name;
    EXPECT_LT(m.train_power, m.power) << m.name;
    EXPECT_GT(m.host_power.value(), 0) << m.name;
  }
}

TEST(GpuModelTest, GivenPowerFiguresAreKept) {
  GpuModel m{"X",         Tflops(1), Tflops(0), GB(1),     GBps(1),
             Watts(1000), Watts(0),  Watts(50), Watts(200)};
  const GpuModel filled = WithPowerDefaults(m);
  EXPECT_EQ(filled.train_power, Watts(50));
  EXPECT_EQ(filled.host_power, Watts(200));
  EXPECT_EQ(filled.idle_power, Watts(50));  // derived 100 W, but never above training
}

}  // namespace
}  // namespace unipool
