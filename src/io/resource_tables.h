// The tables `get` prints for jobs, nodes and queues (kubectl's columns,
// squeue's and sinfo's facts), built from the API's JSON objects. Pure:
// the time "now" is a parameter, so rows are testable.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace unipool::io {

using Json = nlohmann::json;

// A span of seconds the way kubectl prints ages: 45s, 7m30s, 95m, 5h20m,
// 30h, 3d4h, 12d, 2y.
std::string HumanDuration(int64_t seconds);

// The API's RFC 3339 time at `j`, in seconds since the epoch; nullopt when
// absent or unreadable.
std::optional<int64_t> EpochSeconds(const Json& j);

// j[key] as a cell: "-" when absent, null or empty.
std::string Cell(const Json& j, const char* key);
// `s` cut to `n` characters, ending in "..." when cut.
std::string Clip(std::string s, size_t n);

// sacct's ExitCode of a job: "code:signal" ("0:0", "3:0", "0:9"), "-" when
// its processes have not ended (or ended without one: cancelled, hung).
std::string ExitCell(const Json& job);
// How long a job's last run ran: start to end, or to `now` while it runs;
// "-" while pending.
std::string ElapsedCell(const Json& job, int64_t now);

// One kind of object `get` lists: its API collection, watch kind, the
// `-o name` prefix and its table.
struct Kind {
  const char* path;   // API collection, e.g. /v1/jobs
  const char* watch;  // the watch API's kind
  const char* name;   // job, node, queue
  const char* key;    // the field naming one object: id or name
  std::vector<std::string> (*header)(bool wide);
  std::vector<std::string> (*row)(const Json&, bool wide, int64_t now);
};
// jobs|job, nodes|node, queues|queue; nullopt otherwise.
std::optional<Kind> KindOf(const std::string& what);

// kind/name, the way `-o name` prints an object (kubectl's form).
std::string ObjectName(const Kind& kind, const Json& object);

}  // namespace unipool::io
