// End-to-end fencing: a job's processes never outlive their run and never
// run twice, whatever happens to their agent (killed, frozen, restarted,
// cut off) or to the server (down for a minute, with an outage grace).
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

// A job's processes that left its process group and session (daemons) die
// with a kill -9 of its agent, are not doubled when the agent comes back
// under the same name, and die with the job's cancel.
TEST_F(AgentE2eTest, DaemonsOfAJobDieWithItsAgentAndWithTheJob) {
  StartAgent("n0");
  WaitNodesUp(1);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: daemons}\nspec:\n"
      "  command: [sh, -c, 'setsid sleep 6072 & sleep 6073 & wait']\n"
      "  gpus: 1\n  restartPolicy: {maxRestarts: 0}\n";
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  ASSERT_EQ(WaitSleepers("6072", 1), 1);
  ASSERT_EQ(WaitSleepers("6073", 1), 1);
  kill(agents_["n0"], SIGKILL);
  waitpid(agents_["n0"], nullptr, 0);
  EXPECT_EQ(WaitSleepers("6072", 0), 0) << "the daemon outlived its agent";
  EXPECT_EQ(WaitSleepers("6073", 0), 0);
  StartAgent("n0");  // the same name and work directory: the run is lost, runs again
  Json again = WaitFor(
      id, [](const Json& j) { return j["state"] == "Running" && j["generation"] == 2; }, 30,
      "ran again");
  EXPECT_EQ(again["restarts"], 0) << "a lost agent is a disruption: " << again.dump();
  EXPECT_EQ(again["disruptions"], 1) << again.dump();
  EXPECT_EQ(WaitSleepers("6072", 1), 1);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(CountSleepers("6072"), 1) << "two copies";
  ASSERT_EQ(server_.Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "admin").status,
            200);
  EXPECT_EQ(WaitSleepers("6072", 0), 0) << "the daemon outlived its job";
  EXPECT_EQ(WaitSleepers("6073", 0), 0);
}

// Four disruptions of one trainer: its agent frozen past the lease
// (SIGSTOP, then SIGCONT), its agent killed and restarted at once under the
// same name, its node drained, its agent killed for good. No two copies are
// ever alive, none of it counts against maxRestarts, and the trainer ends at
// exactly its last step.
TEST_F(AgentE2eTest, FourDisruptionsNeverOverlapAndAreNotTheJobsFailures) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const int64_t id =
      SubmitTrainer("d", 2, "--steps, '900', --checkpoint-every, '5', --step-time, '0.05'");
  CopyMonitor monitor(id, Ckpt(id));
  int64_t generation = 0;
  // Waits for a run after `generation` to start its trainer (its pid file)
  // and report a step (the job's progress may still be its last run's);
  // returns its node.
  auto next_run = [&](const char* what) {
    Json j = WaitFor(
        id,
        [&](const Json& j) {
          return j["state"] == "Running" && j["generation"] > generation &&
                 fs::exists(Ckpt(id) + "/pid-rank0-run" +
                            std::to_string(j["generation"].get<int64_t>() - 1));
        },
        60, what);
    generation = j.value("generation", int64_t{0});
    std::this_thread::sleep_for(500ms);  // a few steps: it reaches its collectives
    return j["tasks"].empty() ? std::string() : j["tasks"][0]["node"].get<std::string>();
  };
  std::string node = next_run("started");
  ASSERT_FALSE(node.empty());
  // 1. Frozen past the lease: the watchdog fences; the run moves.
  kill(agents_[node], SIGSTOP);
  const std::string frozen = node;
  node = next_run("moved off the frozen agent");
  kill(agents_[frozen], SIGCONT);
  // 2. Killed and back at once under the same name.
  kill(agents_[node], SIGKILL);
  waitpid(agents_[node], nullptr, 0);
  StartAgent(node);
  node = next_run("ran after the agent restart");
  // 3. Drained.
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/" + node + "/drain", "admin").status, 200);
  const std::string drained = node;
  node = next_run("moved off the drained node");
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/" + drained + "/uncordon", "admin").status, 200);
  // 4. Killed for good.
  kill(agents_[node], SIGKILL);
  waitpid(agents_[node], nullptr, 0);
  agents_.erase(node);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 120, "succeeded");
  monitor.Stop();
  EXPECT_EQ(done["restarts"], 0) << done.dump();
  EXPECT_GE(done["disruptions"].get<int>() + done["preemptions"].get<int>(), 4) << done.dump();
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 900);
  EXPECT_EQ(monitor.overlaps(), 0)
      << "samples with two live copies of a rank, of " << monitor.samples();
  EXPECT_GE(monitor.generations().size(), 4u);
  if (HasFailure()) {
    DumpLogs(id);
  }
}

// A rank fails on one node of a two-node gang while the other node's ranks
// ignore SIGTERM (they live until their agent's SIGKILL, after the grace):
// the next run starts only once every process of the failed one is gone,
// on both nodes, wherever it is placed.
TEST_F(AgentE2eTest, AGangRestartsOnlyAfterEveryOldProcessIsGone) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: linger}\nspec:\n"
      "  command: [sh, -c, 'trap \"\" TERM; case $UNIPOOL_RESTART_COUNT in 0) if [ $RANK = 0 ]; "
      "then sleep 1; exit 7; fi;; *) sleep 1; exit 0;; esac; exec sleep 6072']\n"
      "  gpus: 4\n  gpusPerNode: 2\n  restartPolicy: {maxRestarts: 1, backoff: 100ms}\n";
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  CopyMonitor monitor(id, Ckpt(id));
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  monitor.Stop();
  EXPECT_EQ(done["restarts"], 1) << done.dump();
  EXPECT_EQ(monitor.overlaps(), 0)
      << "samples with two live copies of a rank, of " << monitor.samples();
  EXPECT_EQ(monitor.generations().size(), 2u);
  EXPECT_EQ(WaitSleepers("6072", 0), 0) << "processes of the first run are still running";
  if (HasFailure()) DumpLogs(id);
}

