// End-to-end: the training-signal watch (core/train/signals.h) on real job
// processes: a slow rank is found from its reports and, with
// onStraggler: replace, the job leaves its node and still ends exactly.
#include <regex>

#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

// The step the Straggler event names ("..., to step 14 (...").
int64_t StepOf(const std::string& message) {
  std::smatch m;
  if (!std::regex_search(message, m, std::regex("to step ([0-9]+)"))) return -1;
  return std::stoll(m[1]);
}

bool Ended(const Json& j) {
  return j["state"] == "Succeeded" || j["state"] == "Failed" || j["state"] == "Cancelled";
}

Json EventOf(const Json& events, const std::string& type) {
  for (const Json& e : events["items"]) {
    if (e["type"] == type) return e;
  }
  return Json();
}

// Four ranks on n0 and n1; rank 2 (local rank 0 on n1) sleeps 3x longer
// per step. The watch names it within 30 of its steps; onStraggler: replace
// cordons n1 and the gang resumes on n0 and n2 from its checkpoint.
TEST_F(AgentE2eTest, AStragglerIsFoundAndReplaced) {
  StartAgent("n0");
  StartAgent("n1");
  StartAgent("n2");
  WaitNodesUp(3);
  // n2 is where it can go: kept out of the first placement, then open.
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/n2/cordon", "admin").status, 200);
  const int64_t id = SubmitTrainer(
      "slow", 4, "--steps, '200', --checkpoint-every, '10', --step-time, '0.1', --slow-node, n1",
      "  onStraggler: replace\n");
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Running"; }, 30, "started");
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/n2/uncordon", "admin").status, 200);
  const std::string path = "/v1/jobs/" + std::to_string(id) + "/events";
  const Json straggler = WaitEvent(id, "Straggler", 30);
  ASSERT_FALSE(straggler.is_null());
  const std::string message = straggler["message"];
  EXPECT_NE(message.find("rank 2 on n1 is "), std::string::npos) << message;
  const int64_t step = StepOf(message);
  EXPECT_GT(step, 0) << message;
  EXPECT_LE(step, 30) << message;
  Json done = WaitFor(id, Ended, 90, "ended");
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(done["restarts"], 0) << "a straggler is not the job's failure";
  EXPECT_EQ(done["disruptions"], 1);
  for (const Json& t : done["tasks"]) EXPECT_NE(t["node"], "n1");
  EXPECT_EQ(Json::parse(ReadAll(Ckpt(id) + "/done.json"))["step"], 200);
  Json n1 = server_.Call("GET", "/v1/nodes/n1", "admin").json();
  EXPECT_EQ(n1["admin"], "cordoned") << n1.dump();
  EXPECT_NE(n1.value("why", "").find("straggler: job"), std::string::npos) << n1.dump();
  const std::string requeued =
      EventOf(server_.Call("GET", path, "admin").json(), "Requeued").value("message", "");
  EXPECT_NE(requeued.find("rank 2 on n1 straggled"), std::string::npos) << requeued;
  std::cerr << "straggler found at its step " << step << ": " << message << "\n";
}

// replace with nowhere to go: a slow node beats no node, the job stays.
TEST_F(AgentE2eTest, AStragglerWithNowhereToGoStays) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  const int64_t id = SubmitTrainer(
      "slow", 4, "--steps, '60', --checkpoint-every, '10', --step-time, '0.1', --slow-node, n1",
      "  onStraggler: replace\n");
  const Json found = WaitEvent(id, "Straggler", 30);
  ASSERT_FALSE(found.is_null());
  const std::string message = found["message"];
  EXPECT_NE(message.find("onStraggler: replace, but the job has no room without n1"),
            std::string::npos)
      << message;
  Json done = WaitFor(id, Ended, 90, "ended");
  EXPECT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(done["disruptions"], 0);
  EXPECT_EQ(server_.Call("GET", "/v1/nodes/n1", "admin").json().value("admin", ""), "");
}

// With the default (warn), the event says what to do and the job stays.
TEST_F(AgentE2eTest, AStragglerIsReportedAndTheJobStays) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  const int64_t id = SubmitTrainer(
      "slow", 4,
      "--steps, '120', --checkpoint-every, '10', --step-time, '0.05', --slow-node, n0, "
      "--slow-data");
  const Json found = WaitEvent(id, "DataStraggler", 30);
  ASSERT_FALSE(found.is_null());
  const std::string message = found["message"];
  EXPECT_NE(message.find("rank 0 on n0"), std::string::npos) << message;
  EXPECT_NE(message.find("cordon n0, or set onStraggler: replace"), std::string::npos) << message;
  const std::string metrics = server_.Call("GET", "/metrics", "admin").body;
  EXPECT_NE(
      metrics.find("unipool_training_anomalies_total{queue=\"default\",kind=\"DataStraggler\"} 1"),
      std::string::npos);
  EXPECT_NE(metrics.find("unipool_job_straggler_ratio{job=\"" + std::to_string(id)),
            std::string::npos);
  Json done = WaitFor(id, Ended, 90, "ended");
  EXPECT_EQ(done["state"], "Succeeded");
  EXPECT_EQ(done["disruptions"], 0);
}

}  // namespace
}  // namespace unipool::testing
