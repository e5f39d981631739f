#include "core/train/signals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace unipool::train {
namespace {

RankSample Sample(int32_t rank, int64_t step, double step_s, double comm_s = 0, double data_s = 0,
                  int32_t steps = 1) {
  RankSample s;
  s.rank = rank;
  s.node = "n" + std::to_string(rank / 2);
  s.step = step;
  s.steps = steps;
  s.step_time = Duration(static_cast<int64_t>(step_s * 1e9));
  s.comm_time = Duration(static_cast<int64_t>(comm_s * 1e9));
  s.data_time = Duration(static_cast<int64_t>(data_s * 1e9));
  return s;
}

// Four ranks of a synchronous job: rank 3 computes 3x longer and the others
// wait for it in the all-reduce, so every step takes as long.
TEST(SignalWindowTest, FindsTheRankTheOthersWaitFor) {
  SignalWindow w;
  std::vector<Finding> found;
  int64_t at = 0;
  for (int64_t step = 1; step <= 30 && found.empty(); ++step) {
    for (int32_t r = 0; r < 4; ++r) {
      const double comm = r == 3 ? 0.01 : 0.21;
      for (const Finding& f : w.AddRank(Sample(r, step, 0.31, comm))) found.push_back(f), at = step;
    }
  }
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kind, FindingKind::kStraggler);
  EXPECT_EQ(found[0].rank, 3);
  EXPECT_EQ(found[0].node, "n1");
  EXPECT_NEAR(found[0].factor, 3.0, 0.01);
  EXPECT_EQ(at, 10);  // straggler_steps
  EXPECT_EQ(found[0].Describe(),
            "rank 3 on n1 is 3.0x slower than the median rank for 10 steps, to step 10 (0.300 s "
            "busy per step vs 0.100 s; data loading 0% of it)");
  // Reported once while it stays slow.
  for (int64_t step = 31; step <= 60; ++step)
    EXPECT_TRUE(w.AddRank(Sample(3, step, 0.31, 0.01)).empty());
}

TEST(SignalWindowTest, CountsStepsAcrossSamplesAndStartsOverWhenItRecovers) {
  SignalWindow w;
  for (int32_t r = 0; r < 3; ++r) w.AddRank(Sample(r, 5, 0.1, 0, 0, 5));
  EXPECT_TRUE(w.AddRank(Sample(3, 5, 0.3, 0, 0, 5)).empty());
  EXPECT_TRUE(w.AddRank(Sample(3, 9, 0.1, 0, 0, 4)).empty());  // recovered: back to 0
  EXPECT_TRUE(w.AddRank(Sample(3, 14, 0.3, 0, 0, 5)).empty());
  EXPECT_EQ(w.AddRank(Sample(3, 19, 0.3, 0, 0, 5)).size(), 1u);  // 10 steps in a row
}

TEST(SignalWindowTest, ADataLoadingStragglerIsNamedSo) {
  SignalWindow w;
  for (int32_t r = 0; r < 3; ++r) w.AddRank(Sample(r, 10, 0.1, 0, 0.01, 10));
  EXPECT_TRUE(w.AddRank(Sample(3, 10, 0.4, 0, 0.3, 10)).empty());  // one sample: not yet
  std::vector<Finding> f = w.AddRank(Sample(3, 20, 0.4, 0, 0.3, 10));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, FindingKind::kDataStraggler);
  EXPECT_NEAR(f[0].data_share, 0.75, 1e-9);
  EXPECT_STREQ(FindingName(f[0].kind), "DataStraggler");
}

// A loaded host delays a short step's wake-up by tens of ms: 1.9x the
// median of 50 ms steps is jitter, and so is one second-long sample of a
// descheduled rank, however many steps it averages.
TEST(SignalWindowTest, JitterAndOneBadSampleAreNoStragglers) {
  SignalWindow w;
  for (int64_t step = 20; step <= 400; step += 20) {
    for (int32_t r = 0; r < 3; ++r) w.AddRank(Sample(r, step, 0.05, 0, 0, 20));
    EXPECT_TRUE(w.AddRank(Sample(3, step, 0.095, 0, 0, 20)).empty()) << step;
  }
  SignalWindow burst;
  for (int32_t r = 0; r < 3; ++r) burst.AddRank(Sample(r, 20, 0.1, 0, 0, 20));
  EXPECT_TRUE(burst.AddRank(Sample(3, 20, 0.5, 0, 0, 20)).empty());
  EXPECT_TRUE(burst.AddRank(Sample(3, 40, 0.1, 0, 0, 20)).empty());
  EXPECT_TRUE(burst.AddRank(Sample(3, 60, 0.5, 0, 0, 20)).empty());  // not in a row
}

TEST(SignalWindowTest, EvenRanksAreNoStragglers) {
  SignalWindow w;
  for (int64_t step = 1; step <= 50; ++step) {
    for (int32_t r = 0; r < 8; ++r) {
      EXPECT_TRUE(w.AddRank(Sample(r, step, 0.1 + 0.01 * r)).empty());
    }
  }
  SignalWindow alone;  // one rank has no one to be slower than
  for (int64_t step = 1; step <= 50; ++step) EXPECT_TRUE(alone.AddRank(Sample(0, step, 9)).empty());
}

