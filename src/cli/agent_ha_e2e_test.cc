// The control plane's failover with work running: three `unipool server
// --ha` on a three-member etcd, four agents that know all three servers,
// the stand-in trainer on two of them. The leader is killed (kill -9) ten
// times at random moments: the trainer is never restarted (no restart, no
// disruption: each new leader gives every node a fresh lease), never runs
// twice (the /proc monitor), and ends at exactly its last step.
#include <random>

#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

constexpr int kServers = 3;

// The server's flags for the HA cluster; starts the etcd it names (one
// per test process: ctest runs each test in a process of its own).
std::vector<std::string> HaServerArgs() {
  static std::string endpoints;
  static std::unique_ptr<store::LocalEtcd> etcd;
  if (!etcd) {
    etcd = StartEtcd(
        (fs::temp_directory_path() / ("unipool-agent-ha-" + std::to_string(getpid()))).string(), 3,
        &endpoints);
  }
  return {"--store",   "etcd", "--etcd-endpoints", endpoints, "--etcd-prefix",
          "/agent-ha", "--ha", "--leader-ttl",     "2s"};
}

class AgentHaE2eTest : public AgentE2eTest {
 protected:
  // A 15 s lease (6 leader TTLs is the least the server accepts without a
  // warning): agents fence after two thirds of it without a server, well
  // after a takeover (about the leader's TTL, 2 s, plus reading the state).
  AgentHaE2eTest()
      : AgentE2eTest(HaServerArgs(), {}, {}, "testdata/clusters/local-4x2.yaml", "2", "15s") {}

  void SetUp() override {
    AgentE2eTest::SetUp();  // server_ starts first: it leads
    std::vector<std::string> args = {"--node-lease", "15s", "--min-runtime", "0s"};
    for (const std::string& a : HaServerArgs()) args.push_back(a);
    urls_ = {server_.url()};
    for (int i = 1; i < kServers; ++i) {
      others_.push_back(std::make_unique<TestServer>(
          TestServer::Options{.cluster = "testdata/clusters/local-4x2.yaml",
                              .assume_nodes_up = false,
                              .extra_args = args,
                              .share_tokens = &server_}));
      others_.back()->Start();
      urls_.push_back(others_.back()->url());
    }
  }
  TestServer& ServerAt(int i) { return i == 0 ? server_ : *others_[i - 1]; }
  std::string AllUrls() const {
    std::string all;
    for (const std::string& u : urls_) all += (all.empty() ? "" : ",") + u;
    return all;
  }
  int Leader(int seconds = 20, int except = -1) { return ReadyServer(urls_, seconds, except); }

  std::vector<std::unique_ptr<TestServer>> others_;
  std::vector<std::string> urls_;
};

TEST_F(AgentHaE2eTest, TenLeaderKillsNeverRestartOrDuplicateTheTrainer) {
  for (const char* n : {"n0", "n1", "n2", "n3"}) StartAgent(n, AllUrls());
  WaitNodesUp(4, 30);  // (agents join through redirects, patiently)
  const int64_t id =
      SubmitTrainer("ha", 4, "--steps, '600', --checkpoint-every, '20', --step-time, '0.05'");
  CopyMonitor monitor(id, Ckpt(id));
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Running" && j.contains("progress"); }, 60,
      "running");
  std::mt19937 rng(20261202);
  std::vector<double> takeover_s;
  for (int round = 0; round < 10; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 1500));
    const int leader = Leader(20);
    ASSERT_GE(leader, 0) << "round " << round;
    const auto t0 = std::chrono::steady_clock::now();
    ServerAt(leader).Kill9();
    const int next = Leader(30, leader);
    ASSERT_GE(next, 0) << "round " << round << ": no server took over";
    takeover_s.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ServerAt(leader).Start();  // back, as a follower
  }
  std::sort(takeover_s.begin(), takeover_s.end());
  std::printf(
      "takeover with 4 agents and a trainer running (10 kills): median %.2f s, max %.2f s\n",
      takeover_s[takeover_s.size() / 2], takeover_s.back());
  // Whoever leads now answers for the job (server_ may be a follower: its
  // Call follows the redirect).
  const Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded" || j["state"] == "Failed"; }, 120,
      "finished");
  monitor.Stop();
  EXPECT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(done["restarts"], 0) << "a failover restarted the job";
  EXPECT_EQ(done.value("disruptions", 0), 0) << "a failover disrupted the job";
  EXPECT_EQ(done["progress"]["step"], 600);
  EXPECT_EQ(monitor.overlaps(), 0)
      << "two live copies in " << monitor.overlaps() << " of " << monitor.samples() << " samples";
  EXPECT_EQ(monitor.generations(), (std::set<std::string>{"0"})) << "one run only";
}

}  // namespace
}  // namespace unipool::testing
