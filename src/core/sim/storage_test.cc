#include "core/sim/storage.h"

#include <gtest/gtest.h>

#include <cmath>

namespace unipool::sim {
namespace {

TEST(SharedBandwidthTest, AloneATransferGetsItsCapOrTheAggregate) {
  SharedBandwidth s(100e9);
  const int64_t a = s.Start(Time(0), 1e12, 200e9);
  EXPECT_DOUBLE_EQ(s.rate(a), 100e9);
  EXPECT_EQ(s.NextCompletion()->first, Seconds(10));
  SharedBandwidth t(100e9);
  const int64_t b = t.Start(Time(0), 1e12, 25e9);
  EXPECT_DOUBLE_EQ(t.rate(b), 25e9);
  EXPECT_EQ(t.NextCompletion()->first, Seconds(40));
}

TEST(SharedBandwidthTest, ConcurrentTransfersShareMaxMinFairly) {
  SharedBandwidth s(100e9);
  const int64_t small = s.Start(Time(0), 1e12, 10e9);  // capped below its share
  const int64_t a = s.Start(Time(0), 1e12, 200e9);
  const int64_t b = s.Start(Time(0), 1e12, 200e9);
  EXPECT_DOUBLE_EQ(s.rate(small), 10e9);
  EXPECT_DOUBLE_EQ(s.rate(a), 45e9);
  EXPECT_DOUBLE_EQ(s.rate(b), 45e9);
  // b leaves after 10 s: a gets the rest of the aggregate.
  s.Remove(Seconds(10), b);
  EXPECT_DOUBLE_EQ(s.rate(a), 90e9);
  // a had 1e12 - 450e9 left: 550e9 at 90 GB/s.
  const auto next = s.NextCompletion();
  EXPECT_EQ(next->second, a);
  EXPECT_EQ(next->first.value(),
            Seconds(10).value() + static_cast<int64_t>(std::ceil(550e9 / 90e9 * 1e9)));
  s.Remove(Seconds(20), 12345);  // unknown: ignored
  EXPECT_EQ(s.active(), 2u);
}

}  // namespace
}  // namespace unipool::sim
