#include "agent/log_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("unipool-logfile-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = dir_ + "/rank-0.log";
  }
  void TearDown() override { fs::remove_all(dir_); }
  int64_t Bytes() const {
    int64_t n = 0;
    for (const auto& f : fs::directory_iterator(dir_)) n += static_cast<int64_t>(f.file_size());
    return n;
  }
  // Every line of the stream, read from `offset` in small pieces as
  // `unipool logs -f` does.
  std::string ReadAllFrom(int64_t offset, int64_t* end) {
    std::string out;
    while (true) {
      const std::string part = ReadLog(path_, offset, 1000, &offset);
      if (part.empty()) break;
      out += part;
    }
    *end = offset;
    return out;
  }

  std::string dir_, path_;
};

// A writer without end keeps at most files x max_bytes (plus a line), and
// the files are the agent's user's only.
TEST_F(LogFileTest, CapsWhatAnEndlessWriterKeeps) {
  {
    LogFile log(path_, LogLimits{.max_bytes = 10000, .files = 3});
    const std::string line = "y\n";
    for (int i = 0; i < 100000; ++i) log.Write(line.data(), line.size());
  }
  EXPECT_LE(Bytes(), 3 * 10000 + 200 + 64);  // + the .base file
  EXPECT_TRUE(fs::exists(path_ + ".2"));
  EXPECT_FALSE(fs::exists(path_ + ".3"));
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Offsets are the stream's: reading on across rotations loses and repeats
// nothing of what is kept; an offset older than what is kept starts at the
// oldest byte kept.
TEST_F(LogFileTest, ReadsAcrossRotations) {
  LogFile log(path_, LogLimits{.max_bytes = 4096, .files = 3});
  int64_t offset = 0;
  std::string seen;
  for (int i = 0; i < 600; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    log.Write(line.data(), line.size());
    if (i % 50 == 49) seen += ReadAllFrom(offset, &offset);  // a follower keeps up
  }
  for (int i = 0; i < 600; ++i) {
    EXPECT_NE(seen.find(" line " + std::to_string(i) + "\n"), std::string::npos) << i;
  }
  int64_t end = 0;
  const std::string kept = ReadAllFrom(0, &end);
  EXPECT_EQ(end, offset);
  EXPECT_LT(kept.size(), seen.size());  // the oldest lines were rotated away
  EXPECT_EQ(kept, seen.substr(seen.size() - kept.size()));
  EXPECT_NE(TailLog(path_, 100).find("line 599\n"), std::string::npos);
}

// A line longer than the cap is cut into the next file, not kept whole.
TEST_F(LogFileTest, OneEndlessLineIsCutToo) {
  {
    LogFile log(path_, LogLimits{.max_bytes = 4096, .files = 2});
    const std::string chunk(100000, 'x');
    for (int i = 0; i < 40; ++i) log.Write(chunk.data(), chunk.size());
  }
  EXPECT_LE(Bytes(), 2 * (4096 + (1 << 20)) + 64);
}

// The node budget removes finished runs, oldest first, never a running one;
// the retention removes old finished runs whatever the budget.
TEST_F(LogFileTest, CleanRunsKeepsRunningRunsAndTheBudget) {
  const std::string jobs = dir_ + "/jobs";
  auto make = [&](const std::string& run, int bytes, int age_s) {
    fs::create_directories(jobs + "/" + run);
    const std::string f = jobs + "/" + run + "/rank-0.log";
    std::ofstream(f) << std::string(bytes, 'a');
    fs::last_write_time(f, fs::file_time_type::clock::now() - std::chrono::seconds(age_s));
  };
  make("1/run-1", 1000, 300);  // oldest, running
  make("2/run-1", 1000, 200);
  make("3/run-1", 1000, 100);
  make("4/run-1", 1000, 10);
  EXPECT_EQ(CleanRuns(jobs, {jobs + "/1/run-1"}, 2500, std::chrono::hours(1)), 2);
  EXPECT_TRUE(fs::exists(jobs + "/1/run-1"));
  EXPECT_FALSE(fs::exists(jobs + "/2"));  // its job directory too
  EXPECT_FALSE(fs::exists(jobs + "/3/run-1"));
  EXPECT_TRUE(fs::exists(jobs + "/4/run-1"));
  EXPECT_EQ(CleanRuns(jobs, {}, 1 << 30, std::chrono::seconds(60)), 1);  // job 1's, 300 s old
  EXPECT_TRUE(fs::exists(jobs + "/4/run-1"));
}

}  // namespace
}  // namespace unipool::agent
