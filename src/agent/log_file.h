// LogFile: one process's log on its node, capped and rotated.
//
// The text is one logical stream, addressed by byte offsets from its start
// (what `unipool logs` follows). It is kept in files `PATH` (the newest
// part), `PATH.1`, ..., `PATH.<files-1>` (the oldest); past `max_bytes`,
// `PATH` becomes `PATH.1` at the next line start (or at once, when one line
// alone is longer), the oldest file is deleted, and `PATH.base` records the
// offset where the new `PATH` begins. A job that writes without end keeps at
// most files x max_bytes on the node (plus one line).
//
// Files are created readable by the agent's user only (0600): logs may hold
// a job's secrets; others read them through the API.
//
// Thread safety: a LogFile is written by one thread; ReadLog and TailLog
// may run on any thread at the same time (a reader that races a rotation
// may get a short read; it continues from the offset it is given).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>

namespace unipool::agent {

struct LogLimits {
  int64_t max_bytes = int64_t{64} << 20;  // per file
  int files = 4;                          // PATH and PATH.1 .. PATH.3
};

class LogFile {
 public:
  LogFile(std::string path, LogLimits limits);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Appends `n` bytes of the process's output, a timestamp before each line.
  void Write(const char* data, size_t n);

 private:
  void Open();
  void Rotate();

  std::string path_;
  LogLimits limits_;
  FILE* out_ = nullptr;
  int64_t size_ = 0;  // of PATH
  int64_t base_ = 0;  // logical offset of PATH's first byte
  bool at_line_start_ = true;
};

// Reads up to `limit` bytes of the stream at `offset`. An offset older than
// what is kept starts at the oldest byte kept. *next: the offset after what
// was read (where to continue).
std::string ReadLog(const std::string& path, int64_t offset, int64_t limit, int64_t* next);
// The last `bytes` bytes of the stream (for diagnosis).
std::string TailLog(const std::string& path, size_t bytes);

// The node-wide budget: in `jobs_dir` (JOB/run-GEN directories), removes
// the runs not in `keep` (running) that were last written more than
// `retention` ago, then the least recently written ones until all runs
// together take at most `budget_bytes`. Returns how many runs it removed.
int CleanRuns(const std::string& jobs_dir, const std::set<std::string>& keep, int64_t budget_bytes,
              std::chrono::seconds retention);

}  // namespace unipool::agent
