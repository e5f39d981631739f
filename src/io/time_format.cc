#include "io/time_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "io/quote.h"

namespace unipool::io {

std::string FormatTime(Time t) {
  const int64_t ns = t.value();
  const std::time_t secs = ns / 1000000000;
  std::tm tm;
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>((ns / 1000000) % 1000));
  return buf;
}

Result<Time> ParseTime(const std::string& s) {
  // Exactly this shape: sscanf alone would take signs, spaces and short fields.
  static constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddZ";
  bool ok = s.size() == kShape.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    ok = kShape[i] == 'd' ? s[i] >= '0' && s[i] <= '9' : s[i] == kShape[i];
  }
  std::tm tm{};
  int ms = 0;
  if (ok) {
    std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
    const int year = tm.tm_year;
    const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    // Nanoseconds since 1970 in an int64 reach into 2262.
    ok = year >= 1970 && year <= 2261 && tm.tm_mon >= 1 && tm.tm_mon <= 12 && tm.tm_mday >= 1 &&
         tm.tm_mday <= days[tm.tm_mon - 1] && tm.tm_hour <= 23 && tm.tm_min <= 59 &&
         tm.tm_sec <= 59;
  }
  if (!ok) {
    return InvalidArgument(
        Quote(s) + " is not an RFC 3339 UTC time from 1970 to 2261 (2026-01-02T03:04:05.678Z)");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return Time(static_cast<int64_t>(timegm(&tm)) * 1000000000 + int64_t{ms} * 1000000);
}

Time WallClock() {
  return Time(std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count());
}

}  // namespace unipool::io
