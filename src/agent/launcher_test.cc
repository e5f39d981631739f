#include "agent/launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace unipool::agent {
namespace {

std::string Dir() {
  const std::string d =
      std::filesystem::temp_directory_path() / ("unipool-launcher-" + std::to_string(getpid()));
  std::filesystem::create_directories(d);
  return d;
}

void WaitAll(ProcessGroup& r) {
  for (int i = 0; i < 500 && !r.Poll(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::string Read(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

TEST(LauncherTest, RunsWithEnvironmentAndTimestampedLogs) {
  const std::string d = Dir();
  ProcessGroup r;
  ASSERT_TRUE(r.Start({{{"sh", "-c", "echo rank=$RANK world=$WORLD_SIZE; echo second"},
                        {{"RANK", "3"}, {"WORLD_SIZE", "4"}},
                        d,
                        d + "/rank-3.log",
                        3}})
                  .ok());
  WaitAll(r);
  ASSERT_EQ(r.exits().size(), 1u);
  EXPECT_TRUE(r.all_ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the log copier
  const std::string log = Read(d + "/rank-3.log");
  EXPECT_NE(log.find("Z rank=3 world=4\n"), std::string::npos) << log;
  EXPECT_NE(log.find("Z second\n"), std::string::npos) << log;
  EXPECT_EQ(log.rfind("20", 0), 0u);  // starts with a timestamp
}

TEST(LauncherTest, ExitCodesAndSignalsAreClassified) {
  const std::string d = Dir();
  ProcessGroup r;
  ASSERT_TRUE(r.Start({{{"sh", "-c", "exit 3"}, {}, "", d + "/a.log", 0},
                       {{"sh", "-c", "kill -9 $$"}, {}, "", d + "/b.log", 1}})
                  .ok());
  WaitAll(r);
  ASSERT_EQ(r.exits().size(), 2u);
  EXPECT_FALSE(r.all_ok());
  std::string all;
  for (const ExitInfo& e : r.exits()) all += e.Describe() + "\n";
  EXPECT_NE(all.find("rank 0: exit code 3"), std::string::npos) << all;
  EXPECT_NE(all.find("rank 1: killed by SIGKILL"), std::string::npos) << all;
  EXPECT_NE(all.find("out-of-memory"), std::string::npos) << all;
}

TEST(LauncherTest, StopSendsSigtermThenKillsTheWholeGroup) {
  const std::string d = Dir();
  ProcessGroup r;
  // The shell ignores SIGTERM and has a child: both must go.
  ASSERT_TRUE(r.Start({{{"sh", "-c",
                         "trap '' TERM; sleep 30 & echo $! > " + d + "/child.new; mv " + d +
                             "/child.new " + d + "/child; wait"},
                        {},
                        "",
                        d + "/c.log",
                        0}})
                  .ok());
  for (int i = 0; i < 500 && !std::filesystem::exists(d + "/child"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const pid_t child = std::stoi(Read(d + "/child"));
  r.Stop(/*grace_s=*/1);
  WaitAll(r);
  ASSERT_EQ(r.exits().size(), 1u);
  EXPECT_EQ(r.exits()[0].signal, SIGKILL);  // it ignored SIGTERM, so the grace ran out
  EXPECT_TRUE(r.exits()[0].stopped_by_us);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Gone, or a zombie waiting for whoever reaps orphans here.
  const std::string stat = Read("/proc/" + std::to_string(child) + "/stat");
  EXPECT_TRUE(stat.empty() || stat.find(") Z ") != std::string::npos)
      << "the child outlived the stop: " << stat;
}

TEST(LauncherTest, MissingCommandIsNamed) {
  const std::string d = Dir();
  ProcessGroup r;
  ASSERT_TRUE(r.Start({{{"no-such-command-xyz"}, {}, "", d + "/m.log", 0}}).ok());
  WaitAll(r);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(r.exits()[0].exit_code, 127);
  const std::string tail = r.LogTails(4096);
  EXPECT_NE(tail.find("cannot run no-such-command-xyz"), std::string::npos) << tail;
  EXPECT_NE(DiagnoseLog(tail).text.find("missing"), std::string::npos);
}

TEST(LauncherTest, DiagnosesCommonFailures) {
  EXPECT_NE(DiagnoseLog("[E ProcessGroupNCCL.cpp] Watchdog caught collective operation timeout")
                .text.find("communication timeout (NCCL)"),
            std::string::npos);
  const LogHint gloo_hint = DiagnoseLog(
      "step 7\nRuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed "
      "out waiting 3000ms for recv operation to complete\nexit");
  EXPECT_EQ(gloo_hint.cause, "CommTimeout");
  const std::string& gloo = gloo_hint.text;
  EXPECT_NE(gloo.find("communication timeout (gloo)"), std::string::npos) << gloo;
  EXPECT_NE(gloo.find("(log: \"RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
                      "unbound_buffer.cc:81] Timed out waiting 3000ms for recv operation to "
                      "complete\")"),
            std::string::npos)
      << gloo;
  EXPECT_NE(DiagnoseLog("torch.cuda.OutOfMemoryError: CUDA out of memory.")
                .text.find("GPU out of memory"),
            std::string::npos);
  EXPECT_NE(DiagnoseLog("step 40 loss=nan").text.find("NaN loss"), std::string::npos);
  EXPECT_EQ(DiagnoseLog("all good").cause, "");
  EXPECT_EQ(DiagnoseLog("all good").text, "");
  EXPECT_EQ(WithoutTimestamp("2026-12-07T03:40:42.123Z MemoryError"), "MemoryError");
  EXPECT_EQ(WithoutTimestamp("ror: cut off"), "ror: cut off");
}

}  // namespace
}  // namespace unipool::agent

namespace unipool::agent {
namespace {

// The agent blocks SIGTERM for its own signal thread; its jobs must still
// receive it (preemption gives them a grace period to checkpoint).
TEST(LauncherTest, JobsGetSigtermEvenWhenTheAgentBlocksIt) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &term, &old);
  const std::string d = Dir();
  ProcessGroup r;
  ASSERT_TRUE(r.Start({{{"sh", "-c", "trap 'echo got TERM; exit 0' TERM; sleep 30 & wait"},
                        {},
                        "",
                        d + "/t.log",
                        0}})
                  .ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  r.Stop(/*grace_s=*/20);
  WaitAll(r);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  ASSERT_EQ(r.exits().size(), 1u);
  EXPECT_EQ(r.exits()[0].exit_code, 0);  // its trap ran (SIGKILL would leave no exit code)
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the log copier
  EXPECT_NE(Read(d + "/t.log").find("got TERM"), std::string::npos);
}

}  // namespace
}  // namespace unipool::agent
