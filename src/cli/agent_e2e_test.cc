// End-to-end: a server process, agent processes, real job processes (the
// stand-in trainer, examples/jobs/trainer.py; the PyTorch DDP example where
// python3-torch is installed). Failures are real: kill -9 of an agent, a
// preemption, a rank that fails.
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

// kill -9 of an agent mid-run: the node's lease ends, the job restarts from
// its last checkpoint on the remaining capacity and completes exactly.
TEST_F(AgentE2eTest, KillNineOfAnAgentRestartsTheJobFromItsCheckpoint) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const int64_t id =
      SubmitTrainer("t", 4, "--steps, '300', --checkpoint-every, '10', --step-time, '0.05'");
  Json running = WaitFor(
      id,
      [](const Json& j) {
        return j["state"] == "Running" && j["progress"].is_object() && j["progress"]["step"] >= 25;
      },
      30, "made progress");
  const std::string victim = running["tasks"][1]["node"];
  // The victim's processes (ranks 2 and 3), to check none outlives its agent.
  std::vector<pid_t> old;
  for (int r : {2, 3})
    old.push_back(std::stoi(ReadAll(Ckpt(id) + "/pid-rank" + std::to_string(r) + "-run0")));
  const auto t0 = std::chrono::steady_clock::now();
  const auto wall0 = std::chrono::system_clock::now();
  kill(agents_[victim], SIGKILL);
  waitpid(agents_[victim], nullptr, 0);
  agents_.erase(victim);
  Json restarted = WaitFor(
      id, [](const Json& j) { return j["generation"] == 2 && j["state"] == "Running"; }, 30,
      "restarted");
  const double recovery_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const Json& t : restarted["tasks"]) EXPECT_NE(t["node"], victim);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  EXPECT_EQ(done["restarts"], 0) << "a lost node is not the job's failure";
  EXPECT_EQ(done["disruptions"], 1);
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 300);
  const std::vector<std::string> types = EventTypes(id);
  EXPECT_NE(std::find(types.begin(), types.end(), "Requeued"), types.end());
  for (pid_t p : old) EXPECT_FALSE(Alive(p)) << "a process outlived its killed agent";
  // The second run resumed from a checkpoint, not from step 0.
  const std::string log =
      ReadAll(server_.dir() + "/agents/" + std::string(restarted["tasks"][0]["node"]) + "/jobs/" +
              std::to_string(id) + "/run-2/rank-0.log");
  EXPECT_EQ(log.find("starts at step 0 "), std::string::npos) << log;
  // The parts of the recovery, from the events' times and the first line
  // the new run's rank 0 logged (docs/benchmarks.md).
  auto ms_after_kill = [&](const std::string& rfc3339) {
    const int64_t t = io::ParseTime(rfc3339).value().value() / 1000000;
    return t -
           std::chrono::duration_cast<std::chrono::milliseconds>(wall0.time_since_epoch()).count();
  };

  Json ev = server_.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").json();
  int64_t requeued = -1, started = -1;
  for (const Json& e : ev["items"]) {
    if (e["type"] == "Requeued" && requeued < 0) requeued = ms_after_kill(e["time"]);
    if (e["type"] == "Started" && requeued >= 0 && started < 0) started = ms_after_kill(e["time"]);
  }
  const int64_t process = ms_after_kill(log.substr(0, 24));
  std::cerr << "agent kill -9 -> job running elsewhere: " << recovery_s << " s (lease 3 s); "
            << "detected (requeued) +" << requeued << " ms, scheduled (started) +" << started
            << " ms, rank 0 process logging +" << process << " ms\n";
}

