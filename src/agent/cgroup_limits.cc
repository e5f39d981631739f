#include "agent/cgroup_limits.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

namespace unipool::agent {
namespace {

constexpr const char* kWanted[] = {"cpu", "memory", "pids"};

std::set<std::string> ReadWords(const std::string& path) {
  std::set<std::string> out;
  std::ifstream in(path);
  for (std::string w; in >> w;) out.insert(w);
  return out;
}

// Writes `text` to a cgroup file; "" or the errno's words.
std::string Write(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  close(fd);
  return ok ? "" : std::strerror(err);
}

// Enables each missing controller of `want` in dir/cgroup.subtree_control;
// returns the first error ("" if none).
std::string Enable(const std::string& dir, const std::set<std::string>& want) {
  const std::set<std::string> on = ReadWords(dir + "/cgroup.subtree_control");
  std::string error;
  for (const std::string& c : want) {
    if (on.count(c)) continue;
    const std::string e = Write(dir + "/cgroup.subtree_control", "+" + c);
    if (!e.empty() && error.empty()) error = e;
  }
  return error;
}

// Moves this process (all its threads) into the leaf `dir`.
std::string MoveSelf(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return std::strerror(errno);
  return Write(dir + "/cgroup.procs", std::to_string(getpid()));
}

std::string List(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& c : s) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

Delegation DelegateControllers(const std::string& parent, const std::string& base,
                               const std::string& move_self_to) {
  const std::set<std::string> offered = ReadWords(parent + "/cgroup.controllers");
  std::set<std::string> want, absent;
  for (const char* c : kWanted) (offered.count(c) ? want : absent).insert(c);
  std::string error = Enable(parent, want);
  if (!error.empty() && !move_self_to.empty()) {  // "no internal processes": leave parent
    const std::string moved = MoveSelf(move_self_to);
    error = moved.empty() ? Enable(parent, want)
                          : "cannot move the agent to " + move_self_to + ": " + moved;
  }
  if (error.empty()) error = Enable(base, want);
  Delegation d;
  const std::set<std::string> in_parent = ReadWords(parent + "/cgroup.subtree_control");
  const std::set<std::string> in_base = ReadWords(base + "/cgroup.subtree_control");
  std::set<std::string> failed;
  for (const std::string& c : want) {
    (in_parent.count(c) && in_base.count(c) ? d.enabled : failed).insert(c);
  }
  if (!absent.empty()) {
    d.why_not = List(absent) + ": not offered to " + parent +
                " (cgroup.controllers; a hybrid host binds them to cgroup v1, or they were not "
                "delegated to the agent)";
  }
  if (!failed.empty()) {
    d.why_not += std::string(d.why_not.empty() ? "" : "; ") + List(failed) +
                 ": cannot enable them in " + parent + " or " + base + " (" +
                 (error.empty() ? "refused" : error) +
                 "; cgroup v2 enables controllers only in a cgroup with no processes of its own)";
  }
  return d;
}

std::vector<std::pair<std::string, std::string>> LimitFiles(const io::TaskLimits& per_task,
                                                            int64_t tasks) {
  std::vector<std::pair<std::string, std::string>> out;
  tasks = std::max<int64_t>(tasks, 1);
  if (per_task.milli_cpu > 0) {
    // 1000 thousandths of a CPU = one period of CPU time per period.
    const int64_t quota = std::max<int64_t>(1000, per_task.milli_cpu * tasks * kCpuPeriodUs / 1000);
    out.emplace_back("cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodUs));
  }
  if (per_task.memory > 0) {
    const bool fits = per_task.memory <= INT64_MAX / tasks;
    out.emplace_back("memory.max", fits ? std::to_string(per_task.memory * tasks) : "max");
    out.emplace_back("memory.swap.max", "0");
  }
  if (per_task.pids > 0) out.emplace_back("pids.max", std::to_string(per_task.pids * tasks));
  return out;
}

std::string ControllerOf(const std::string& file) { return file.substr(0, file.find('.')); }

int64_t OomKills(const std::string& dir) {
  std::ifstream in(dir + "/memory.events");
  for (std::string key; in >> key;) {
    int64_t n = 0;
    in >> n;
    if (key == "oom_kill") return n;
  }
  return 0;
}

}  // namespace unipool::agent
