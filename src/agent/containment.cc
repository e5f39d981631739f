#include "agent/containment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "io/proc_stat.h"

namespace unipool::agent {
namespace fs = std::filesystem;

namespace {

constexpr char kVar[] = "UNIPOOL_FENCE=";

// FNV-1a: stable across builds, so a restarted (or upgraded) agent derives
// the same tag as its predecessor.
uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool WriteText(const std::string& path, const char* text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text, std::strlen(text)) == static_cast<ssize_t>(std::strlen(text));
  close(fd);
  return ok;
}

// The cgroup v2 mount point and this process's cgroup in it, joined; "" and
// `why` when there is none.
std::string OwnCgroupV2(std::string* why) {
  std::string mount;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream f(line);
    std::string dev, dir, type;
    f >> dev >> dir >> type;
    if (type == "cgroup2") {
      mount = dir;
      break;
    }
  }
  if (mount.empty()) {
    *why = "no cgroup v2 mount";
    return "";
  }
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) == 0) return line.size() > 4 ? mount + line.substr(3) : mount;
  }
  *why = "this process is in no cgroup v2";
  return "";
}

bool HasTag(const std::string& environ, const std::string& needle) {
  // Entries are NUL-separated: match at the start or right after a NUL.
  for (size_t at = environ.find(needle); at != std::string::npos;
       at = environ.find(needle, at + 1)) {
    if (at == 0 || environ[at - 1] == '\0') return true;
  }
  return false;
}

std::string ReadEnviron(const char* pid) {
  return io::ReadProcFile(std::string("/proc/") + pid + "/environ", 1 << 20);
}

}  // namespace

int KillTagged(const std::string& prefix) {
  const std::string needle = kVar + prefix;
  const pid_t self = getpid();
  int total = 0;
  // Again until a pass finds nothing: a process may fork while we scan.
  for (int pass = 0; pass < 5; ++pass) {
    DIR* proc = opendir("/proc");
    if (!proc) return total;
    int killed = 0;
    while (dirent* e = readdir(proc)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
      if (pid == self) continue;
      if (HasTag(ReadEnviron(e->d_name), needle) && kill(pid, SIGKILL) == 0) ++killed;
    }
    closedir(proc);
    total += killed;
    if (killed == 0) break;
  }
  return total;
}

void KillCgroupTree(const std::string& dir, bool remove) {
  if (dir.empty() || !fs::exists(dir)) return;
  WriteText(dir + "/cgroup.kill", "1");  // the whole subtree, atomically
  if (!remove) return;
  std::vector<std::string> dirs;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) dirs.push_back(it->path().string());
  }
  dirs.push_back(dir);
  // Deepest first; a cgroup is removable once its killed processes are gone
  // (they exit within milliseconds; a process stuck in the kernel, never).
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    for (int i = 0; i < 100 && rmdir(it->c_str()) != 0 && errno == EBUSY; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

namespace {

// An agent's leaf beside its runs (cgroup_limits.h): "unipool-TAG-agent".
bool IsAgentLeaf(const fs::path& dir) {
  const std::string name = dir.filename().string();
  return name.starts_with("unipool-") && name.ends_with("-agent");
}

}  // namespace

Containment::Containment(const std::string& work_dir, const std::string& node,
                         const std::string& cgroup) {
  std::error_code ec;
  const fs::path abs = fs::weakly_canonical(fs::absolute(work_dir, ec), ec);
  tag_ = node + "." + Hex(Fnv1a(abs.string() + "\n" + node)).substr(0, 12);
  std::string why = "--cgroup off";
  if (cgroup != "off") {
    std::string parent = cgroup == "auto" ? OwnCgroupV2(&why) : cgroup;
    // An agent of this process moved it into its leaf: the runs go beside it.
    if (cgroup == "auto" && IsAgentLeaf(parent)) parent = fs::path(parent).parent_path().string();
    if (!parent.empty()) {
      const std::string base = parent + "/unipool-" + tag_;
      if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) {
        why = "cannot create " + base + ": " + std::strerror(errno);
      } else if (!fs::exists(base + "/cgroup.kill")) {
        why = "no cgroup.kill in " + base + " (Linux 5.14 or later has it)";
        rmdir(base.c_str());
      } else {
        base_ = base;
        delegation_ = DelegateControllers(
            parent, base, cgroup == "auto" ? parent + "/unipool-" + tag_ + "-agent" : "");
      }
    }
  }
  mode_ = base_.empty() ? "process tags (" + why + ")" : "cgroup v2 (" + base_ + ")";
  if (base_.empty()) delegation_.why_not = "no cgroup v2 for the runs (" + why + ")";
}

std::string Containment::limits_note() const {
  return delegation_.why_not.empty()
             ? ""
             : "CPU, memory and pids limits not enforced: " + delegation_.why_not;
}

std::string Containment::RunDir(int64_t job, int64_t generation) const {
  return base_ + "/job-" + std::to_string(job) + "-run-" + std::to_string(generation);
}

std::string Containment::RunTag(int64_t job, int64_t generation) const {
  return tag_ + "/" + std::to_string(job) + "/" + std::to_string(generation);
}

std::string Containment::PrepareRun(int64_t job, int64_t generation, const io::TaskLimits& limits,
                                    int64_t tasks, std::string* not_enforced) const {
  std::string missing;
  const auto note = [&missing](const std::string& what) {
    missing += (missing.empty() ? "" : "; ") + what;
  };
  std::string procs;
  const std::string dir = RunDir(job, generation);
  if (base_.empty()) {
    if (limits.any()) note(delegation_.why_not);
  } else if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    if (limits.any()) note("cannot create " + dir + ": " + std::strerror(errno));
  } else {
    procs = dir + "/cgroup.procs";
    std::string uncontrolled;  // files whose controller this agent lacks
    for (const auto& [file, value] : LimitFiles(limits, tasks)) {
      if (!delegation_.enabled.count(ControllerOf(file))) {
        if (file != "memory.swap.max") uncontrolled += (uncontrolled.empty() ? "" : ", ") + file;
      } else if (!WriteText(dir + "/" + file, value.c_str()) && file != "memory.swap.max") {
        note(file + " " + value + ": " + std::strerror(errno));  // (no swap: no such file)
      }
    }
    if (!uncontrolled.empty()) note(uncontrolled + " (" + delegation_.why_not + ")");
  }
  if (not_enforced) *not_enforced = missing;
  return procs;
}

int64_t Containment::OomKills(int64_t job, int64_t generation) const {
  return base_.empty() ? 0 : agent::OomKills(RunDir(job, generation));
}

int Containment::KillRun(int64_t job, int64_t generation) const {
  if (!base_.empty()) {
    KillCgroupTree(RunDir(job, generation), true);
  }
  std::string exact = RunTag(job, generation);
  exact.push_back('\0');  // the whole value: run 1 is not run 12
  return KillTagged(exact);
}

int Containment::KillAll() const {
  if (!base_.empty()) {
    KillCgroupTree(base_, false);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(base_, ec)) {
      if (e.is_directory()) KillCgroupTree(e.path().string(), true);
    }
  }
  return KillTagged(tag_ + "/");
}

}  // namespace unipool::agent
