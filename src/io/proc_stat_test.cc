#include "io/proc_stat.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace unipool::io {
namespace {

// A command with spaces and a parenthesis of its own: fields count from
// the last ')'.
TEST(ProcStatTest, FieldsAfterTheLastParenthesis) {
  std::string line = "4242 (python3 (worker) x) S 17 4242 4242 0 -1 4194560";
  for (int i = 10; i <= 23; ++i) line += " " + std::to_string(i * 10);
  line += " 5000 18446744073709551615\n";
  const std::vector<std::string> f = ProcStatFields(line);
  ASSERT_GT(f.size(), 24u);
  EXPECT_EQ(f[1], "4242");
  EXPECT_EQ(f[2], "python3 (worker) x");
  EXPECT_EQ(f[3], "S");
  EXPECT_EQ(f[4], "17");
  EXPECT_EQ(f[24], "5000");
  EXPECT_TRUE(ProcStatFields("garbage without a command").empty());
  EXPECT_TRUE(ProcStatFields(") 1 2 (").empty());
}

// A launcher with two workers, one with a child of its own; a process
// elsewhere is not counted.
TEST(ProcStatTest, TreeSumsEveryDescendant) {
  std::map<int64_t, ProcMemory> procs;
  auto add = [&](int64_t pid, int64_t ppid, int64_t pages) { procs[pid] = {pid, ppid, pages}; };
  add(1, 0, 1000);
  add(10, 1, 100);   // the rank's launcher
  add(11, 10, 20);   // a worker
  add(12, 10, 30);   // a worker
  add(13, 12, 4);    // the worker's data loader
  add(20, 1, 7000);  // someone else
  EXPECT_EQ(TreeRssPages(procs, 10), 154);
  EXPECT_EQ(TreeRssPages(procs, 12), 34);
  EXPECT_EQ(TreeRssPages(procs, 99), 0);
}

// This test process is in the real /proc, with its resident pages.
TEST(ProcStatTest, ReadsTheRealProc) {
  const std::map<int64_t, ProcMemory> procs = ReadProcMemory();
  auto self = procs.find(getpid());
  ASSERT_NE(self, procs.end());
  EXPECT_EQ(self->second.ppid, getppid());
  EXPECT_GT(self->second.rss_pages, 0);
  EXPECT_GE(TreeRssPages(procs, getpid()), self->second.rss_pages);
  EXPECT_TRUE(ReadProcMemory("/nonexistent-proc-root").empty());
}

// Processes end while the agent reads /proc: a file of one that ended
// reads as "" (an ifstream throws from its read, ESRCH, and took the agent
// down once); a scan while children come and go never throws.
TEST(ProcStatTest, ProcessesThatEndWhileReadAreSkipped) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(ReadProcFile("/proc/" + std::to_string(child) + "/stat"), "");
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop) {
      const pid_t p = fork();
      if (p == 0) _exit(0);
      if (p > 0) waitpid(p, nullptr, 0);
    }
  });
  size_t seen = 0;
  for (int i = 0; i < 200; ++i) seen += ReadProcMemory().size();
  stop = true;
  churn.join();
  EXPECT_GT(seen, 0u);
}

}  // namespace
}  // namespace unipool::io
