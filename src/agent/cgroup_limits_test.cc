#include "agent/cgroup_limits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/containment.h"
#include "agent/launcher.h"

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;
using Files = std::vector<std::pair<std::string, std::string>>;

TEST(CgroupLimitsTest, FilesForEachLimitTimesTheTasks) {
  EXPECT_EQ(LimitFiles({}, 4), Files{});
  EXPECT_EQ(LimitFiles({1500, 0, 0}, 2), (Files{{"cpu.max", "300000 100000"}}))
      << "3 CPUs: three periods of CPU time per period";
  EXPECT_EQ(LimitFiles({1, 0, 0}, 1), (Files{{"cpu.max", "1000 100000"}}))
      << "the kernel's minimum";
  EXPECT_EQ(LimitFiles({0, int64_t{64} << 30, 4096}, 3),
            (Files{{"memory.max", std::to_string(int64_t{192} << 30)},
                   {"memory.swap.max", "0"},
                   {"pids.max", "12288"}}));
  EXPECT_EQ(LimitFiles({0, int64_t{1} << 60, 0}, 1024)[0],
            (std::pair<std::string, std::string>{"memory.max", "max"}))
      << "a product past 64 bits is no limit, not a wrapped one";
  EXPECT_EQ(LimitFiles({0, 0, 10}, 0), (Files{{"pids.max", "10"}})) << "at least one task";
  EXPECT_EQ(ControllerOf("memory.swap.max"), "memory");
  EXPECT_EQ(ControllerOf("cpu.max"), "cpu");
}

class CgroupTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("unipool-cglimits-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "base");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Put(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }
  fs::path dir_;
};

// A hybrid host: the cgroup v2 hierarchy offers none of the three (they
// are bound to cgroup v1); the note says so, and the agent is not moved.
TEST_F(CgroupTreeTest, ControllersNotOfferedAreNamed) {
  Put(dir_ / "cgroup.controllers", "hugetlb\n");
  const Delegation d =
      DelegateControllers(dir_.string(), (dir_ / "base").string(), (dir_ / "leaf").string());
  EXPECT_TRUE(d.enabled.empty());
  EXPECT_NE(d.why_not.find("cpu, memory, pids: not offered to " + dir_.string()), std::string::npos)
      << d.why_not;
  EXPECT_FALSE(fs::exists(dir_ / "leaf")) << "nothing to enable: the agent stays where it is";
}

TEST_F(CgroupTreeTest, ControllersThatCannotBeEnabledSayWhy) {
  Put(dir_ / "cgroup.controllers", "cpu memory pids\n");  // no cgroup.subtree_control to write
  const Delegation d = DelegateControllers(dir_.string(), (dir_ / "base").string(), "");
  EXPECT_TRUE(d.enabled.empty());
  EXPECT_NE(d.why_not.find("cpu, memory, pids: cannot enable them in " + dir_.string()),
            std::string::npos)
      << d.why_not;
}

TEST_F(CgroupTreeTest, OomKillsAreReadFromMemoryEvents) {
  EXPECT_EQ(OomKills(dir_.string()), 0) << "no file: cannot tell";
  Put(dir_ / "memory.events", "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n");
  EXPECT_EQ(OomKills(dir_.string()), 2);
}

TEST(CgroupLimitsContainmentTest, LimitsWithoutACgroupAreNotEnforcedAndSaySo) {
  const Containment c(fs::temp_directory_path().string(), "n0", "off");
  EXPECT_EQ(c.limits_note(),
            "CPU, memory and pids limits not enforced: no cgroup v2 for the runs (--cgroup off)");
  std::string missing;
  EXPECT_EQ(c.PrepareRun(1, 1, {1000, 1 << 30, 100}, 1, &missing), "");
  EXPECT_EQ(missing, "no cgroup v2 for the runs (--cgroup off)");
  c.PrepareRun(1, 2, {}, 1, &missing);
  EXPECT_EQ(missing, "") << "no limits asked: nothing to say";
}

// Where the host delegates the memory controller (cgroup v2 unified, the
// agent root or delegated): a run over its memory limit is OOM-killed, and
// the kill is counted. Elsewhere (hybrid hosts, as in CI) the start-up note
// must say why, which is what the agent warns.
TEST(CgroupLimitsContainmentTest, AMemoryLimitIsEnforcedWhereTheHostDelegatesIt) {
  const fs::path dir = fs::temp_directory_path() / ("unipool-cgmem-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const Containment c(dir.string(), "n0", "auto");
  if (!c.controllers().count("memory")) {
    EXPECT_NE(c.limits_note().find("memory"), std::string::npos) << c.limits_note();
    if (!c.cgroup_base().empty() && c.controllers().empty()) {  // a run's own warning
      std::string missing;
      EXPECT_NE(c.PrepareRun(7, 1, {100, 1 << 20, 10}, 2, &missing), "") << "it still runs";
      EXPECT_EQ(missing.rfind("cpu.max, memory.max, pids.max (cpu, memory, pids: not offered", 0),
                0u)
          << missing;
      c.KillRun(7, 1);
    }
    fs::remove_all(dir);
    GTEST_SKIP() << c.limits_note();
  }
  std::string missing;
  ProcessSpec p;
  // tail keeps a line that never ends in memory: 256 MiB against 32 MiB.
  p.argv = {"sh", "-c", "head -c 268435456 /dev/zero | tail -c 1 >/dev/null"};
  p.log_path = (dir / "log").string();
  p.cgroup_procs = c.PrepareRun(7, 1, {0, 32 << 20, 0}, 1, &missing);
  EXPECT_EQ(missing, "");
  std::stringstream max;
  max << std::ifstream(c.cgroup_base() + "/job-7-run-1/memory.max").rdbuf();
  EXPECT_EQ(max.str(), std::to_string(32 << 20) + "\n");
  ProcessGroup g;
  ASSERT_TRUE(g.Start({p}).ok());
  for (int i = 0; i < 3000 && !g.Poll(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(c.OomKills(7, 1), 1);
  c.KillRun(7, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace unipool::agent
