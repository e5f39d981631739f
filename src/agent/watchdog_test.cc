#include "agent/watchdog.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/containment.h"
#include "agent/launcher.h"
#include "agent/steady_clock.h"

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

class WatchdogTest : public ::testing::Test {
 protected:
  WatchdogTest()
      : dir_(fs::temp_directory_path() / ("unipool-watchdog-" + std::to_string(getpid()))),
        contain_((fs::create_directories(dir_), dir_), "n0", "off") {}
  ~WatchdogTest() override {
    contain_.KillAll();
    fs::remove_all(dir_);
  }
  // A tagged task whose child left the session; returns the child's pid.
  pid_t StartTask() {
    ProcessSpec p;
    // Written then renamed: the shell's `>` creates the file empty before
    // the pid is in it, and a test reading it then got no pid (a flake).
    p.argv = {"sh", "-c",
              "setsid sleep 300 & echo $! > " + dir_ + "/pid.new; mv " + dir_ + "/pid.new " + dir_ +
                  "/pid; exec sleep 300"};
    p.log_path = dir_ + "/log";
    p.env = {{"UNIPOOL_FENCE", contain_.RunTag(1, 1)}};
    EXPECT_TRUE(group_.Start({p}).ok());
    for (int i = 0; i < 500 && !fs::exists(dir_ + "/pid"); ++i) std::this_thread::sleep_for(10ms);
    std::ifstream in(dir_ + "/pid");
    pid_t pid = -1;
    in >> pid;
    return pid;
  }

  std::string dir_;
  Containment contain_;
  ProcessGroup group_;
};

// The watchdog kills the tasks once the deadline passes, whatever the agent
// is doing (here: nothing), and counts the fence once.
TEST_F(WatchdogTest, KillsEveryTaskWhenTheDeadlinePasses) {
  Result<std::unique_ptr<Watchdog>> w = Watchdog::Start(UNIPOOL_BINARY, contain_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const pid_t daemon = StartTask();
  ASSERT_GT(daemon, 0);
  (*w)->SetDeadline(SteadyMs() + 100000);
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(Alive(daemon)) << "before the deadline nothing dies";
  (*w)->SetDeadline(SteadyMs() - 1);
  for (int i = 0; i < 300 && Alive(daemon); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(Alive(daemon));
  for (int i = 0; i < 300 && !group_.Poll(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(group_.running(), 0u);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ((*w)->fences(), 1);
}

// The agent's death (the pipe closes) kills the tasks too.
TEST_F(WatchdogTest, KillsEveryTaskWhenTheAgentDies) {
  Result<std::unique_ptr<Watchdog>> w = Watchdog::Start(UNIPOOL_BINARY, contain_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const pid_t daemon = StartTask();
  ASSERT_GT(daemon, 0);
  w->reset();  // what the agent's exit does to the pipe
  for (int i = 0; i < 300 && Alive(daemon); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(Alive(daemon));
}

// A watchdog someone killed is started again.
TEST_F(WatchdogTest, ARestartedWatchdogStillFences) {
  Result<std::unique_ptr<Watchdog>> w = Watchdog::Start(UNIPOOL_BINARY, contain_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const pid_t first = (*w)->pid();
  kill(first, SIGKILL);
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE((*w)->EnsureRunning());
  EXPECT_NE((*w)->pid(), first);
  const pid_t daemon = StartTask();
  (*w)->SetDeadline(SteadyMs() - 1);
  for (int i = 0; i < 300 && Alive(daemon); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(Alive(daemon));
}

}  // namespace
}  // namespace unipool::agent
