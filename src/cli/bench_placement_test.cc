// `unipool bench placement`: the 800-gang workload through the simulator
// and through a live server driven as its agents would drive it (issue 19's
// targets; the measured figures are in docs/benchmarks.md).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

// On the simulator the placement figures are exact and the test holds them
// to issue 19's targets (1.30 leaves per gang, 440 gangs on the fewest).
// Live, each decision also depends on when each report and each cycle
// lands, and small differences cascade: 2 busy cores moved the figures from
// 1.289 to between 1.255 and 1.343 leaves per gang. The live figure is a
// benchmark's (docs/benchmarks.md, median of 3); the live test asks only
// that the server waits for compact placements as the simulator does, with
// bounds halfway to what not waiting gives (--max-wait 0s: 1.706, 398).
void ExpectCompact(const Json& j, double max_leaves, int64_t min_fewest) {
  EXPECT_EQ(j["jobs"], 800) << j.dump();
  EXPECT_EQ(j["multiNodeGangs"], 470) << j.dump();
  EXPECT_LE(j["leavesPerGang"].get<double>(), max_leaves) << j.dump();
  EXPECT_GE(j["fewestLeaves"].get<int64_t>(), min_fewest) << j.dump();
  EXPECT_NEAR(j["leavesPerGangBound"].get<double>(), 1.211, 0.001) << j.dump();
}

TEST(BenchPlacementTest, TheSimulatorBeatsSlurmsPlacementAndKeepsItsUtilization) {
  RunResult r = RunUnipool({"bench", "placement", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ExpectCompact(j, 1.30, 440);
  // Simulated time: deterministic.
  EXPECT_LE(j["makespanSeconds"].get<double>(), 75) << r.out;
  EXPECT_GE(j["nodeTimeUsed"].get<double>(), 0.70) << r.out;
}

TEST(BenchPlacementTest, ALiveServerPlacesTheWorkloadAsCompactly) {
  TestServer s(TestServer::Options{.cluster = "bench/clusters/gang-1024.yaml"});
  s.Start();
  s.UseCli("admin");
  RunResult r = RunUnipool({"bench", "placement", "--live", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["mode"], "live") << r.out;
  ExpectCompact(j, 1.50, 425);
  // Every job ran to its report or its time limit, and nothing is left.
  const Json left = s.Call("GET", "/v1/jobs?state=Running", "admin").json();
  EXPECT_TRUE(left["items"].empty()) << left.dump();
}

TEST(BenchPlacementTest, ABadWorkloadOrFlagSaysWhereInOneLine) {
  const std::string dir = ::testing::TempDir();
  const std::string bad = dir + "/bench-placement-bad.txt";
  std::ofstream(bad) << "# nodes seconds\n4 10\n4 ten\n";
  RunResult r = RunUnipool({"bench", "placement", "--workload", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: " + bad +
                       ":3: expected 'NODES SECONDS' (two positive integers), got '4 ten'\n");
  r = RunUnipool({"bench", "placement", "--live", "--max-wait", "0s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--max-wait"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace unipool::testing