// Preemption: the low job gets SIGTERM, checkpoints within its grace,
// stops, and later resumes from that checkpoint.
TEST_F(AgentE2eTest, PreemptedJobCheckpointsAndResumes) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const int64_t low =
      SubmitTrainer("low", 6, "--steps, '60', --checkpoint-every, '1000', --step-time, '0.05'",
                    "  priorityClassName: low\n");
  WaitFor(
      low,
      [](const Json& j) {
        return j["state"] == "Running" && j["progress"].is_object() && j["progress"]["step"] >= 10;
      },
      30, "made progress");
  const int64_t high =
      SubmitTrainer("high", 2, "--steps, '10', --step-time, '0.05'", "  priorityClassName: high\n");
  Json h = WaitFor(
      high, [](const Json& j) { return j["state"] == "Succeeded"; }, 30, "succeeded");
  Json l = WaitFor(
      low, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  EXPECT_EQ(l["preemptions"], 1);
  EXPECT_EQ(l["restarts"], 0);
  const std::vector<std::string> types = EventTypes(low);
  for (const char* want : {"Preempted", "Stopped"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), want), types.end()) << want;
  }
  // It checkpointed on SIGTERM (checkpoint-every is 1000) and resumed there.
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(low) + "/done.json"))["step"], 60);
  // What that cost, measured: the trainer timed its saves, the agent found
  // the files the last one wrote (ckpt-60.json, {"step": 60, "world": 6}, and
  // maybe done.json), the server timed the start-up.
  EXPECT_EQ(l["savesOnStop"], true) << l.dump();
  EXPECT_GT(l["checkpointSeconds"].get<double>(), 0) << l.dump();
  EXPECT_GE(l["checkpointBytes"].get<int64_t>(), 20) << l.dump();
  EXPECT_LE(l["checkpointBytes"].get<int64_t>(), 200) << l.dump();
  EXPECT_GT(l["startupSeconds"].get<double>(), 0) << l.dump();
  std::string resumed;
  for (const char* n : {"n0", "n1", "n2"}) {
    resumed += ReadAll(server_.dir() + "/agents/" + n + "/jobs/" + std::to_string(low) +
                       "/run-2/rank-0.log");
  }
  EXPECT_NE(resumed.find("starts at step "), std::string::npos);
  EXPECT_EQ(resumed.find("starts at step 0 "), std::string::npos) << resumed;
  // The resumed run got Daly's interval for the write measured in the first.
  EXPECT_NE(resumed.find(", checkpoint interval "), std::string::npos) << resumed;
  // Logs through the server.
  HttpReply logs = server_.Call("GET", "/v1/jobs/" + std::to_string(low) + "/logs?rank=0", "admin");
  EXPECT_EQ(logs.status, 200) << logs.body;
  EXPECT_NE(logs.body.find("done at step 60"), std::string::npos) << logs.body;
}

// The same with real PyTorch: DDP over gloo, 2 nodes x 2 processes; one
// agent is killed; the job resumes from its checkpoint on the rest and ends
// at exactly the target step, with one restart.
TEST_F(AgentE2eTest, PyTorchDdpSurvivesKillNineOfAnAgent) {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (scripts/install-deps.sh)";
  }
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: ddp}\nspec:\n"
      "  command: [/usr/bin/python3, examples/jobs/train_ddp.py]\n"
      "  args: [--steps, '300', --checkpoint-every, '20', --step-sleep, '0.03']\n"
      "  workingDir: " UNIPOOL_SOURCE_DIR
      "\n  gpus: 4\n  gpusPerNode: 2\n"
      "  restartPolicy: {maxRestarts: 3, backoff: 2s}\n";
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  Json running = WaitFor(
      id,
      [](const Json& j) {
        return j["state"] == "Running" && j["progress"].is_object() && j["progress"]["step"] >= 60;
      },
      60, "made progress");
  const std::string victim = running["tasks"][1]["node"];
  kill(agents_[victim], SIGKILL);
  waitpid(agents_[victim], nullptr, 0);
  agents_.erase(victim);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 120, "succeeded");
  // One disruption: the survivors' gloo failure ("Connection closed by
  // peer") waits for the lost node's lease, which makes it a disruption.
  EXPECT_EQ(done["restarts"], 0) << done.dump();
  EXPECT_EQ(done["disruptions"], 1) << done.dump();
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 300);
  EXPECT_TRUE(fs::exists(Ckpt(id) + "/ckpt-300.pt"));
  if (HasFailure() || std::getenv("UNIPOOL_TEST_VERBOSE")) {  // what happened, for CI logs
    DumpLogs(id);
  }
}

