// End-to-end tests of `unipool topo`: the bundled examples' figures, pinned
// to hand-checked numbers, and one-line errors for malformed files.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace unipool {
namespace {

using nlohmann::json;
using testing::RunUnipool;

json TopoJson(const std::string& file) {
  testing::RunResult r = RunUnipool({"topo", file, "-o", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

double Bisection(const json& j, int tier) { return j["tiers"][tier]["bisectionGbps"]; }

TEST(TopoCommandTest, DevBox) {
  json j = TopoJson("examples/clusters/devbox.yaml");
  EXPECT_EQ(j["gpus"], 32);
  EXPECT_EQ(j["nodes"], 4);
  EXPECT_DOUBLE_EQ(Bisection(j, 0), 4 * 3600);  // 8 GPUs/2 x 3.6 Tb/s
  EXPECT_DOUBLE_EQ(Bisection(j, 1), 16 * 400);
  EXPECT_EQ(j["powerWatts"], 32 * 700);
  EXPECT_DOUBLE_EQ(j["peakBf16Tflops"], 32 * 989.4);
  EXPECT_EQ(j["partitions"][0]["name"], "dev");
}

TEST(TopoCommandTest, A100Cluster) {
  json j = TopoJson("examples/clusters/a100-1k.yaml");
  EXPECT_EQ(j["gpus"], 1024);
  EXPECT_EQ(j["nodes"], 128);
  EXPECT_EQ(j["tiers"][1]["groups"], 8);
  EXPECT_EQ(j["tiers"][1]["switches"], 64);  // 8 rails per leaf group
  EXPECT_DOUBLE_EQ(Bisection(j, 0), 4 * 2400);
  EXPECT_DOUBLE_EQ(Bisection(j, 1), 64 * 200);
  EXPECT_DOUBLE_EQ(Bisection(j, 2), 512 * 200);
  EXPECT_EQ(j["powerWatts"], 1024 * 400);
}

TEST(TopoCommandTest, Llama3Cluster) {
  json j = TopoJson("examples/clusters/llama3-16k.yaml");
  EXPECT_EQ(j["gpus"], 16384);
  EXPECT_EQ(j["nodes"], 2048);
  EXPECT_EQ(j["tiers"][1]["groups"], 1024);  // racks of 16 GPUs
  EXPECT_EQ(j["tiers"][2]["groups"], 8);     // pods of 2,048 GPUs
  EXPECT_DOUBLE_EQ(Bisection(j, 1), 8 * 400);
  EXPECT_DOUBLE_EQ(Bisection(j, 2), 1024 * 400);
  // Aggregation at 7:1: 8,192 GPUs x 400/7 Gb/s (integer bits/s).
  EXPECT_NEAR(Bisection(j, 3), 8192 * 57.142857142, 1e-5);  // (JSON rounds to 6 decimals)
  EXPECT_EQ(j["powerWatts"], 16384 * 700);  // 11.47 MW
  EXPECT_EQ(j["partitions"].size(), 8u);
}

TEST(TopoCommandTest, Nvl72Cluster) {
  json j = TopoJson("examples/clusters/nvl72.yaml");
  EXPECT_EQ(j["gpus"], 4608);
  EXPECT_EQ(j["tiers"][0]["groups"], 64);
  EXPECT_EQ(j["tiers"][0]["maxGroupGpus"], 72);
  EXPECT_DOUBLE_EQ(Bisection(j, 0), 36 * 7200);
  EXPECT_DOUBLE_EQ(Bisection(j, 1), 288 * 800);
  EXPECT_DOUBLE_EQ(Bisection(j, 2), 2304 * 800);
  EXPECT_EQ(j["powerWatts"], 4608 * 1200);
}

TEST(TopoCommandTest, MillionGpuCluster) {
  json j = TopoJson("examples/clusters/super-1m.yaml");
  EXPECT_EQ(j["gpus"], 1048576);
  EXPECT_EQ(j["nodes"], 131072);
  EXPECT_EQ(j["tiers"][0]["maxGroupGpus"], 64);
  EXPECT_EQ(j["tiers"][4]["groups"], 1);
  EXPECT_DOUBLE_EQ(Bisection(j, 0), 32 * 7200.0);
  EXPECT_DOUBLE_EQ(Bisection(j, 1), 128 * 800.0);
  EXPECT_DOUBLE_EQ(Bisection(j, 2), 4096 * 800.0);
  EXPECT_DOUBLE_EQ(Bisection(j, 3), 65536 * 400.0);   // hall 2:1
  EXPECT_DOUBLE_EQ(Bisection(j, 4), 524288 * 200.0);  // site 4:1 after 2:1
  EXPECT_EQ(j["powerWatts"], 1048576LL * 1000);       // 1.05 GW
  EXPECT_EQ(j["partitions"].size(), 8u);
}

TEST(TopoCommandTest, TextSummaryShowsTierTable) {
  testing::RunResult r = RunUnipool({"topo", "examples/clusters/llama3-16k.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("16,384 GPUs on 2,048 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU power 11.47 MW"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("468.11 Tb/s"), std::string::npos) << r.out;
}

TEST(TopoCommandTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunUnipool({"topo"}).exit_code, 2);
  EXPECT_EQ(RunUnipool({"topo", "examples/clusters/devbox.yaml", "-o", "xml"}).exit_code, 2);
  EXPECT_EQ(RunUnipool({"frobnicate"}).exit_code, 2);
  testing::RunResult r = RunUnipool({"topo", "no/such/file.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: no/such/file.yaml: cannot open: No such file or directory\n");
}

// Every malformed cluster file fails with one line naming the place and the
// cause (golden .err files beside them), exit code 2.
TEST(TopoCommandTest, MalformedFilesGiveOneLineErrors) {
  testing::ExpectGoldenErrors("testdata/clusters/bad", {"topo"}, {}, 20);
}

}  // namespace
}  // namespace unipool
