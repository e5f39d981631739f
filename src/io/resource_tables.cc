#include "io/resource_tables.h"

#include <cstdio>

#include "io/time_format.h"

namespace unipool::io {

std::string HumanDuration(int64_t s) {
  if (s < 0) s = 0;
  const int64_t m = s / 60, h = s / 3600, d = s / 86400;
  auto two = [](int64_t a, const char* ua, int64_t b, const char* ub) {
    return std::to_string(a) + ua + (b == 0 ? "" : std::to_string(b) + ub);
  };
  if (s < 120) return std::to_string(s) + "s";
  if (m < 10) return two(m, "m", s % 60, "s");
  if (m < 180) return std::to_string(m) + "m";
  if (h < 8) return two(h, "h", m % 60, "m");
  if (h < 48) return std::to_string(h) + "h";
  if (h < 24 * 8) return two(d, "d", h % 24, "h");
  if (d < 730) return std::to_string(d) + "d";
  return std::to_string(d / 365) + "y";
}

std::optional<int64_t> EpochSeconds(const Json& j) {
  if (!j.is_string()) return std::nullopt;
  Result<Time> at = ParseTime(j.get<std::string>());
  if (!at.ok() || at->value() <= 0) return std::nullopt;
  return at->value() / 1000000000;
}

std::string Cell(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_string()) {
    return j[key].get<std::string>().empty() ? "-" : j[key].get<std::string>();
  }
  return j[key].dump();
}

std::string Clip(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n - 3) + "...";
  return s;
}

std::string ExitCell(const Json& job) {
  const Json code = job.value("exitCode", Json()), sig = job.value("exitSignal", Json());
  if (!code.is_number_integer() && !sig.is_number_integer()) return "-";
  return std::to_string(code.is_number_integer() ? code.get<int64_t>() : 0) + ":" +
         std::to_string(sig.is_number_integer() ? sig.get<int64_t>() : 0);
}

std::string ElapsedCell(const Json& job, int64_t now) {
  std::optional<int64_t> start = EpochSeconds(job.value("started", Json()));
  if (!start) return "-";
  const std::string state = job.value("state", "");
  if (state == "Pending") return "-";  // between runs: nothing runs now
  std::optional<int64_t> end = EpochSeconds(job.value("finished", Json()));
  if (state == "Running" || state == "Preempting" || !end) end = now;
  return HumanDuration(*end - *start);
}

namespace {

std::string AgeCell(const Json& t, int64_t now) {
  std::optional<int64_t> at = EpochSeconds(t);
  return at ? HumanDuration(now - *at) : "-";
}

// Pending: squeue's reason; otherwise "-".
std::string ReasonCell(const Json& j) {
  return j.value("state", "") == "Pending" ? Cell(j, "reason") : "-";
}

// A pending job's estimated start, as "in 12m" (squeue --start).
std::string StartCell(const Json& j, int64_t now) {
  std::optional<int64_t> at = EpochSeconds(j.value("estimatedStart", Json()));
  if (!at) return "-";
  return *at <= now ? "now" : "in " + HumanDuration(*at - now);
}

std::vector<std::string> JobHeader(bool wide) {
  std::vector<std::string> h = {"ID",      "NAME", "QUEUE", "STATE",  "GPUS",
                                "RESTARTS", "ELAPSED", "AGE", "EXIT", "REASON"};
  if (wide) h.insert(h.end(), {"START", "OWNER", "NODES", "MESSAGE"});
  return h;
}

std::vector<std::string> JobRow(const Json& j, bool wide, int64_t now) {
  const Json& spec = j.value("spec", Json::object());
  std::vector<std::string> r = {Cell(j, "id"),
                                Clip(Cell(j, "name"), 30),
                                Cell(j, "queue"),
                                Cell(j, "state"),
                                Cell(spec, "gpus"),
                                Cell(j, "restarts"),
                                ElapsedCell(j, now),
                                AgeCell(j.value("submitted", Json()), now),
                                ExitCell(j),
                                ReasonCell(j)};
  if (wide) {
    std::string nodes;
    for (const Json& t : j.value("tasks", Json::array())) {
      const std::string n = t.value("node", "");
      if (("," + nodes + ",").find("," + n + ",") == std::string::npos) {
        nodes += (nodes.empty() ? "" : ",") + n;
      }
    }
    r.insert(r.end(), {StartCell(j, now), Cell(j, "owner"), Clip(nodes.empty() ? "-" : nodes, 40),
                       Clip(Cell(j, "message"), 60)});
  }
  return r;
}

std::vector<std::string> NodeHeader(bool wide) {
  std::vector<std::string> h = {"NAME", "STATE", "GPUS", "USED", "FREE", "PARTITION", "HEALTH"};
  if (wide) h.insert(h.end(), {"MODEL", "ADMIN", "WHY", "HEARTBEAT"});
  return h;
}

std::vector<std::string> NodeRow(const Json& n, bool wide, int64_t now) {
  std::vector<std::string> r = {Cell(n, "name"),          Cell(n, "state"),
                                Cell(n, "gpus"),          Cell(n, "gpusAllocated"),
                                Cell(n, "gpusFree"),      Cell(n, "partition"),
                                Clip(Cell(n, "health"), 30)};
  if (wide) {
    r.insert(r.end(), {Cell(n, "gpuModel"), Cell(n, "admin"), Clip(Cell(n, "why"), 40),
                       AgeCell(n.value("lastHeartbeat", Json()), now)});
  }
  return r;
}

std::vector<std::string> QueueHeader(bool wide) {
  std::vector<std::string> h = {"NAME",   "PARENT", "GUARANTEE", "LIMIT",
                                "WEIGHT", "USED",   "PENDING",   "RUNNING"};
  if (wide)
    h.insert(h.end(), {"POLICY", "ORDER", "GRACE", "PENDING-GPUS", "USAGE-GPU-H", "FAIRSHARE"});
  return h;
}

std::string Fixed(const Json& j, const char* key, const char* format) {
  if (!j.contains(key) || !j[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, j[key].get<double>());
  return buf;
}

std::vector<std::string> QueueRow(const Json& q, bool wide, int64_t) {
  std::vector<std::string> r = {Cell(q, "name"),        Cell(q, "parent"),     Cell(q, "guarantee"),
                                Cell(q, "limit"),       Cell(q, "weight"),     Cell(q, "usedGpus"),
                                Cell(q, "pendingJobs"), Cell(q, "runningJobs")};
  if (wide) {
    r.insert(r.end(), {Cell(q, "policy"), Cell(q, "order"), Cell(q, "graceSeconds") + "s",
                       Cell(q, "pendingGpus"), Fixed(q, "usageGpuHours", "%.1f"),
                       Fixed(q, "fairShare", "%.3f")});
  }
  return r;
}

}  // namespace

std::optional<Kind> KindOf(const std::string& what) {
  if (what == "jobs" || what == "job") {
    return Kind{"/v1/jobs", "jobs", "job", "id", JobHeader, JobRow};
  }
  if (what == "nodes" || what == "node") {
    return Kind{"/v1/nodes", "nodes", "node", "name", NodeHeader, NodeRow};
  }
  if (what == "queues" || what == "queue") {
    return Kind{"/v1/queues", "queues", "queue", "name", QueueHeader, QueueRow};
  }
  return std::nullopt;
}

std::string ObjectName(const Kind& kind, const Json& object) {
  return std::string(kind.name) + "/" + Cell(object, kind.key);
}

}  // namespace unipool::io
