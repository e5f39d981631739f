// End-to-end: `unipool diagnose` on real runs of small jobs that reproduce
// each trouble of MISSION M21 (OOM by allocation, NaN loss by a flag, host
// memory that grows each step until it runs out, a
// gloo timeout by a rank that stops talking, slow data loading by a
// sleeping loader, stuck pending by an impossible request). Its output is
// compared with testdata/diagnose/CASE.txt once times and measured numbers
// are masked (Masked); UNIPOOL_UPDATE_GOLDEN=1 rewrites the files.
#include <filesystem>
#include <fstream>
#include <regex>

#include "cli/agent_e2e_test_util.h"
#include "cli/cli_test_util.h"

namespace unipool::testing {
namespace {

// What changes from run to run: times, measured seconds, ratios, shares.
std::string Masked(std::string text) {
  text = std::regex_replace(text, std::regex(R"(\d{4}-\d\d-\d\dT[0-9:.]+Z)"), "<time>");
  text = std::regex_replace(text, std::regex(R"(\d+\.\d+)"), "<n>");
  text = std::regex_replace(text, std::regex(R"(\d+%)"), "<n>%");
  text = std::regex_replace(text, std::regex(R"(for \d+ steps, to step \d+)"),
                            "for <n> steps, to step <n>");
  text = std::regex_replace(text, std::regex(R"(from \d+ MiB at step \d+ to \d+ MiB at step \d+)"),
                            "from <n> MiB at step <n> to <n> MiB at step <n>");
  return text;
}

bool Ended(const Json& j) {
  return j["state"] == "Succeeded" || j["state"] == "Failed" || j["state"] == "Cancelled";
}

class DiagnoseE2eTest : public AgentE2eTest {
 protected:
  // Runs `unipool diagnose ID` and checks it against the golden file.
  void ExpectDiagnosis(int64_t id, const std::string& name, int exit_code = 1) {
    server_.UseCli("admin");
    RunResult r = RunUnipool({"diagnose", std::to_string(id)});
    EXPECT_EQ(r.exit_code, exit_code) << r.out << r.err;
    const std::string golden = "testdata/diagnose/" + name + ".txt";
    if (std::getenv("UNIPOOL_UPDATE_GOLDEN") != nullptr) {
      std::ofstream(std::filesystem::path(UNIPOOL_SOURCE_DIR) / golden) << Masked(r.out);
    } else {
      EXPECT_EQ(Masked(r.out), ReadSourceFile(golden))
          << "golden mismatch for " << golden << "; the output:\n"
          << r.out;
    }
    RunResult json = RunUnipool({"diagnose", std::to_string(id), "-o", "json"});
    EXPECT_NE(json.out.find("\"causes\""), std::string::npos) << json.out;
  }
  // A stand-in trainer's job that fails once and for all (no restarts).
  int64_t Run(const std::string& name, int gpus, const std::string& args) {
    const int64_t id =
        SubmitYaml("apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
                   "}\nspec:\n  command: [python3, examples/jobs/trainer.py]\n  args: [" + args +
                   "]\n  workingDir: " UNIPOOL_SOURCE_DIR "\n  gpus: " + std::to_string(gpus) +
                   "\n  gpusPerNode: " + std::to_string(std::min(gpus, 2)) +
                   "\n  restartPolicy: {maxRestarts: 0}\n");
    const Json done = WaitFor(id, Ended, 90, "ended");
    EXPECT_EQ(done["state"], "Failed") << done.dump();
    return id;
  }
};

TEST_F(DiagnoseE2eTest, OutOfMemory) {
  StartAgent("n0");
  WaitNodesUp(1);
  // One rank: with two, either may fail first.
  const int64_t id = Run("oom", 1, "--steps, '50', --oom-at-step, '3', --memory-limit-mb, '256'");
  ExpectDiagnosis(id, "oom");
}

// A loop that keeps 2 MiB more each step: the agents' memory watch finds
// the growth (MemoryGrowth) well before the 700 MiB limit ends the run.
TEST_F(DiagnoseE2eTest, HostMemoryGrowth) {
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = Run("leak", 1,
                         "--steps, '2000', --step-time, '0.05', --leak-mb-per-step, '2', "
                         "--memory-limit-mb, '700'");
  const Json events =
      server_.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").json();
  bool grew = false;
  for (const Json& e : events["items"]) grew |= e["type"] == "MemoryGrowth";
  EXPECT_TRUE(grew) << events.dump();
  ExpectDiagnosis(id, "memory-growth");
  const std::string metrics = server_.Call("GET", "/metrics", "admin").body;
  EXPECT_NE(metrics.find("kind=\"MemoryGrowth\"} 1"), std::string::npos);
}

TEST_F(DiagnoseE2eTest, NaNLoss) {
  StartAgent("n0");
  WaitNodesUp(1);
  // The stand-in trainer goes on with a NaN loss (as a job without a NaN
  // check does, burning its GPUs): found at the step it first happened.
  const int64_t id = SubmitTrainer("nan", 2, "--steps, '30', --nan-at-step, '6'");
  WaitFor(id, Ended, 90, "ended");
  ExpectDiagnosis(id, "nan");
}

TEST_F(DiagnoseE2eTest, SlowDataLoading) {
  StartAgent("n0");
  StartAgent("n1");
  WaitNodesUp(2);
  const int64_t id = SubmitTrainer(
      "slow-data", 4, "--steps, '400', --step-time, '0.05', --slow-node, n1, --slow-data");
  ASSERT_FALSE(WaitEvent(id, "DataStraggler", 60).is_null());
  ExpectDiagnosis(id, "slow-data");
  server_.Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "admin");
}

TEST_F(DiagnoseE2eTest, StuckPending) {
  StartAgent("n0");
  WaitNodesUp(1);
  // 4 GPUs within one node, on nodes of 2: accepted (the tier exists),
  // never placed.
  const int64_t id = SubmitTrainer("too-big", 4, "--steps, '10'", "  topology: {within: node}\n");
  WaitFor(
      id, [](const Json& j) { return j.value("reason", "") == "Infeasible"; }, 30, "infeasible");
  ExpectDiagnosis(id, "pending");
}

// Real PyTorch (gloo on CPU): rank 1 stops talking at step 4; rank 0's
// all-reduce times out after 5 s and the agent reads gloo's message.
TEST_F(DiagnoseE2eTest, CommunicationTimeout) {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) {
    GTEST_SKIP() << "Debian's python3-torch is not installed (scripts/install-deps.sh)";
  }
  StartAgent("n0");
  WaitNodesUp(1);
  const std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: timeout}\nspec:\n"
      "  command: [/usr/bin/python3, examples/jobs/train_ddp.py]\n"
      "  args: [--steps, '50', --stall-rank, '1', --stall-at-step, '4', --pg-timeout, '5']\n"
      "  workingDir: " UNIPOOL_SOURCE_DIR
      "\n  gpus: 2\n  gpusPerNode: 2\n  restartPolicy: {maxRestarts: 0}\n";
  const int64_t id = SubmitYaml(yaml);
  const Json done = WaitFor(id, Ended, 120, "ended");
  EXPECT_EQ(done["state"], "Failed") << done.dump();
  ExpectDiagnosis(id, "comm-timeout");
  const std::string metrics = server_.Call("GET", "/metrics", "admin").body;
  EXPECT_NE(metrics.find("kind=\"CommTimeout\"} 1"), std::string::npos);
}

}  // namespace
}  // namespace unipool::testing
