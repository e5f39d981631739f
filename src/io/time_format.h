// Times on the wire: RFC 3339 in UTC with milliseconds
// ("2026-11-29T15:04:05.123Z"), used by the API, the store, the logs and
// the agents' log lines alike; and the edges' wall clock.
#pragma once

#include <string>

#include "core/base/status.h"
#include "core/base/units.h"

namespace unipool::io {

// `t` is nanoseconds since the Unix epoch.
std::string FormatTime(Time t);
// Errors: not "YYYY-MM-DDTHH:MM:SS.mmmZ" exactly, not a day of the calendar,
// or outside 1970 to 2261 (what int64 nanoseconds since 1970 hold).
Result<Time> ParseTime(const std::string& s);
// Now, in nanoseconds since the Unix epoch (the system clock).
Time WallClock();

}  // namespace unipool::io
