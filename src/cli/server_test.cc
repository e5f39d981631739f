// End-to-end tests of `unipool server` and the CLI on loopback: a real
// server process, real HTTP, the real binary as the client.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

std::string JobYaml(const std::string& name, const std::string& queue, int gpus,
                    const std::string& extra = "") {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata:\n  name: " + name +
         "\nspec:\n  command: [python3, train.py]\n  gpus: " + std::to_string(gpus) +
         "\n  queue: " + queue + "\n" + extra;
}

int64_t Submit(const TestServer& s, const std::string& who, const std::string& yaml) {
  HttpReply r = s.Call("POST", "/v1/jobs", who, yaml, "application/yaml");
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
}

// Polls until job `id` reaches `state` (the reconcile loop runs every 200 ms).
Json WaitForState(const TestServer& s, int64_t id, const std::string& state) {
  Json j;
  for (int i = 0; i < 100; ++i) {
    j = s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
    if (j.value("state", "") == state) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "job " << id << " never reached " << state << ": " << j.dump();
  return j;
}

TEST(ServerTest, CliSubmitGetDescribeCancel) {
  TestServer s;
  s.Start();
  s.UseCli("tenant-a");
  const std::string spec = s.dir() + "/job.yaml";
  std::ofstream(spec) << JobYaml("train-a", "team-a", 16);
  RunResult sub = RunUnipool({"submit", "-f", spec});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  EXPECT_EQ(sub.out, "job/1 submitted (train-a, queue team-a, 16 GPUs)\n");
  WaitForState(s, 1, "Running");

  RunResult get = RunUnipool({"get", "jobs"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("ID"), std::string::npos);
  EXPECT_NE(get.out.find("train-a"), std::string::npos);
  EXPECT_NE(get.out.find("Running"), std::string::npos);

  RunResult json = RunUnipool({"get", "jobs", "1", "-o", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  Json j = Json::parse(json.out);
  EXPECT_EQ(j["tasks"].size(), 2u);  // 16 GPUs on 8-GPU nodes

  RunResult yaml = RunUnipool({"get", "jobs", "-o", "yaml"});
  EXPECT_EQ(yaml.exit_code, 0);
  EXPECT_NE(yaml.out.find("name: train-a"), std::string::npos);

  RunResult desc = RunUnipool({"describe", "job", "1"});
  ASSERT_EQ(desc.exit_code, 0) << desc.err;
  for (const char* want : {"State:", "Running", "Placement:", "Events:", "Submitted", "Started"}) {
    EXPECT_NE(desc.out.find(want), std::string::npos) << want << "\n" << desc.out;
  }

  RunResult cancel = RunUnipool({"cancel", "1"});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(s.Call("GET", "/v1/jobs/1", "admin").json()["state"], "Cancelled");
  RunResult again = RunUnipool({"cancel", "1"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already ended"), std::string::npos);

  // Exit codes scripts can use.
  EXPECT_EQ(RunUnipool({"describe", "job", "99"}).exit_code, 3);
  std::ofstream(spec) << JobYaml("x", "team-a", 0);
  RunResult bad = RunUnipool({"submit", "-f", spec});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("spec.gpus"), std::string::npos) << bad.err;
  s.UseCli("viewer");
  EXPECT_EQ(RunUnipool({"cancel", "1"}).exit_code, 4);
  setenv("UNIPOOL_SERVER", "http://127.0.0.1:1", 1);
  EXPECT_EQ(RunUnipool({"status"}).exit_code, 5);
}

TEST(ServerTest, NodesAndQueuesFromTheCli) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  RunResult nodes = RunUnipool({"get", "nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("dev-0"), std::string::npos);
  RunResult cordon = RunUnipool({"cordon", "dev-0", "--reason", "bad fan"});
  ASSERT_EQ(cordon.exit_code, 0) << cordon.err;
  EXPECT_EQ(cordon.out, "node/dev-0 cordoned (state cordoned)\n");
  RunResult drain = RunUnipool({"drain", "dev-1"});
  EXPECT_EQ(drain.out, "node/dev-1 drained (state drained)\n");
  RunResult desc = RunUnipool({"describe", "node", "dev-0"});
  EXPECT_NE(desc.out.find("bad fan"), std::string::npos) << desc.out;
  EXPECT_EQ(RunUnipool({"uncordon", "dev-0", "dev-1"}).exit_code, 0);
  EXPECT_EQ(s.Call("GET", "/v1/nodes/dev-1", "admin").json()["state"], "up");
  EXPECT_EQ(RunUnipool({"cordon", "nope"}).exit_code, 3);

  RunResult q = RunUnipool({"queue", "set", "research", "--guarantee", "8", "--limit", "24",
                            "--weight", "2", "--policy", "fifo"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "queue/research created\n");
  EXPECT_EQ(RunUnipool({"queue", "set", "research", "--weight", "3"}).out,
            "queue/research updated\n");
  Json got = s.Call("GET", "/v1/queues/research", "admin").json();
  EXPECT_EQ(got["limit"], 24);  // kept
  EXPECT_EQ(got["weight"], 3);
  EXPECT_EQ(got["policy"], "fifo");
  RunResult queues = RunUnipool({"get", "queues", "-o", "wide"});
  EXPECT_NE(queues.out.find("research"), std::string::npos);
  RunResult status = RunUnipool({"status"});
  EXPECT_NE(status.out.find("32 free"), std::string::npos) << status.out;
}

// A queue ordered shortest job first (sjf) starts the waiting job with the
// shortest time limit first; jobs already waiting, recovered by a restart,
// are re-sorted when the order changes.
TEST(ServerTest, AnSjfQueueStartsTheShortestTimeLimitFirst) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  const int64_t blocker = Submit(s, "tenant-a", JobYaml("blocker", "team-a", 32));
  const Json running = WaitForState(s, blocker, "Running");
  std::vector<int64_t> waiting;  // time limits of 3 h, none, 1 h, 2 h
  for (const char* limit : {"3h", "", "1h", "2h"}) {
    const std::string extra = *limit ? std::string("  timeLimit: ") + limit + "\n" : "";
    waiting.push_back(Submit(s, "tenant-a", JobYaml("w", "team-a", 32, extra)));
  }
  s.Stop();
  s.Start();  // (which sets team-a back to its defaults)
  RunResult set = RunUnipool({"queue", "set", "team-a", "--order", "sjf"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(s.Call("GET", "/v1/queues/team-a", "admin").json()["order"], "sjf");
  EXPECT_EQ(RunUnipool({"queue", "set", "team-a", "--order", "shortest"}).exit_code, 2);
  HttpReply bad = s.Call("PUT", "/v1/queues/team-a", "admin", R"({"order": "random"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("order: expected submission, sjf or las"), std::string::npos) << bad.body;
  auto finish = [&](int64_t id, const Json& job) {
    HttpReply r = s.Call("POST", "/v1/jobs/" + std::to_string(id) + "/report", "admin",
                         Json{{"generation", job["generation"]}, {"kind", "succeeded"}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  };
  finish(blocker, running);
  for (int64_t next : {waiting[2], waiting[3], waiting[0], waiting[1]}) {
    const Json job = WaitForState(s, next, "Running");
    for (int64_t other : waiting) {
      if (other == next) continue;
      const std::string state =
          s.Call("GET", "/v1/jobs/" + std::to_string(other), "admin").json()["state"];
      EXPECT_NE(state, "Running") << "job " << other << " runs beside " << next;
    }
    finish(next, job);
  }
}

// Power as a schedulable limit (testdata/clusters/power-capped.yaml: the
// rack's 23 kW cap leaves room for 16 training GPUs of 32): the third
// 8-GPU job waits with reason Power and says why; it starts once one of
// the others ends. Running jobs show their energy and power (by the model:
// no nvidia-smi here), and /metrics the domain's draw and cap.
// dataLocality names a storage system: the job prefers the partition its
// data lives in; one every site reaches alike prefers none; an unknown
// name is refused with the field named.
TEST(ServerTest, DataLocalityOnAStorageSystemPrefersItsPartition) {
  TestServer::Options o;
  o.cluster = "testdata/clusters/two-sites.yaml";
  TestServer s(o);
  s.Start();
  for (const char* storage : {"lustre-east", "lustre-west"}) {
    const int64_t id =
        Submit(s, "tenant-a",
               JobYaml(storage, "team-a", 2, std::string("  dataLocality: ") + storage + "\n"));
    const Json j = WaitForState(s, id, "Running");
    ASSERT_EQ(j["tasks"].size(), 1u) << j.dump();
    EXPECT_EQ(j["tasks"][0]["node"].get<std::string>()[0], storage[7]) << j.dump();  // e or w
  }
  const int64_t anywhere =
      Submit(s, "tenant-a", JobYaml("s3", "team-a", 2, "  dataLocality: s3\n"));
  WaitForState(s, anywhere, "Running");
  HttpReply bad = s.Call("POST", "/v1/jobs", "tenant-a",
                         JobYaml("nfs", "team-a", 2, "  dataLocality: nfs\n"), "application/yaml");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(
      bad.body.find("spec.dataLocality: the cluster has no partition or storage system 'nfs'"),
      std::string::npos)
      << bad.body;
}

TEST(ServerTest, AJobWaitsForPowerAndSaysSo) {
  TestServer::Options o;
  o.cluster = "testdata/clusters/power-capped.yaml";
  TestServer s(o);
  s.Start();
  s.UseCli("admin");
  const int64_t a = Submit(s, "tenant-a", JobYaml("a", "team-a", 8));
  const int64_t b = Submit(s, "tenant-a", JobYaml("b", "team-a", 8));
  const Json running = WaitForState(s, a, "Running");
  WaitForState(s, b, "Running");
  const int64_t c = Submit(s, "tenant-a", JobYaml("c", "team-a", 8));
  Json waiting = Json::object();
  for (int i = 0; i < 100 && waiting.value("reason", "") != "Power"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    waiting = s.Call("GET", "/v1/jobs/" + std::to_string(c), "admin").json();
  }
  ASSERT_EQ(waiting.value("reason", ""), "Power") << waiting.dump();
  RunResult desc = RunUnipool({"describe", "job", std::to_string(c)});
  EXPECT_NE(desc.out.find("waiting for power: rack rack draws 22.7 kW of its 23.0 kW cap"),
            std::string::npos)
      << desc.out;
  RunResult get = RunUnipool({"get", "jobs"});
  EXPECT_NE(get.out.find("Power"), std::string::npos) << get.out;

  const Json ja = s.Call("GET", "/v1/jobs/" + std::to_string(a), "admin").json();
  EXPECT_EQ(ja.value("powerSource", ""), "model") << ja.dump();
  EXPECT_DOUBLE_EQ(ja.value("powerWatts", 0.0), 8 * (600 + 375));
  desc = RunUnipool({"describe", "job", std::to_string(a)});
  EXPECT_NE(desc.out.find("drawing 7.80 kW now (model)"), std::string::npos) << desc.out;
  const std::string metrics = s.Call("GET", "/metrics", "viewer").body;
  for (const char* want :
       {"unipool_power_domain_cap_watts{tier=\"rack\",group=\"rack\"} 23000",
        "unipool_power_domain_watts{tier=\"rack\",group=\"rack\"} 22720",
        "unipool_power_it_watts{source=\"model\"} 22720", "unipool_job_power_watts{job=\"1\""}) {
    EXPECT_NE(metrics.find(want), std::string::npos) << want;
  }

  HttpReply r = s.Call("POST", "/v1/jobs/" + std::to_string(a) + "/report", "admin",
                       Json{{"generation", running["generation"]}, {"kind", "succeeded"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  WaitForState(s, c, "Running");
  const Json done = WaitForState(s, a, "Succeeded");
  EXPECT_GT(done.value("energyJoules", 0.0), 0) << done.dump();
}

// Scheduling end to end: the server runs the core scheduler. A high-priority
// job preempts a low one, which stops (reported by its agent) and resumes.
TEST(ServerTest, PreemptionThroughTheApi) {
  TestServer s(TestServer::Options{.extra_args = {"--min-runtime", "0s"}});
  s.Start();
  const int64_t low =
      Submit(s, "tenant-a", JobYaml("low", "team-a", 32, "  priorityClassName: low\n"));
  Json running = WaitForState(s, low, "Running");
  const int64_t high =
      Submit(s, "tenant-a", JobYaml("high", "team-a", 16, "  priorityClassName: high\n"));
  Json pre = WaitForState(s, low, "Preempting");
  EXPECT_NE(pre["message"].get<std::string>().find("preempted for job " + std::to_string(high)),
            std::string::npos);
  // A restart in the middle of a preemption keeps it going.
  s.Stop();
  s.Start();
  Json still = s.Call("GET", "/v1/jobs/" + std::to_string(low), "admin").json();
  EXPECT_EQ(still["state"], "Preempting") << still.dump();
  EXPECT_EQ(still["preemptDeadline"], pre["preemptDeadline"]);
  // The agent says the processes are gone (an admin stands in for it).
  HttpReply stopped = s.Call("POST", "/v1/jobs/" + std::to_string(low) + "/report", "admin",
                             Json{{"generation", pre["generation"]}, {"kind", "stopped"}}.dump());
  ASSERT_EQ(stopped.status, 200) << stopped.body;
  WaitForState(s, high, "Running");
  Json back = WaitForState(s, low, "Pending");
  EXPECT_EQ(back["preemptions"], 1);
  Json why = s.Call("GET", "/v1/jobs/" + std::to_string(low) + "/explain", "tenant-a").json();
  EXPECT_FALSE(why["explain"].get<std::string>().empty());
  // A stale report (an old run) is refused.
  HttpReply stale = s.Call("POST", "/v1/jobs/" + std::to_string(low) + "/report", "admin",
                           Json{{"generation", 0}, {"kind", "succeeded"}}.dump());
  EXPECT_EQ(stale.status, 409) << stale.body;
  // The high job ends; the low one resumes.
  Json h = s.Call("GET", "/v1/jobs/" + std::to_string(high), "admin").json();
  ASSERT_EQ(s.Call("POST", "/v1/jobs/" + std::to_string(high) + "/report", "admin",
                   Json{{"generation", h["generation"]}, {"kind", "succeeded"}}.dump())
                .status,
            200);
  Json resumed = WaitForState(s, low, "Running");
  EXPECT_EQ(resumed["generation"], 2);
  Json events = s.Call("GET", "/v1/jobs/" + std::to_string(low) + "/events", "admin").json();
  std::vector<std::string> types;
  for (const Json& e : events["items"]) types.push_back(e["type"]);
  EXPECT_EQ(types,
            (std::vector<std::string>{"Submitted", "Started", "Preempted", "Stopped", "Started"}));
}

TEST(ServerTest, RestartRebuildsState) {
  TestServer s;
  s.Start();
  const int64_t a = Submit(s, "tenant-a", JobYaml("a", "team-a", 16));
  Json before = WaitForState(s, a, "Running");
  const int64_t b = Submit(s, "tenant-a", JobYaml("b", "team-a", 32));  // waits for GPUs
  ASSERT_EQ(s.Call("POST", "/v1/nodes/dev-3/cordon", "admin").status, 200);
  s.Stop();
  s.Start();
  Json after = s.Call("GET", "/v1/jobs/" + std::to_string(a), "admin").json();
  EXPECT_EQ(after["state"], "Running");
  EXPECT_EQ(after["tasks"], before["tasks"]);  // where it was
  EXPECT_EQ(after["generation"], before["generation"]);
  EXPECT_EQ(s.Call("GET", "/v1/jobs/" + std::to_string(b), "admin").json()["state"], "Pending");
  EXPECT_EQ(s.Call("GET", "/v1/nodes/dev-3", "admin").json()["state"], "cordoned");
  EXPECT_EQ(s.Call("GET", "/v1/queues/team-a", "admin").status, 200);
  EXPECT_EQ(Submit(s, "tenant-a", JobYaml("c", "team-a", 8)), b + 1);  // ids go on
}

// The checkpoint interval agents pass to the job (UNIPOOL_CHECKPOINT_INTERVAL):
// none before a checkpoint is measured; then Daly's interval for that write
// on the job's one node at 3.79 failures per 1,000 node-days (M = 22.8 Ms);
// the spec's own interval, when it gives one, instead.
TEST(ServerTest, TheCheckpointIntervalFollowsTheMeasuredWrite) {
  TestServer s;
  s.Start();
  const int64_t measured = Submit(s, "admin", JobYaml("m", "default", 8));
  const int64_t fixed =
      Submit(s, "admin", JobYaml("f", "default", 8, "  checkpoint: {interval: 15m}\n"));
  const auto interval = [&](int64_t id) {
    const Json job = WaitForState(s, id, "Running");
    const std::string node = job["tasks"][0]["node"];
    const Json a = s.Call("GET", "/v1/nodes/" + node + "/assignments", "admin").json();
    for (const Json& item : a["items"]) {
      if (item["id"] == id) return item["checkpointIntervalSeconds"].get<double>();
    }
    ADD_FAILURE() << "no assignment of job " << id << " on " << node << ": " << a.dump();
    return -1.0;
  };
  EXPECT_EQ(interval(measured), 0);
  const Json job = s.Call("GET", "/v1/jobs/" + std::to_string(measured), "admin").json();
  const Json report{{"generation", job["generation"]},
                    {"kind", "checkpoint"},
                    {"message", "step 10"},
                    {"data", {{"step", 10}, {"seconds", 30}}}};
  ASSERT_EQ(
      s.Call("POST", "/v1/jobs/" + std::to_string(measured) + "/report", "admin", report.dump())
          .status,
      200);
  const double mtbf = 1000 * 86400 / 3.79, young = std::sqrt(2 * 30 * mtbf);
  const double daly = young * (1 + std::sqrt(30 / (2 * mtbf)) / 3 + 30 / (18 * mtbf)) - 30;
  EXPECT_NEAR(interval(measured), daly, 1e-3);
  EXPECT_NEAR(daly, 10.3 * 3600, 0.1 * 3600);
  EXPECT_EQ(interval(fixed), 900);
}

// Each run's MASTER_PORT is kept in its record: a restarted (or new
// leader's) server gives the same, and jobs whose rank 0 share a node never
// share a port.
TEST(ServerTest, RendezvousPortsAreKeptAndNotSharedOnANode) {
  TestServer s;
  s.Start();
  std::vector<int64_t> ids;
  for (int i = 0; i < 8; ++i) ids.push_back(Submit(s, "admin", JobYaml("one", "default", 1)));
  auto ports = [&] {
    std::map<int64_t, int> out;  // job -> port
    for (const std::string node : {"dev-0", "dev-1", "dev-2", "dev-3"}) {
      Json a = s.Call("GET", "/v1/nodes/" + node + "/assignments", "admin").json();
      std::set<int> on_node;
      for (const Json& item : a["items"]) {
        const int port = item["world"]["masterPort"];
        EXPECT_TRUE(port >= 20000 && port <= 32767) << port;
        EXPECT_TRUE(on_node.insert(port).second) << "port " << port << " twice on " << node;
        out[item["id"].get<int64_t>()] = port;
      }
    }
    return out;
  };
  for (int64_t id : ids) WaitForState(s, id, "Running");
  const std::map<int64_t, int> before = ports();
  EXPECT_EQ(before.size(), ids.size());
  s.Stop();
  s.Start();
  EXPECT_EQ(ports(), before);
}

TEST(ServerTest, WatchSeesChanges) {
  TestServer s;
  s.Start();
  const int64_t rev = s.Call("GET", "/v1/summary", "admin").json()["revision"];
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Submit(s, "tenant-a", JobYaml("w", "team-a", 8));
  });
  HttpReply r = s.Call(
      "GET", "/v1/watch?kind=jobs&timeoutSeconds=10&revision=" + std::to_string(rev), "tenant-a");
  later.join();
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = r.json();
  ASSERT_FALSE(j["events"].empty());
  EXPECT_EQ(j["events"][0]["object"]["name"], "w");
  EXPECT_GT(j["revision"].get<int64_t>(), rev);
  // Tenant b sees none of tenant a's jobs.
  HttpReply other = s.Call(
      "GET", "/v1/watch?kind=jobs&timeoutSeconds=0&revision=" + std::to_string(rev), "tenant-b");
  EXPECT_TRUE(other.json()["events"].empty()) << other.body;
}

// kill -9 while clients submit: every acknowledged job is there after the
// restart, with what was acknowledged.
TEST(ServerTest, KillNineLosesNoAcknowledgedJob) {
  TestServer s;
  s.Start();
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<int64_t, std::string> acked;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        const std::string name = "c" + std::to_string(c) + "-" + std::to_string(i);
        HttpReply r =
            s.Call("POST", "/v1/jobs", "tenant-a", JobYaml(name, "team-a", 8), "application/yaml");
        if (r.status != 201) continue;  // the server died under this one
        std::lock_guard lock(mu);
        acked[r.json()["id"].get<int64_t>()] = name;
      }
    });
  }
  for (int i = 0; i < 400; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::lock_guard lock(mu);
    if (acked.size() >= 150) break;
  }
  s.Kill9();
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_GE(acked.size(), 50u);
  s.Start();
  for (const auto& [id, name] : acked) {
    HttpReply r = s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin");
    ASSERT_EQ(r.status, 200) << "acknowledged job " << id << " lost";
    EXPECT_EQ(r.json()["name"], name);
  }
  // Every acknowledged Submitted event is there too.
  for (const auto& [id, name] : acked) {
    Json ev = s.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").json();
    ASSERT_FALSE(ev["items"].empty());
    EXPECT_EQ(ev["items"][0]["type"], "Submitted");
  }
  std::cerr << "acknowledged before kill -9: " << acked.size() << ", all found\n";
}

// A process of a 2-node gang failed because a peer went away: the server
// waits half a lease to learn whether the peer's node was lost (then it is a
// disruption); every node still answering, it is the job's own failure.
TEST(ServerTest, APeerLostFailureWaitsForTheNodesThenCountsAsTheJobs) {
  TestServer s(TestServer::Options{.extra_args = {"--node-lease", "6s"}});
  s.Start();
  const int64_t id = Submit(s, "admin", JobYaml("gang", "default", 16, "  gpusPerNode: 8\n"));
  Json running = WaitForState(s, id, "Running");
  ASSERT_EQ(running["tasks"].size(), 2u) << running.dump();
  const std::string path = "/v1/jobs/" + std::to_string(id) + "/report";
  HttpReply r = s.Call("POST", path, "admin",
                       Json{{"generation", running["generation"]},
                            {"kind", "failed"},
                            {"message", "rank 0: exit code 1 (node dev-0)"},
                            {"data", {{"peerLost", true}}}}
                           .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json waiting = s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
  EXPECT_EQ(waiting["state"], "Running") << "decided before half a lease";
  EXPECT_EQ(waiting["restarts"], 0);
  Json failed = WaitForState(s, id, "Pending");
  EXPECT_EQ(failed["restarts"], 1) << failed.dump();
  EXPECT_EQ(failed["disruptions"], 0);
  EXPECT_NE(failed["message"].get<std::string>().find("rank 0: exit code 1"), std::string::npos);
}

}  // namespace
}  // namespace unipool::testing