TEST(SignalWindowTest, NonFiniteLossOnceUntilItIsFiniteAgain) {
  SignalWindow w;
  EXPECT_TRUE(w.AddLoss(1, 2.5, std::nullopt).empty());
  std::vector<Finding> f = w.AddLoss(2, std::numeric_limits<double>::quiet_NaN(), std::nullopt);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, FindingKind::kNonFiniteLoss);
  EXPECT_EQ(f[0].Describe(), "loss is NaN at step 2");
  EXPECT_TRUE(w.AddLoss(3, std::numeric_limits<double>::quiet_NaN(), std::nullopt).empty());
  EXPECT_TRUE(w.AddLoss(4, 2.4, std::nullopt).empty());
  f = w.AddLoss(5, std::numeric_limits<double>::infinity(), std::nullopt);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].Describe(), "loss is Inf at step 5");
}

TEST(SignalWindowTest, GradientSpikeAgainstTheRecentMedian) {
  SignalWindow w;
  for (int64_t step = 1; step <= 20; ++step) {
    EXPECT_TRUE(w.AddLoss(step, 2.0, 1.0 + 0.01 * (step % 3)).empty());
  }
  std::vector<Finding> f = w.AddLoss(21, 2.0, 40.0);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, FindingKind::kGradientSpike);
  EXPECT_NEAR(f[0].baseline, 1.01, 1e-9);
  EXPECT_TRUE(w.AddLoss(22, 2.0, 45.0).empty());  // the same spike
  EXPECT_TRUE(w.AddLoss(23, 2.0, 1.0).empty());
  EXPECT_EQ(w.AddLoss(24, 2.0, 50.0).size(), 1u);  // a new one
  // Too few norms to judge: no finding.
  SignalWindow fresh;
  EXPECT_TRUE(fresh.AddLoss(1, 2.0, 1.0).empty());
  EXPECT_TRUE(fresh.AddLoss(2, 2.0, 100.0).empty());
}

constexpr int64_t kMiB = 1 << 20;

// Loading a model grows memory before the warm-up ends: no finding. A
// leak of 8 MiB per step after it is found once it passes 256 MiB.
TEST(SignalWindowTest, MemoryGrowthPastTheWarmUp) {
  SignalWindow w;
  std::vector<Finding> found;
  for (int64_t step = 0; step <= 10; ++step) {  // loading: 100 MiB to 2 GiB
    EXPECT_TRUE(w.AddMemory(1, "n0", step, Bytes((100 + 200 * step) * kMiB)).empty());
  }
  int64_t at = 0;
  for (int64_t step = 11; step <= 80 && found.empty(); ++step) {
    found = w.AddMemory(1, "n0", step, Bytes((2100 + 8 * (step - 10)) * kMiB));
    at = step;
  }
  // The baseline is step 10's 2,100 MiB; the bound max(256 MiB, 25%) =
  // 525 MiB, passed at step 10 + 66.
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(at, 76);
  EXPECT_EQ(found[0].kind, FindingKind::kMemoryGrowth);
  EXPECT_EQ(found[0].rss_baseline.value(), 2100 * kMiB);
  EXPECT_EQ(found[0].steps, 66);
  EXPECT_EQ(found[0].Describe(),
            "rank 1 on n0: resident memory grew from 2100 MiB at step 10 to 2628 MiB at step 76 "
            "(+25%, 8.0 MiB per step)");
  EXPECT_STREQ(FindingName(found[0].kind), "MemoryGrowth");
  EXPECT_TRUE(w.AddMemory(1, "n0", 77, Bytes(2700 * kMiB)).empty());  // the same growth
  EXPECT_EQ(w.ranks().at(1).rss.value(), 2700 * kMiB);
  EXPECT_TRUE(w.AddMemory(1, "n0", 78, Bytes(2200 * kMiB)).empty());   // freed
  EXPECT_EQ(w.AddMemory(1, "n0", 79, Bytes(2700 * kMiB)).size(), 1u);  // and again
}

// Small processes: the 256 MiB floor, not the share, is the bound; steady
// memory that wobbles is never found.
TEST(SignalWindowTest, MemoryGrowthHasAFloor) {
  SignalWindow w;
  for (int64_t step = 0; step <= 200; ++step) {
    const int64_t wobble = (step % 7) * 20 * kMiB;
    EXPECT_TRUE(w.AddMemory(0, "n0", step, Bytes(40 * kMiB + wobble)).empty()) << step;
  }
  // The baseline is step 10's 100 MiB.
  EXPECT_TRUE(w.AddMemory(0, "n0", 201, Bytes(350 * kMiB)).empty());  // +250 MiB
  EXPECT_EQ(w.AddMemory(0, "n0", 202, Bytes(360 * kMiB)).size(), 1u);
}

}  // namespace
}  // namespace unipool::train
