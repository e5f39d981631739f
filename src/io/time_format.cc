#include "io/time_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>

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
  std::tm tm{};
  int ms = 0;
  char z = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &z) != 8 ||
      z != 'Z') {
    return InvalidArgument("'" + s + "' is not an RFC 3339 UTC time (2026-01-02T03:04:05.678Z)");
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
