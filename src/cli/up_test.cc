// `unipool up`, the local cluster a new user starts with, end to end: the
// example job runs to success, and with --ha it keeps running through the
// leader's kill -9.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/cli_test_util.h"

namespace unipool::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string TempDir(const std::string& name) {
  const std::string d =
      fs::temp_directory_path() / ("unipool-up-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

std::string Slurp(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

TEST(UpTest, RunsTheExampleJob) {
  const std::string dir = TempDir("single");
  RunResult r = RunUnipool({"up", "--nodes", "2", "--gpus", "2", "--port", "0", "--data", dir,
                            "--run", "examples/jobs/train.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Succeeded: succeeded"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// The pid of the `unipool server` listening on `port` (its --listen).
pid_t ServerOnPort(int port) {
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::vector<std::string> argv;
    std::stringstream cmd(Slurp((e.path() / "cmdline").string()));
    for (std::string a; std::getline(cmd, a, '\0');) argv.push_back(a);
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--listen" && argv[i + 1] == listen && argv.size() > 1 &&
          argv[1] == "server") {
        return std::stoi(name);
      }
    }
  }
  return -1;
}

// The agents' and servers' logs under `dir` (what `up` kept), and where
// each rank's output is, for a failure's message.
std::string AgentAndServerLogs(const std::string& dir) {
  std::string all;
  for (const std::string sub : {"/agents", "/servers"}) {
    if (!fs::exists(dir + sub)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir + sub)) {
      if (e.is_regular_file() && e.path().extension() == ".log") {
        all += "--- " + e.path().string() + "\n" + Slurp(e.path().string());
      }
    }
  }
  return all;
}

TEST(UpTest, HaKeepsTheJobRunningWhenTheLeaderIsKilled) {
  const std::string dir = TempDir("ha"), out = dir + ".out";
  fflush(nullptr);
  const pid_t up = fork();
  if (up == 0) {
    if (chdir(UNIPOOL_SOURCE_DIR) != 0) _exit(126);
    freopen(out.c_str(), "w", stdout);
    freopen((out + ".err").c_str(), "w", stderr);
    execl(UNIPOOL_BINARY, "unipool", "up", "--ha", "--nodes", "2", "--gpus", "2", "--port", "0",
          "--data", dir.c_str(), "--run", "examples/jobs/train.yaml", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Once the job runs: the servers' URLs from what `up` printed.
  std::string text;
  for (int i = 0; i < 900 && text.find("Started:") == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    text = Slurp(out);
  }
  ASSERT_NE(text.find("Started:"), std::string::npos) << text << Slurp(out + ".err");
  const size_t at = text.find("export UNIPOOL_SERVER=");
  ASSERT_NE(at, std::string::npos) << text;
  std::stringstream urls(text.substr(at + 22, text.find('\n', at) - at - 22));
  int leader_port = -1;
  for (std::string u; std::getline(urls, u, ',');) {
    httplib::Client c(u);
    auto r = c.Get("/readyz");
    if (r && r->status == 200) leader_port = std::stoi(u.substr(u.rfind(':') + 1));
  }
  ASSERT_GT(leader_port, 0) << "no leader among " << text.substr(at);
  const pid_t leader = ServerOnPort(leader_port);
  ASSERT_GT(leader, 0);
  kill(leader, SIGKILL);
  int status = -1;
  for (int i = 0; i < 1800; ++i) {
    if (waitpid(up, &status, WNOHANG) == up) break;
    status = -1;
    std::this_thread::sleep_for(100ms);
  }
  if (status == -1) {
    kill(up, SIGTERM);
    waitpid(up, &status, 0);
    FAIL() << "up did not finish: " << Slurp(out);
  }
  text = Slurp(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text << Slurp(out + ".err");
  EXPECT_NE(text.find("Succeeded: succeeded"), std::string::npos) << text;
  const bool cost =
      text.find("TaskFailed") != std::string::npos || text.find("Disrupted") != std::string::npos;
  EXPECT_FALSE(cost) << "the failover cost the job: " << text << "\n" << AgentAndServerLogs(dir);
  if (HasFailure()) return;  // the data directory stays for a look
  fs::remove_all(dir);
  fs::remove(out);
  fs::remove(out + ".err");
}

}  // namespace
}  // namespace unipool::testing