// A failing health-check program drains its node with the program's words.
TEST_F(AgentE2eTest, FailingHealthCheckDrainsTheNode) {
  StartAgent("n0", "", "sh -c 'echo fan 3 failed; exit 1'");
  Json n;
  for (int i = 0; i < 100; ++i) {
    n = server_.Call("GET", "/v1/nodes/n0", "admin").json();
    if (n["state"] == "drained") break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(n["state"], "drained") << n.dump();
  EXPECT_NE(n["why"].get<std::string>().find("fan 3 failed"), std::string::npos) << n.dump();
}

// Fencing: an agent cut off from the server kills its tasks within the
// lease; the job runs elsewhere and never has two live copies.
TEST_F(AgentE2eTest, CutOffAgentKillsItsTasks) {
  Proxy proxy(std::stoi(server_.url().substr(server_.url().rfind(':') + 1)));
  StartAgent("n0", "http://127.0.0.1:" + std::to_string(proxy.port()));
  StartAgent("n1");
  WaitNodesUp(2);
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/n1/cordon", "admin").status, 200);
  const int64_t id =
      SubmitTrainer("f", 2, "--steps, '200', --checkpoint-every, '5', --step-time, '0.05'");
  Json j = WaitFor(
      id,
      [](const Json& j) {
        return j["state"] == "Running" && j["progress"].is_object() && j["progress"]["step"] >= 10;
      },
      30, "made progress");
  ASSERT_EQ(j["tasks"][0]["node"], "n0");
  const pid_t first = std::stoi(ReadAll(Ckpt(id) + "/pid-rank0-run0"));
  ASSERT_TRUE(Alive(first));
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/n1/uncordon", "admin").status, 200);
  proxy.Cut(true);
  // The new run starts on n1; by then the old copy must be dead.
  const std::string second = Ckpt(id) + "/pid-rank0-run1";
  for (int i = 0; i < 400 && !fs::exists(second); ++i) {
    EXPECT_TRUE(Alive(first) || !fs::exists(second));
    std::this_thread::sleep_for(25ms);
  }
  ASSERT_TRUE(fs::exists(second)) << Job(id).dump();
  EXPECT_FALSE(Alive(first)) << "two live copies of job " << id << "\n"
                             << ReadAll(server_.dir() + "/agents/n0.log");
  proxy.Cut(false);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 200);
}

// One rank of a 2-node gang exits 7 while the others sleep: the whole gang
// fails at once (the agent stops its node's other process and reports the
// first failure; the server stops the other node's), the job ends Failed
// with that cause, and no process of it is left.
TEST_F(AgentE2eTest, OneRankFailingFailsTheWholeGang) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: gang}\nspec:\n"
      "  command: [sh, -c, 'if [ \"$RANK\" = 3 ]; then sleep 1; exit 7; fi; exec sleep 6071']\n"
      "  gpus: 4\n  gpusPerNode: 2\n  restartPolicy: {maxRestarts: 0}\n";
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Running"; }, 10, "ran");
  const auto t0 = std::chrono::steady_clock::now();
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Failed"; }, 10, "failed");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 5.0) << "from the crash (1 s after the start) to Failed";
  EXPECT_NE(done["message"].get<std::string>().find("exit code 7"), std::string::npos)
      << done.dump();
  EXPECT_EQ(WaitSleepers("6071", 0), 0) << "processes of the failed gang are still running";
}

