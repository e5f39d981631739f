#include "core/sim/young_daly.h"

#include <gtest/gtest.h>

#include <cmath>

namespace unipool::sim {
namespace {

TEST(YoungDalyTest, ClosedForms) {
  // delta = 30 s, M = 11,130 s: Young = sqrt(2 * 30 * 11130) = 817.19 s.
  EXPECT_NEAR(ToSeconds(YoungInterval(Seconds(30), Seconds(11130))), 817.1903083, 1e-6);
  // Daly: 817.190309 * (1 + sqrt(30/22260)/3 + 30/200340) - 30.
  const double young = 817.1903083125742;
  const double daly = young * (1 + std::sqrt(30.0 / 22260) / 3 + 30.0 / 200340) - 30;
  EXPECT_NEAR(ToSeconds(DalyInterval(Seconds(30), Seconds(11130))), daly, 1e-6);
  EXPECT_NEAR(daly, 797.32, 0.01);
  // Checkpoints slower than half the MTBF: checkpoint every MTBF.
  EXPECT_EQ(DalyInterval(Seconds(300), Seconds(100)), Seconds(100));
}

TEST(YoungDalyTest, FirstOrderEttrOfLlama3) {
  // 2,048 nodes at 3.79 failures per 1,000 node-days: M = 11,131 s.
  const Duration m = JobMtbf(3.79, 2048);
  EXPECT_NEAR(ToSeconds(m), 1000.0 * 86400 / (3.79 * 2048), 1e-6);
  EXPECT_NEAR(FirstOrderEttr(Seconds(30), m, Seconds(300)), 0.9088, 1e-4);
  EXPECT_NEAR(FirstOrderEttr(Seconds(30), m, Seconds(600)), 0.8871, 1e-4);
}

}  // namespace
}  // namespace unipool::sim