// An agent stopped on purpose (SIGTERM) gives its runs a grace of 5 s,
// longer than the lease (3 s): it keeps heartbeating meanwhile, so the run
// moves only once its process is gone (it ignores SIGTERM: SIGKILL at 5 s).
TEST_F(AgentE2eTest, AnAgentStoppingItsRunsKeepsItsLease) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: stubborn}\nspec:\n"
      "  command: [sh, -c, 'trap \"\" TERM; exec sleep 6091']\n  gpus: 1\n";
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  const Json first = WaitFor(
      id, [](const Json& j) { return j["state"] == "Running"; }, 30, "ran");
  ASSERT_EQ(WaitSleepers("6091", 1), 1);
  CopyMonitor monitor(id, Ckpt(id));
  const std::string node = first["tasks"][0]["node"];
  kill(agents_[node], SIGTERM);
  waitpid(agents_[node], nullptr, 0);
  agents_.erase(node);
  const Json moved = WaitFor(
      id, [](const Json& j) { return j["state"] == "Running" && j["generation"] == 2; }, 30,
      "moved");
  EXPECT_NE(moved["tasks"][0]["node"], node);
  EXPECT_EQ(WaitSleepers("6091", 1), 1);
  monitor.Stop();
  EXPECT_EQ(monitor.overlaps(), 0)
      << "samples with two live copies of a rank, of " << monitor.samples();
  EXPECT_EQ(moved["restarts"], 0) << moved.dump();
  ASSERT_EQ(server_.Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "admin").status,
            200);
  int left = 1;
  for (int i = 0; i < 4 && left != 0; ++i) left = WaitSleepers("6091", 0);  // the grace: 10 s
  EXPECT_EQ(left, 0);
  if (HasFailure()) DumpLogs(id);
}

// The server and the agents with an outage grace far above the lease.
class OutageE2eTest : public AgentE2eTest {
 protected:
  OutageE2eTest() : AgentE2eTest({"--outage-grace", "90s"}, {"--outage-grace", "90s"}) {}
};

// The server is killed and stays down 60 s, twenty leases: every agent
// learns from its peers that the server is gone for everyone, keeps its
// tasks, and the restarted server adopts them. No job restarts.
TEST_F(OutageE2eTest, ServerDownSixtySecondsRestartsNoJob) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const int64_t id =
      SubmitTrainer("o", 4, "--steps, '1800', --checkpoint-every, '50', --step-time, '0.05'");
  WaitFor(
      id, [&](const Json& j) { return fs::exists(Ckpt(id) + "/pid-rank0-run0"); }, 30, "started");
  CopyMonitor monitor(id, Ckpt(id));
  const pid_t rank0 = std::stoi(ReadAll(Ckpt(id) + "/pid-rank0-run0"));
  server_.Kill9();
  std::this_thread::sleep_for(60s);
  EXPECT_TRUE(Alive(rank0)) << "the outage killed the job";
  server_.Start();
  std::this_thread::sleep_for(5s);  // well past a lease: nothing is declared lost
  EXPECT_TRUE(Alive(rank0));
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 120, "succeeded");
  monitor.Stop();
  EXPECT_EQ(done["generation"], 1) << done.dump();
  EXPECT_EQ(done["restarts"], 0);
  EXPECT_EQ(done["disruptions"], 0);
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 1800);
  EXPECT_EQ(monitor.overlaps(), 0);
  if (HasFailure()) {
    DumpLogs(id);
  }
}

// The same grace, but only one agent is cut off: its peers still reach the
// server, so it fences at the lease as always, and the job's run elsewhere
// never overlaps it.
TEST_F(OutageE2eTest, APartitionedAgentStillFences) {
  Proxy proxy(server_.port());
  StartAgent("n0", "http://127.0.0.1:" + std::to_string(proxy.port()));
  StartAgent("n1");
  StartAgent("n2");
  WaitNodesUp(3);
  for (const char* n : {"n1", "n2"}) {
    ASSERT_EQ(server_.Call("POST", std::string("/v1/nodes/") + n + "/cordon", "admin").status, 200);
  }
  const int64_t id =
      SubmitTrainer("p", 2, "--steps, '300', --checkpoint-every, '5', --step-time, '0.05'");
  WaitFor(
      id, [&](const Json& j) { return fs::exists(Ckpt(id) + "/pid-rank0-run0"); }, 30, "started");
  ASSERT_EQ(Job(id)["tasks"][0]["node"], "n0");
  for (const char* n : {"n1", "n2"}) {
    ASSERT_EQ(server_.Call("POST", std::string("/v1/nodes/") + n + "/uncordon", "admin").status,
              200);
  }
  std::this_thread::sleep_for(1500ms);  // the agents have their peers (a heartbeat or more)
  CopyMonitor monitor(id, Ckpt(id));
  proxy.Cut(true);
  WaitFor(
      id, [&](const Json& j) { return fs::exists(Ckpt(id) + "/pid-rank0-run1"); }, 30,
      "ran elsewhere");
  std::this_thread::sleep_for(1s);
  proxy.Cut(false);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  monitor.Stop();
  EXPECT_EQ(monitor.overlaps(), 0) << "of " << monitor.samples() << " samples";
  EXPECT_EQ(done["restarts"], 0) << done.dump();
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 300);
  const std::string log = ReadAll(server_.dir() + "/agents/n0.log");
  EXPECT_NE(log.find("unreachable from this node only"), std::string::npos) << log;
}

}  // namespace
}  // namespace unipool::testing