// Every way a run is stopped ends it once and leaves no process behind, its
// daemons (setsid, out of the process group) included: a failure and the
// restart, a drain (preempted, resumed on the other node), a cancel and a
// time limit.
TEST_F(AgentE2eTest, EveryStopPathEndsTheRunOnceAndLeavesNothing) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  auto submit = [&](const std::string& name, const std::string& script, const std::string& extra) {
    return SubmitYaml("apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
                      "}\nspec:\n  command: [sh, -c, '" + script + "']\n  gpus: 1\n" + extra);
  };
  auto count = [&](int64_t id, const std::string& type) {
    const std::vector<std::string> t = EventTypes(id);
    return std::count(t.begin(), t.end(), type);
  };
  auto run = [](int64_t generation) {
    return [generation](const Json& j) {
      return j["state"] == "Running" && j["generation"] == generation;
    };
  };
  // 1. A failure: the first run exits 3, its daemon goes with it; run 2.
  const int64_t failing = submit(
      "failing",
      "setsid sleep 6081 & [ $UNIPOOL_RESTART_COUNT = 0 ] && sleep 1 && exit 3; exec sleep 6082",
      "  restartPolicy: {maxRestarts: 1, backoff: 100ms}\n");
  ASSERT_GT(failing, 0);
  WaitFor(failing, run(2), 30, "ran again after its failure");
  EXPECT_EQ(WaitSleepers("6082", 1), 1);
  EXPECT_EQ(WaitSleepers("6081", 1), 1) << "the failed run's daemon outlived it";
  EXPECT_EQ(count(failing, "TaskFailed"), 1);
  // 2. A drain: preempted with the queue's grace, stopped once, resumed on
  // the other node; the first run's daemon is gone.
  const int64_t drained = submit("drained", "setsid sleep 6083 & exec sleep 6084", "");
  ASSERT_GT(drained, 0);
  const Json first = WaitFor(drained, run(1), 30, "ran");
  EXPECT_EQ(WaitSleepers("6083", 1), 1);
  const std::string node = first["tasks"][0]["node"];
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/" + node + "/drain", "admin").status, 200);
  const Json second = WaitFor(drained, run(2), 30, "resumed elsewhere");
  EXPECT_NE(second["tasks"][0]["node"], node);
  EXPECT_EQ(WaitSleepers("6084", 1), 1);
  EXPECT_EQ(WaitSleepers("6083", 1), 1) << "the stopped run's daemon outlived it";
  EXPECT_EQ(count(drained, "Preempted"), 1);
  EXPECT_EQ(count(drained, "Stopped"), 1);
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/" + node + "/uncordon", "admin").status, 200);
  // 3. A cancel of each: Cancelled once, nothing left.
  for (int64_t id : {failing, drained}) {
    ASSERT_EQ(server_.Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "admin").status,
              200);
    WaitFor(
        id, [](const Json& j) { return j["state"] == "Cancelled"; }, 10, "cancelled");
    EXPECT_EQ(count(id, "Cancelled"), 1);
  }
  for (const char* s : {"6081", "6082", "6083", "6084"}) {
    EXPECT_EQ(WaitSleepers(s, 0), 0) << "sleep " << s << " outlived its cancelled job";
  }
  // 4. A time limit: Failed once (event TimeLimit), not restarted, nothing left.
  const int64_t timed = submit("timed", "setsid sleep 6085 & exec sleep 6086",
                               "  timeLimit: 2s\n  restartPolicy: {maxRestarts: 3}\n");
  ASSERT_GT(timed, 0);
  const Json over = WaitFor(
      timed, [](const Json& j) { return j["state"] == "Failed"; }, 30, "ran past its limit");
  EXPECT_EQ(over["generation"], 1) << over.dump();
  EXPECT_EQ(count(timed, "TimeLimit"), 1);
  EXPECT_EQ(count(timed, "Failed"), 0) << "one terminal event";
  for (const char* s : {"6085", "6086"}) {
    EXPECT_EQ(WaitSleepers(s, 0), 0) << "sleep " << s << " outlived its time limit";
  }
  if (HasFailure()) {
    for (int64_t id : {failing, drained, timed}) DumpLogs(id);
  }
}

}  // namespace
}  // namespace unipool::testing

