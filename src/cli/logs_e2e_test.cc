// `unipool logs` against real agents: every rank with a prefix, the last
// lines, the run before a restart (--previous), and -f that follows the job
// across its restart to its end.
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

class LogsE2eTest : public AgentE2eTest {
 protected:
  LogsE2eTest() : AgentE2eTest({}, {}) {}
};

// Two ranks; the first run prints three lines a rank and fails, the second
// prints one and succeeds.
TEST_F(LogsE2eTest, AllRanksTailPreviousAndFollowAcrossARestart) {
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = SubmitYaml(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: flaky}\nspec:\n"
      "  command: [sh, -c, 'if [ \"$UNIPOOL_RESTART_COUNT\" = 0 ]; then for i in 1 2 3; do "
      "echo \"run 1 rank $RANK line $i\"; done; sleep 1; exit 3; fi; sleep 2; "
      "echo \"run 2 rank $RANK done\"']\n"
      "  gpus: 2\n  launch: per-gpu\n  restartPolicy: {maxRestarts: 1, backoff: 1s}\n");
  ASSERT_GT(id, 0);
  server_.UseCli("admin");
  // -f from the start: both runs' lines, in one stream, until the job ends.
  RunResult follow;
  std::thread follower([&] { follow = RunUnipool({"logs", std::to_string(id), "-f", "--all-ranks"}); });
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Running" && j["generation"] == 2; }, 60,
      "running again");
  RunResult previous = RunUnipool({"logs", std::to_string(id), "--previous", "--rank", "1"});
  ASSERT_EQ(previous.exit_code, 0) << previous.err;
  EXPECT_NE(previous.out.find("run 1 rank 1 line 3"), std::string::npos) << previous.out;
  EXPECT_EQ(previous.out.find("rank 0"), std::string::npos) << previous.out;
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  follower.join();
  ASSERT_EQ(follow.exit_code, 0) << follow.err;
  for (const char* line : {"[rank 0] ", "[rank 1] "}) {
    EXPECT_NE(follow.out.find(line), std::string::npos) << follow.out;
  }
  EXPECT_NE(follow.out.find("run 1 rank 1 line 3"), std::string::npos) << follow.out;
  EXPECT_NE(follow.out.find("run 2 rank 0 done"), std::string::npos) << follow.out;
  EXPECT_NE(follow.out.find("run 2 rank 1 done"), std::string::npos) << follow.out;
  EXPECT_NE(follow.err.find("--- run 2 ---"), std::string::npos) << follow.err;

  // After the end: the last run; its tail; the run before it.
  RunResult all = RunUnipool({"logs", std::to_string(id), "--all-ranks"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_NE(all.out.find("[rank 1] "), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("run 2 rank 1 done"), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("run 1"), std::string::npos) << all.out;
  RunResult tail = RunUnipool({"logs", std::to_string(id), "--tail", "2", "--previous"});
  ASSERT_EQ(tail.exit_code, 0) << tail.err;
  EXPECT_EQ(tail.out.find("line 1"), std::string::npos) << tail.out;
  EXPECT_NE(tail.out.find("run 1 rank 0 line 2"), std::string::npos) << tail.out;
  EXPECT_NE(tail.out.find("run 1 rank 0 line 3"), std::string::npos) << tail.out;
  RunResult since = RunUnipool({"logs", std::to_string(id), "--since", "1h"});
  EXPECT_NE(since.out.find("run 2 rank 0 done"), std::string::npos) << since.out;
}

TEST_F(LogsE2eTest, TailKeepsTheLastLines) {
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = SubmitYaml(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: counts}\nspec:\n"
      "  command: [sh, -c, 'seq 1 500']\n  gpus: 1\n");
  ASSERT_GT(id, 0);
  WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded"; }, 60, "succeeded");
  server_.UseCli("admin");
  RunResult tail = RunUnipool({"logs", std::to_string(id), "--tail", "3"});
  ASSERT_EQ(tail.exit_code, 0) << tail.err;
  std::istringstream lines(tail.out);
  std::vector<std::string> got;
  for (std::string l; std::getline(lines, l);) got.push_back(l.substr(l.find(' ') + 1));
  EXPECT_EQ(got, (std::vector<std::string>{"498", "499", "500"})) << tail.out;
  RunResult bad = RunUnipool({"logs", std::to_string(id), "--since", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace unipool::testing
