#include "io/time_format.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

TEST(TimeFormatTest, RoundTripsMilliseconds) {
  const Time t(1795966029123000000);  // 2026-11-29T... with 123 ms
  const std::string s = FormatTime(t);
  EXPECT_EQ(s, "2026-11-29T15:27:09.123Z");
  EXPECT_EQ(ParseTime(s).value(), t);
  EXPECT_FALSE(ParseTime("2026-11-29 15:27:09").ok());
  EXPECT_NE(ParseTime("yesterday").status().message().find("RFC 3339"), std::string::npos);
  EXPECT_GT(WallClock(), t - Seconds(86400 * 365));
}

}  // namespace
}  // namespace unipool::io