namespace unipool::testing {
namespace {

// Agents that keep 3 files of 1 MiB per process log.
class LogLimitsE2eTest : public AgentE2eTest {
 protected:
  LogLimitsE2eTest() : AgentE2eTest({}, {"--log-max-mb", "1", "--log-files", "3"}) {}
};

// A job that writes far more than the cap: the node keeps at most the cap,
// readable by the agent's user only, and `unipool logs` prints the newest
// part whole (every line once, in order) across the rotations.
TEST_F(LogLimitsE2eTest, LogsAreCappedRotatedAndReadWhole) {
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = SubmitYaml(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: chatty}\nspec:\n"
      "  command: [sh, -c, 'seq 1 400000; echo the-end']\n  gpus: 1\n");
  ASSERT_GT(id, 0);
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  const std::string run = server_.dir() + "/agents/n0/jobs/" + std::to_string(id) + "/run-1";
  int64_t bytes = 0;
  for (const auto& f : fs::directory_iterator(run)) {
    if (f.path().filename().string().starts_with("rank-0.log")) bytes += f.file_size();
  }
  EXPECT_LE(bytes, 3 * (1 << 20) + 4096) << "the log outgrew its cap";
  EXPECT_TRUE(fs::exists(run + "/rank-0.log.2"));
  // (0711 under a root agent: jobs of other users reach their own report
  // files by name and list nothing; docs/operations.md, "Security model".)
  EXPECT_EQ(fs::status(run).permissions() & fs::perms::all,
            geteuid() == 0 ? fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec
                           : fs::perms::owner_all);
  EXPECT_EQ(fs::status(run + "/rank-0.log").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  server_.UseCli("admin");
  RunResult r = RunUnipool({"logs", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int64_t first = -1, last = -1;
  bool in_order = true;
  while (std::getline(lines, line)) {
    const std::string text = line.substr(line.find(' ') + 1);  // after the timestamp
    if (text == "the-end") break;
    const int64_t n = std::stoll(text);
    if (first < 0) first = n;
    in_order = in_order && (last < 0 || n == last + 1);
    last = n;
  }
  EXPECT_TRUE(in_order) << "a line lost or repeated across a rotation";
  EXPECT_GT(first, 1) << "the oldest lines were rotated away";
  EXPECT_EQ(last, 400000);
  EXPECT_NE(r.out.find("the-end"), std::string::npos);
}

}  // namespace
}  // namespace unipool::testing

namespace unipool::testing {
namespace {

// Agents with a hang hook (what an operator would point at py-spy).
class HungE2eTest : public AgentE2eTest {
 protected:
  HungE2eTest() : AgentE2eTest({}, {"--hang-hook", "echo dumped $UNIPOOL_PIDS"}) {}
};

// A job that reports steps and then stops advancing is declared hung after
// its progressTimeout: an event with the last step and the rank's last log
// line, the hook's dump, a restart like a failure, and then Failed when its
// restarts are spent; nothing of it is left running.
TEST_F(HungE2eTest, AJobThatStopsAdvancingIsRestartedThenFailed) {
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = SubmitYaml(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: stuck}\nspec:\n"
      "  command: [sh, -c, 'for s in 1 2 3; do echo \"{\\\"step\\\": $s}\" >> "
      "$UNIPOOL_REPORT_FILE; sleep 0.3; done; echo waiting in all-reduce; exec sleep 6074']\n"
      "  gpus: 1\n  progressTimeout: 2s\n  restartPolicy: {maxRestarts: 1, backoff: 1s}\n");
  ASSERT_GT(id, 0);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Failed"; }, 60, "failed as hung");
  const std::string msg = done["message"];
  EXPECT_NE(msg.find("hung: no progress since step 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0: waiting in all-reduce"), std::string::npos) << msg;
  EXPECT_EQ(done["restarts"], 1);
  const std::vector<std::string> types = EventTypes(id);
  EXPECT_NE(std::find(types.begin(), types.end(), "Hung"), types.end());
  const std::string dump =
      ReadAll(server_.dir() + "/agents/n0/jobs/" + std::to_string(id) + "/run-1/hang-hook.txt");
  EXPECT_NE(dump.find("dumped "), std::string::npos) << dump;
  EXPECT_EQ(WaitSleepers("6074", 0), 0);
}

// A PyTorchJob runs its container's command once per pod, as Kubeflow
// does: RANK of WORLD_SIZE pods, the pod's GPUs, and torchrun's defaults
// (PET_*) for a command that runs torchrun itself. The job succeeds when
// its master (rank 0) does, as Kubeflow's does: so each pod waits for the
// others' files, as ranks wait for each other in their first collective.
TEST_F(AgentE2eTest, APyTorchJobRunsItsCommandOncePerPod) {
  for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
  WaitNodesUp(3);
  const std::string pod =
      "        spec:\n          containers:\n          - name: pytorch\n"
      "            command: [sh, -c, 'D=$UNIPOOL_CHECKPOINT_DIR; echo $RANK $WORLD_SIZE "
      "$CUDA_VISIBLE_DEVICES $PET_NNODES $PET_NPROC_PER_NODE > $D/tmp-$RANK && mv $D/tmp-$RANK "
      "$D/pod-$RANK; for i in $(seq 300); do [ $(ls $D | grep -c ^pod-) -ge 3 ] && exit 0; "
      "sleep 0.1; done; exit 1']\n"
      "            resources: {limits: {nvidia.com/gpu: 2}}\n";
  const std::string yaml =
      "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: pods}\nspec:\n"
      "  pytorchReplicaSpecs:\n    Master:\n      replicas: 1\n      template:\n" +
      pod + "    Worker:\n      replicas: 2\n      template:\n" + pod;
  const int64_t id = SubmitYaml(yaml);
  ASSERT_GT(id, 0);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded" || j["state"] == "Failed"; }, 30,
      "ended");
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  int pods = 0;
  for (const auto& e : fs::directory_iterator(Ckpt(id))) {
    if (!e.path().filename().string().starts_with("pod-")) continue;
    ++pods;
    const std::string rank = e.path().filename().string().substr(4);
    EXPECT_EQ(ReadAll(e.path().string()), rank + " 3 0,1 3 2\n") << e.path();
  }
  EXPECT_EQ(pods, 3) << "one process per pod";
}

}  // namespace
}  // namespace unipool::testing
