#include "agent/containment.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "agent/launcher.h"

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A marker of this test process: the sleep length with the pid's digits
// appended (301.5 -> 301.512345), so that the tests that ctest runs side by
// side, each with the same script, never see one another's processes.
std::string Own(const std::string& marker) { return marker + std::to_string(getpid()); }

// Pids of live (not zombie) `sleep MARKER` processes, MARKER this process's
// own (Own). Only the sleep
// itself: the shell and the setsid or env on the way to it also carry the
// marker, but each only until its exec, and a scan that meets one of them
// mid-exec (an empty command line) would see none of them.
std::vector<pid_t> Find(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::stringstream cmd, stat;
    cmd << std::ifstream(e.path() / "cmdline").rdbuf();
    stat << std::ifstream(e.path() / "stat").rdbuf();
    std::vector<std::string> argv;
    for (std::string arg; std::getline(cmd, arg, '\0');) argv.push_back(arg);
    if (argv.size() == 2 && fs::path(argv[0]).filename() == "sleep" && argv[1] == Own(marker) &&
        stat.str().find(") Z ") == std::string::npos) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

class ContainmentTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("unipool-contain-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts `script` for run (job, generation) the way the agent does, its
  // sleep lengths made this process's own.
  void Launch(const Containment& c, ProcessGroup& g, int64_t job, int64_t gen,
              const std::string& script) {
    ProcessSpec p;
    p.argv = {"sh", "-c", std::regex_replace(script, std::regex("30[0-9]\\.[0-9]+"), Own("$&"))};
    p.log_path = dir_ + "/log-" + std::to_string(job) + "-" + std::to_string(gen);
    p.cgroup_procs = c.PrepareRun(job, gen);
    p.env = {{"UNIPOOL_FENCE", c.RunTag(job, gen)}};
    ASSERT_TRUE(g.Start({p}).ok());
  }
  // Waits (up to 5 s) until a process with `marker` exists.
  void WaitStarted(const std::string& marker) {
    for (int i = 0; i < 500 && Find(marker).empty(); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_FALSE(Find(marker).empty()) << marker;
  }

  std::string dir_;
};

// A grandchild that left the process group and the session (a daemon) is
// still found and killed; the run next to it is not touched.
TEST_P(ContainmentTest, KillRunFindsDaemonsAndSparesOtherRuns) {
  const Containment c(dir_, "n0", GetParam());
  if (GetParam() == "auto" && c.cgroup_base().empty()) GTEST_SKIP() << c.mode();
  ProcessGroup a, b;
  // Distinct sleep lengths mark each process in /proc.
  Launch(c, a, 1, 1, "setsid sleep 301.5 & exec sleep 301.25");
  Launch(c, b, 1, 12, "exec sleep 301.75");
  WaitStarted("301.5");
  WaitStarted("301.75");
  a.Kill();  // the process group: the daemon is not in it
  ASSERT_FALSE(Find("301.5").empty()) << "the daemon should have escaped the process group";
  c.KillRun(1, 1);
  for (int i = 0; i < 200 && !Find("301.5").empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(Find("301.5").empty());
  EXPECT_FALSE(Find("301.75").empty()) << "run 12 is not run 1";
  c.KillAll();
  b.Kill();
  EXPECT_TRUE(Find("301.75").empty());
}

// Only the cgroup finds a process that cleared its environment and left the
// session.
TEST_P(ContainmentTest, CgroupFindsWhatTheTagCannot) {
  const Containment c(dir_, "n0", GetParam());
  if (c.cgroup_base().empty()) GTEST_SKIP() << c.mode();
  ProcessGroup g;
  Launch(c, g, 2, 1, "setsid env -i sleep 302.5 & exec sleep 302.25");
  WaitStarted("302.5");
  g.Kill();
  c.KillRun(2, 1);
  for (int i = 0; i < 200 && !Find("302.5").empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(Find("302.5").empty());
  EXPECT_FALSE(fs::exists(c.cgroup_base() + "/job-2-run-1")) << "the run's cgroup is removed";
}

// A new agent of the same node and work directory finds its predecessor's
// leftovers; another node's are not its own.
TEST_P(ContainmentTest, TheSameNodeFindsItsPredecessorsProcesses) {
  const Containment first(dir_, "n0", GetParam());
  if (GetParam() == "auto" && first.cgroup_base().empty()) GTEST_SKIP() << first.mode();
  const Containment other(dir_, "n1", GetParam());
  ProcessGroup a, b;
  Launch(first, a, 3, 1, "setsid sleep 303.5 & exec sleep 303.25");
  Launch(other, b, 3, 1, "exec sleep 303.75");
  WaitStarted("303.5");
  WaitStarted("303.75");
  const Containment again(dir_, "n0", GetParam());
  EXPECT_EQ(again.tag(), first.tag());
  again.KillAll();
  for (int i = 0; i < 200 && !Find("303.5").empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(Find("303.5").empty());
  EXPECT_TRUE(Find("303.25").empty());
  EXPECT_FALSE(Find("303.75").empty());
  other.KillAll();
  a.Kill();
  b.Kill();
}

INSTANTIATE_TEST_SUITE_P(Modes, ContainmentTest, ::testing::Values("auto", "off"));

TEST(ContainmentModeTest, OffSaysTagsOnly) {
  const Containment c(fs::temp_directory_path().string(), "n0", "off");
  EXPECT_EQ(c.mode(), "process tags (--cgroup off)");
  EXPECT_EQ(c.PrepareRun(1, 1), "");
}

}  // namespace
}  // namespace unipool::agent
