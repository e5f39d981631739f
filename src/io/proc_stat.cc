#include "io/proc_stat.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace unipool::io {

std::string ReadProcFile(const std::string& path, size_t max_bytes) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;  // the end, or an error (ESRCH: it ended meanwhile)
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::vector<std::string> ProcStatFields(std::string_view line) {
  const size_t open = line.find('(');
  const size_t close = line.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return {};
  }
  std::vector<std::string> f{"", std::string(line.substr(0, open)),
                             std::string(line.substr(open + 1, close - open - 1))};
  while (!f[1].empty() && f[1].back() == ' ') f[1].pop_back();
  std::istringstream in(std::string(line.substr(close + 1)));
  for (std::string v; in >> v;) f.push_back(v);  // field 3 on
  return f;
}

std::map<int64_t, ProcMemory> ReadProcMemory(const std::string& proc_root) {
  std::map<int64_t, ProcMemory> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::vector<std::string> f = ProcStatFields(ReadProcFile(entry.path() / "stat"));
    if (f.size() <= 24) continue;
    ProcMemory m;
    m.pid = std::atoll(f[1].c_str());
    m.ppid = std::atoll(f[4].c_str());
    m.rss_pages = std::atoll(f[24].c_str());
    out[m.pid] = m;
  }
  return out;
}

int64_t TreeRssPages(const std::map<int64_t, ProcMemory>& procs, int64_t root) {
  if (!procs.contains(root)) return 0;
  std::multimap<int64_t, int64_t> children;  // parent -> child
  for (const auto& [pid, m] : procs) {
    if (pid != m.ppid) children.emplace(m.ppid, pid);
  }
  int64_t pages = 0;
  std::vector<int64_t> todo{root};
  for (size_t seen = 0; !todo.empty() && seen <= procs.size(); ++seen) {
    const int64_t pid = todo.back();
    todo.pop_back();
    pages += procs.at(pid).rss_pages;
    auto [from, to] = children.equal_range(pid);
    for (auto it = from; it != to; ++it) todo.push_back(it->second);
  }
  return pages;
}

}  // namespace unipool::io
