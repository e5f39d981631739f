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

// Fuzz finds: a year past 2262 overflowed the nanoseconds; a time quoted
// with a line break made a two-line error.
TEST(TimeFormatTest, RejectsWhatItCannotHold) {
  EXPECT_EQ(ParseTime("1970-01-01T00:00:00.000Z").value(), Time(0));
  EXPECT_EQ(ParseTime("2261-12-31T23:59:59.999Z").value(), Time(9214646399999000000));
  EXPECT_EQ(ParseTime("2024-02-29T00:00:00.000Z").value(), Time(1709164800000000000));
  for (const char* s :
       {"9999-01-01T00:00:00.000Z", "2262-04-12T00:00:00.000Z", "1969-12-31T23:59:59.999Z",
        "2023-02-29T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-01-01T24:00:00.000Z",
        "2026-01-01T00:60:00.000Z", "2026-01-01T00:00:00.-99Z", "2026-1-01T00:00:00.000Z",
        " 2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Zx"}) {
    EXPECT_FALSE(ParseTime(s).ok()) << s;
  }
  EXPECT_EQ(ParseTime("a\nb").status().message(),
            "'a\\nb' is not an RFC 3339 UTC time from 1970 to 2261 (2026-01-02T03:04:05.678Z)");
}

}  // namespace
}  // namespace unipool::io
