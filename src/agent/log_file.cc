#include "agent/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "io/time_format.h"

namespace unipool::agent {
namespace fs = std::filesystem;

namespace {

// A line longer than this past the cap is cut into the next file.
constexpr int64_t kLongLine = 1 << 20;

int64_t SizeOf(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = fs::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(n);
}

int64_t ReadBase(const std::string& path) {
  std::ifstream in(path + ".base");
  int64_t base = 0;
  if (!(in >> base) || base < 0) return 0;
  return base;
}

struct Segment {
  std::string path;
  int64_t start, size;
};

// The files of the stream, oldest first, with where each begins.
std::vector<Segment> Segments(const std::string& path) {
  std::vector<Segment> out;
  const int64_t current = SizeOf(path);
  if (current < 0) return out;
  int64_t start = ReadBase(path);
  out.push_back({path, start, current});
  for (int i = 1;; ++i) {
    const std::string older = path + "." + std::to_string(i);
    const int64_t size = SizeOf(older);
    if (size < 0 || size > start) break;
    start -= size;
    out.push_back({older, start, size});
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

LogFile::LogFile(std::string path, LogLimits limits) : path_(std::move(path)), limits_(limits) {
  limits_.files = std::max(limits_.files, 1);
  limits_.max_bytes = std::max<int64_t>(limits_.max_bytes, 4096);
  base_ = ReadBase(path_);
  size_ = std::max<int64_t>(SizeOf(path_), 0);
  Open();
}

LogFile::~LogFile() {
  if (out_) std::fclose(out_);
}

// Owner-only from its creation (a job of another user that opened it in a
// window after a looser create would keep reading it), never inherited by
// a job (close-on-exec), never through a link.
void LogFile::Open() {
  const int fd = open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  fchmod(fd, 0600);  // (one made by an older agent)
  out_ = fdopen(fd, "a");
  if (out_ == nullptr) close(fd);
}

void LogFile::Rotate() {
  if (out_) std::fclose(out_);
  out_ = nullptr;
  std::error_code ec;
  if (limits_.files == 1) {
    fs::remove(path_, ec);
  } else {
    fs::remove(path_ + "." + std::to_string(limits_.files - 1), ec);
    for (int i = limits_.files - 2; i >= 1; --i) {
      fs::rename(path_ + "." + std::to_string(i), path_ + "." + std::to_string(i + 1), ec);
    }
    fs::rename(path_, path_ + ".1", ec);
  }
  base_ += size_;
  size_ = 0;
  {
    // Written before the new file exists: a reader never pairs the new
    // base with the old file's bytes for long.
    std::ofstream b(path_ + ".base.tmp", std::ios::trunc);
    b << base_ << "\n";
  }
  fs::rename(path_ + ".base.tmp", path_ + ".base", ec);
  Open();
}

void LogFile::Write(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if ((at_line_start_ && size_ >= limits_.max_bytes) || size_ >= limits_.max_bytes + kLongLine) {
      Rotate();
    }
    if (!out_) continue;  // cannot write (a full disk): the output is dropped
    if (at_line_start_) {
      const int w = std::fprintf(out_, "%s ", io::FormatTime(io::WallClock()).c_str());
      size_ += std::max(w, 0);
    }
    std::fputc(data[i], out_);
    ++size_;
    at_line_start_ = data[i] == '\n';
  }
  if (out_) std::fflush(out_);
}

std::string ReadLog(const std::string& path, int64_t offset, int64_t limit, int64_t* next) {
  const std::vector<Segment> segments = Segments(path);
  *next = std::max<int64_t>(offset, 0);
  if (segments.empty()) return "";
  const int64_t end = segments.back().start + segments.back().size;
  *next = std::clamp(*next, segments.front().start, end);
  for (const Segment& s : segments) {
    if (*next >= s.start + s.size) continue;
    std::ifstream in(s.path, std::ios::binary);
    in.seekg(*next - s.start);
    std::string text(static_cast<size_t>(std::min(limit, s.start + s.size - *next)), '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    *next += static_cast<int64_t>(text.size());
    return text;
  }
  return "";
}

std::string TailLog(const std::string& path, size_t bytes) {
  const std::vector<Segment> segments = Segments(path);
  if (segments.empty()) return "";
  const int64_t end = segments.back().start + segments.back().size;
  int64_t at = std::max<int64_t>(end - static_cast<int64_t>(bytes), 0);
  std::string out;
  while (at < end) {
    const std::string part = ReadLog(path, at, end - at, &at);
    if (part.empty()) break;
    out += part;
  }
  return out;
}

int CleanRuns(const std::string& jobs_dir, const std::set<std::string>& keep, int64_t budget_bytes,
              std::chrono::seconds retention) {
  struct Run {
    fs::file_time_type written;
    std::string dir;
    int64_t bytes = 0;
  };
  std::set<std::string> kept;
  for (const std::string& k : keep) kept.insert(fs::path(k).lexically_normal().string());
  std::vector<Run> runs;
  int64_t total = 0;
  std::error_code ec;
  for (const auto& job : fs::directory_iterator(jobs_dir, ec)) {
    for (const auto& run : fs::directory_iterator(job.path(), ec)) {
      Run r{fs::file_time_type::min(), run.path().lexically_normal().string(), 0};
      for (const auto& f : fs::recursive_directory_iterator(run.path(), ec)) {
        if (!f.is_regular_file(ec)) continue;
        r.bytes += static_cast<int64_t>(f.file_size(ec));
        r.written = std::max(r.written, f.last_write_time(ec));
      }
      total += r.bytes;
      if (!kept.contains(r.dir)) runs.push_back(std::move(r));
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const Run& a, const Run& b) { return a.written < b.written; });
  const auto expired = fs::file_time_type::clock::now() - retention;
  int removed = 0;
  for (const Run& r : runs) {
    if (r.written >= expired && total <= budget_bytes) break;
    if (fs::remove_all(r.dir, ec) > 0) ++removed;
    total -= r.bytes;
  }
  for (const auto& job : fs::directory_iterator(jobs_dir, ec)) {
    if (fs::is_empty(job.path(), ec)) fs::remove(job.path(), ec);
  }
  return removed;
}

}  // namespace unipool::agent
