// End-to-end: elastic continue (M13). A 3-node job that declares
// elastic.onResize: continue loses a node (kill -9 of its agent): the two
// survivors go on at the smaller size without a restart (their processes
// live on; no restart from disk), the job grows back to 3 nodes when the
// node returns (the new ranks receive the state from a survivor), and it
// ends at exactly its target step. With the stand-in trainer and with real
// PyTorch DDP over gloo.
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

class ElasticE2eTest : public AgentE2eTest {
 protected:
  struct Trainer {
    std::string command;  // YAML list items
    std::string args;
    std::string pid_file;  // under the checkpoint dir, by rank: "pid-rank{}-run0"
    std::string joined;    // what a joining rank logs
    int steps;
    // How the job says it is elastic (YAML lines of spec).
    std::string shape = "  gpus: 6\n  elastic: {minGpus: 2, onResize: continue}\n";
  };

  // Runs the scenario with `t`; returns the job's id.
  int64_t Run(const Trainer& t) {
    for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
    WaitNodesUp(3);
    ExpectClocksInStep();
    const std::string yaml =
        "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: elastic}\nspec:\n"
        "  command: [" +
        t.command + "]\n  args: [" + t.args + "]\n  workingDir: " UNIPOOL_SOURCE_DIR "\n" +
        t.shape + "  restartPolicy: {maxRestarts: 3, backoff: 1s}\n";
    const int64_t id = SubmitYaml(yaml);
    if (id < 0) return id;
    Json running = WaitFor(
        id,
        [](const Json& j) {
          return j["state"] == "Running" && j["tasks"].size() == 3 && j["progress"].is_object() &&
                 j["progress"]["step"] >= 40;
        },
        90, "ran on 3 nodes");
    if (HasFailure()) return id;
    // The middle node goes: the last node's ranks move down (4, 5 -> 2, 3).
    const std::string victim = running["tasks"][1]["node"];
    std::vector<pid_t> survivors, lost;
    for (int r = 0; r < 6; ++r) {
      const std::string file = Ckpt(id) + "/" + Pid(t.pid_file, r);
      (r / 2 == 1 ? lost : survivors).push_back(std::stoi(ReadAll(file)));
    }
    kill(agents_[victim], SIGKILL);
    waitpid(agents_[victim], nullptr, 0);
    agents_.erase(victim);
    Json shrunk = WaitFor(
        id,
        [](const Json& j) {
          return j["state"] == "Running" && j["tasks"].size() == 2 && j["membership"] == 1;
        },
        30, "went on without the lost node");
    const int64_t at = shrunk["progress"]["step"];
    EXPECT_EQ(shrunk["generation"], 1) << "the run goes on: no restart";
    for (const Json& task : shrunk["tasks"]) EXPECT_NE(task["node"], victim);
    // It makes progress at 2 nodes, with the processes it had.
    WaitFor(
        id,
        [&](const Json& j) {
          return j["progress"].is_object() && j["progress"]["step"] >= at + 20;
        },
        60, "made progress at 2 nodes");
    for (pid_t p : survivors) EXPECT_TRUE(Alive(p)) << "a survivor was restarted";
    for (pid_t p : lost) EXPECT_FALSE(Alive(p)) << "a process outlived its killed agent";
    // The node comes back: the job grows onto it, in the same run.
    StartAgent(victim);
    Json grown = WaitFor(
        id, [](const Json& j) { return j["tasks"].size() == 3 && j["membership"] == 2; }, 30,
        "grew back to 3 nodes");
    EXPECT_EQ(grown["generation"], 1);
    Json done = WaitFor(
        id, [](const Json& j) { return j["state"] == "Succeeded"; }, 120, "succeeded");
    EXPECT_EQ(done["generation"], 1) << "one run from start to end";
    EXPECT_EQ(done["restarts"], 0);
    EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], t.steps);
    for (pid_t p : survivors) EXPECT_TRUE(GoneWithin(p, 30)) << "outlived the job";
    const std::vector<std::string> types = EventTypes(id);
    EXPECT_EQ(std::count(types.begin(), types.end(), "Resized"), 2) << done.dump();
    EXPECT_EQ(std::find(types.begin(), types.end(), "Requeued"), types.end());
    // The survivors re-formed twice; the returning node's ranks joined.
    const std::string dir = "/jobs/" + std::to_string(id) + "/run-1/";
    const std::string survivor = ReadAll(
        server_.dir() + "/agents/" + std::string(running["tasks"][2]["node"]) + dir + "rank-4.log");
    EXPECT_NE(survivor.find("membership 1: continuing at step"), std::string::npos) << survivor;
    EXPECT_NE(survivor.find("membership 2: continuing at step"), std::string::npos) << survivor;
    const std::string joiner = ReadAll(server_.dir() + "/agents/" + victim + dir + "rank-2.log");
    EXPECT_NE(joiner.find(t.joined), std::string::npos) << joiner;
    EXPECT_TRUE(fs::exists(server_.dir() + "/agents/" + victim + "/jobs/" + std::to_string(id) +
                           "/run-1.left-2"))
        << "the run this node left is kept beside the one it joined";
    if (HasFailure() || std::getenv("UNIPOOL_TEST_VERBOSE")) DumpLogs(id);
    return id;
  }

  // The agents measure their clock against the server's: one host, so
  // within a few milliseconds (M20's clock skew watch).
  void ExpectClocksInStep() {
    Json offset;
    for (int i = 0; i < 40 && !offset.is_number(); ++i) {
      offset = server_.Call("GET", "/v1/nodes/n0", "admin").json()["clockOffsetSeconds"];
      if (!offset.is_number()) std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(offset.is_number()) << offset.dump();
    EXPECT_LT(std::abs(offset.get<double>()), 0.25);
  }

  static std::string Pid(const std::string& pattern, int rank) {
    std::string out = pattern;
    out.replace(out.find("{}"), 2, std::to_string(rank));
    return out;
  }
};

// The range as torchrun's --nnodes=1:3 says it: nodes {min, max}, a task
// per node (the PyTorch run below gives minGpus instead).
TEST_F(ElasticE2eTest, StandInTrainerGoesOnWithoutALostNodeAndGrowsBack) {
  Run({"python3, examples/jobs/trainer.py",
       "--steps, '600', --checkpoint-every, '50', --step-time, '0.03'", "pid-rank{}-run0",
       "joined at membership 2", 600,
       "  nodes: {min: 1, max: 3}\n  gpusPerNode: 2\n  elastic: {onResize: continue}\n"});
}

TEST_F(ElasticE2eTest, PyTorchDdpGoesOnWithoutALostNodeAndGrowsBack) {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (scripts/install-deps.sh)";
  }
  const int64_t id = Run({"/usr/bin/python3, examples/jobs/train_ddp.py",
                          "--steps, '600', --checkpoint-every, '100', --step-sleep, '0.03', "
                          "--pg-timeout, '20'",
                          "pid-rank{}-run0", "joins at membership 2", 600});
  EXPECT_TRUE(fs::exists(Ckpt(id) + "/ckpt-600.pt"));
}

}  // namespace
}  // namespace unipool::testing
