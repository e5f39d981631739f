// Linux's /proc/PID/stat line (proc(5)): "pid (comm) state ppid ...", the
// command in parentheses possibly holding spaces and parentheses itself.
// The server reads its own process metrics from it, the agent its ranks'
// resident memory, each process tree summed (a launcher, a container's
// init or torchrun with its workers is one rank's memory).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace unipool::io {

// A /proc file's text, up to about `max_bytes`; "" when it cannot be read
// (the process ended: reading a dead process's file fails with ESRCH,
// which an ifstream would throw from).
std::string ReadProcFile(const std::string& path, size_t max_bytes = 1 << 16);

// The line's fields, f[i] being field i of proc(5) (1 the pid, 2 the
// command without its parentheses, 4 the parent, 24 rss in pages). Empty
// when the line has no "(comm)".
std::vector<std::string> ProcStatFields(std::string_view line);

// What the memory watch needs of one process.
struct ProcMemory {
  int64_t pid = 0, ppid = 0;
  int64_t rss_pages = 0;
};

// Each readable process under `proc_root` ("/proc"), by pid. Processes
// that end while it reads are skipped.
std::map<int64_t, ProcMemory> ReadProcMemory(const std::string& proc_root = "/proc");

// The resident pages of `root` and every process under it (0 when `root`
// is not in `procs`).
int64_t TreeRssPages(const std::map<int64_t, ProcMemory>& procs, int64_t root);

}  // namespace unipool::io
