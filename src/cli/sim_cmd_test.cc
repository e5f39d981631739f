// End-to-end tests of `unipool sim`.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_test_util.h"

namespace unipool {
namespace {

using nlohmann::json;
using testing::RunUnipool;

const std::string kPhilly = std::string(UNIPOOL_SOURCE_DIR) + "/testdata/traces/philly.csv";

// The whole Philly trace replays on its cluster with every job accounted for.
TEST(SimCommandTest, PhillyReplayAccountsForEveryJob) {
  testing::RunResult r = RunUnipool({"sim", "--cluster", "examples/clusters/philly.yaml", "--trace",
                                     kPhilly, "-o", "json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& p = j["policies"][0];
  EXPECT_EQ(p["jobs"]["total"], 82247);
  EXPECT_EQ(p["jobs"]["done"], 82247);
  EXPECT_EQ(p["jobs"]["unfinished"], 0);
  EXPECT_EQ(p["jobs"]["infeasible"], 0);
  EXPECT_NEAR(p["gpuHoursDone"].get<double>(), 978078.5, 1.0);
}

TEST(SimCommandTest, SameSeedGivesByteIdenticalOutput) {
  for (const char* format : {"json", "text"}) {
    const std::vector<std::string> args{
        "sim",          "examples/sims/llama3.yaml", "--horizon", "10d",
        "--policies",   "young-daly,fixed-1h",       "-o",        format,
        "--no-progress"};
    testing::RunResult a = RunUnipool(args), b = RunUnipool(args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(a.out, b.out) << format;
  }
  testing::RunResult j = RunUnipool({"sim", "examples/sims/llama3.yaml", "--horizon", "10d",
                                     "--policies", "young-daly,fixed-1h", "-o", "json"});
  const json p = json::parse(j.out)["policies"];
  EXPECT_GT(p[0]["ettr"].get<double>(), p[1]["ettr"].get<double>());
  EXPECT_FALSE(p[0]["scheduler"].contains("cycleP99Us"));
  testing::RunResult t =
      RunUnipool({"sim", "examples/sims/llama3.yaml", "--horizon", "1d", "--timing", "-o", "json"});
  EXPECT_TRUE(json::parse(t.out)["policies"][0]["scheduler"].contains("cycleP99Us"));
}

// Lost work is counted once per stop: without checkpoints a job loses at
// most all the GPU-hours there were (it once reported 21.7M of 21.2M).
TEST(SimCommandTest, LostWorkNeverExceedsTheGpuHoursThereWere) {
  testing::RunResult r = RunUnipool({"sim", "examples/sims/llama3.yaml", "--policies",
                                     "no-checkpoint", "-o", "json", "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json p = json::parse(r.out)["policies"][0];
  const double there_were = p["gpus"].get<double>() * p["days"].get<double>() * 24;
  const double lost = p["failures"]["lostGpuHours"].get<double>();
  EXPECT_LE(lost, there_were);
  EXPECT_GT(lost, 0.95 * there_were);  // and nearly all of it: nothing is ever saved
}

// The summary of every policy of a bundled example, as JSON (empty when
// the run fails, which the test then reports).
json PoliciesOf(const std::string& example) {
  testing::RunResult r = RunUnipool({"sim", example, "-o", "json", "--no-progress"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out)["policies"] : json::array();
}

// The power example (docs/sim.md, "Power"): hall 1's 1.5 MW cap keeps
// the cluster under 3.5 MW of IT power, where the uncapped baseline peaks
// near 4 MW, and costs the jobs time (mean JCT 7.1 h -> 14.2 h).
TEST(SimCommandTest, ThePowerExampleHoldsTheHallAtItsCapAndShowsTheCost) {
  const json p = PoliciesOf("examples/sims/power-cap.yaml");
  ASSERT_EQ(p.size(), 2u);
  const json &capped = p[0], &uncapped = p[1];
  // Hall 0 at most 2.0 MW (all 2,048 GPUs training) + hall 1's cap.
  EXPECT_LE(capped["power"]["peakItMw"].get<double>(), 1.9968 + 1.5);
  EXPECT_GT(uncapped["power"]["peakItMw"].get<double>(), 3.6);
  EXPECT_GT(capped["jctSeconds"]["mean"].get<double>(),
            1.5 * uncapped["jctSeconds"]["mean"].get<double>());
  EXPECT_EQ(capped["jobs"]["done"], uncapped["jobs"]["done"]);
  EXPECT_NEAR(capped["power"]["facilityEnergyMwh"].get<double>(),
              1.3 * capped["power"]["itEnergyMwh"].get<double>(), 1e-6);
}

// The storage example (docs/sim.md, "Checkpoints and storage"): a 5.67 TB
// checkpoint of a 405B-class job on 16,384 H100s stalls it 2.8 s on 2 TB/s
// of storage (its 2,048 nodes' links give more), 27.7 ms to host memory
// (2,048 x 100 GB/s); two-stage keeps more of the time useful even though
// failures cut some drains off and fall back.
TEST(SimCommandTest, TwoStageCheckpointsBeatDirectOnTheLlama3FailureRate) {
  const json p = PoliciesOf("examples/sims/checkpoint-storage.yaml");
  ASSERT_EQ(p.size(), 2u);
  const json &direct = p[0], &staged = p[1];
  EXPECT_NEAR(direct["checkpointStallSeconds"]["p50"].get<double>(), 5670e9 / 2e12, 1e-3);
  EXPECT_NEAR(staged["checkpointStallSeconds"]["p50"].get<double>(), 5670e9 / (2048 * 100e9), 1e-6);
  EXPECT_EQ(direct["drainsLost"], 0);
  EXPECT_GT(staged["drainsLost"].get<int64_t>(), 0);
  EXPECT_GT(staged["ettr"].get<double>(), direct["ettr"].get<double>() + 0.01);
  EXPECT_EQ(staged["failures"]["count"], direct["failures"]["count"]);  // the same seed
}

// Training keeps going (docs/sim.md, "Elastic continue and straggler
// replacement"): on the Llama 3 failure rate with slow nodes, elastic
// continue loses a tenth of the failure GPU-hours a restart from the
// checkpoint does, and replacing stragglers wins back the slow time.
TEST(SimCommandTest, ElasticContinueAndStragglerReplacementKeepTheLlama3RunGoing) {
  const json p = PoliciesOf("examples/sims/llama3-elastic.yaml");
  ASSERT_EQ(p.size(), 3u);
  const json &restart = p[0], &elastic = p[1], &replace = p[2];
  EXPECT_EQ(elastic["failures"]["count"], restart["failures"]["count"]);  // the same seed
  EXPECT_LT(elastic["failures"]["lostGpuHours"].get<double>(),
            restart["failures"]["lostGpuHours"].get<double>() / 10);
  EXPECT_GT(elastic["ettr"].get<double>(), restart["ettr"].get<double>() + 0.03);
  EXPECT_GT(replace["ettr"].get<double>(), elastic["ettr"].get<double>() + 0.01);
  EXPECT_GT(restart["stragglers"]["count"].get<int64_t>(), 0);
  EXPECT_EQ(restart["stragglers"]["replaced"], 0);  // onStraggler: warn
  EXPECT_GT(replace["stragglers"]["replaced"].get<int64_t>(), 0);
}

TEST(SimCommandTest, WritesReportAndTimeSeries) {
  const std::string dir = ::testing::TempDir();
  const std::string html = dir + "/report.html", csv = dir + "/series.csv";
  testing::RunResult r = RunUnipool({"sim", "examples/sims/llama3.yaml", "--horizon", "2d",
                                     "--report", html, "--timeseries", csv, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ETTR (GPU-time weighted)"), std::string::npos) << r.out;
  std::ifstream h(html), c(csv);
  std::stringstream hs, cs;
  hs << h.rdbuf();
  cs << c.rdbuf();
  EXPECT_NE(hs.str().find("<svg"), std::string::npos);
  EXPECT_EQ(hs.str().find("<script"), std::string::npos);  // self-contained, static
  EXPECT_EQ(cs.str().rfind("policy,time_hours,allocated_gpus", 0), 0u);
}

// What a capacity planner reads in the report of a shared cluster with
// failures and a rolling maintenance (examples/sims/a100-week.yaml).
TEST(SimCommandTest, TheReportShowsGoodputMaintenanceQueuesAndFailureCauses) {
  const std::string dir = ::testing::TempDir();
  const std::string html = dir + "/week.html", csv = dir + "/week.csv";
  testing::RunResult r = RunUnipool({"sim", "examples/sims/a100-week.yaml", "--report", html,
                                     "--timeseries", csv, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream h(html), c(csv);
  std::stringstream hs, cs;
  hs << h.rdbuf();
  cs << c.rdbuf();
  const std::string report = hs.str();
  for (const char* part :
       {"GPUs allocated, and doing useful work (dashed)", "default: useful work",
        "GPUs failed, and drained for maintenance (dashed)", "maintenance (shaded)",
        "fill='#e8e8e8'", "Failures per day by cause", "host and software",
        "GPUs in use by queue [default]", "pretrain guarantee", "research guarantee",
        "queue wait (log; under 1 s at 1 s)", "hours (log)", ">7 d<"}) {
    EXPECT_NE(report.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(report.find("dev guarantee"), std::string::npos) << "dev has no guarantee";
  EXPECT_EQ(report.find("<script"), std::string::npos);
  // The series: drained GPUs during the maintenance (a leaf group: 128
  // GPUs), and useful work that only grows.
  std::string line;
  std::getline(cs, line);
  EXPECT_EQ(line,
            "policy,time_hours,allocated_gpus,down_gpus,running_jobs,pending_jobs,failures,"
            "lost_gpu_hours,drained_gpus,useful_gpu_hours,it_mw");
  int64_t drained_max = 0;
  double useful = 0;
  while (std::getline(cs, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 11u) << line;
    EXPECT_GT(std::stod(f[10]), 0) << "the cluster draws power even idle: " << line;
    if (f[0] != "default") continue;
    drained_max = std::max<int64_t>(drained_max, std::stoll(f[8]));
    EXPECT_GE(std::stod(f[9]), useful) << line;
    useful = std::stod(f[9]);
    if (std::stod(f[1]) < 48) {
      EXPECT_EQ(f[8], "0") << "maintenance starts on day 2: " << line;
    }
  }
  EXPECT_EQ(drained_max, 128);
  EXPECT_GT(useful, 0);
}

// The compact-gangs example: the curve of leaves per gang against makespan
// for maxWait 0 s, 10 s and 60 s, and every gang's fate in --jobs.
TEST(SimCommandTest, CompactGangsExampleShowsTheCurveAndWritesEveryJob) {
  const std::string csv = ::testing::TempDir() + "/gangs.csv";
  testing::RunResult r = RunUnipool(
      {"sim", "examples/sims/compact-gangs.yaml", "-o", "json", "--jobs", csv, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json p = json::parse(r.out)["policies"];
  ASSERT_EQ(p.size(), 3u);
  std::vector<double> leaves;
  for (const json& run : p) {
    EXPECT_EQ(run["jobs"]["done"], 800);
    EXPECT_EQ(run["gangs"]["multiNode"], 470);
    EXPECT_EQ(run["gangs"]["tier"], "leaf");
    EXPECT_NEAR(run["gangs"]["groupsPerGangBound"].get<double>(), 1.211, 0.001);
    EXPECT_LE(run["makespanSeconds"].get<double>(), 75);
    EXPECT_GE(run["utilizationAllocated"].get<double>(), 0.70);
    leaves.push_back(run["gangs"]["groupsPerGang"].get<double>());
  }
  // Waiting buys compactness: at the default (60 s) better than Slurm's
  // 1.309 on this workload, and at least 440 of 470 on the fewest leaves.
  EXPECT_GT(leaves[0], leaves[1]);
  EXPECT_GE(leaves[1], leaves[2]);
  EXPECT_LE(leaves[2], 1.30);
  EXPECT_GE(p[2]["gangs"]["onFewest"].get<int>(), 440);

  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line,
            "policy,job,name,queue,gpus,submit_s,start_s,end_s,wait_s,nodes,nvlink_groups,"
            "leaf_groups,spine_groups,core_groups,failures,preemptions,lost_gpu_seconds,energy_kwh,"
            "state");
  int rows = 0, spread = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    ASSERT_EQ(f.size(), 19u) << line;
    EXPECT_EQ(f[18], "done") << line;
    EXPECT_GT(std::stod(f[17]), 0) << "a job that ran drew energy: " << line;
    rows++;
    // A gang of <= 16 nodes over more than one leaf, with no wait allowed.
    if (f[0] == "maxWait-0s" && std::stoi(f[9]) <= 16 && std::stoi(f[11]) > 1) spread++;
  }
  EXPECT_EQ(rows, 3 * 800);
  EXPECT_GT(spread, 0);
  EXPECT_EQ(RunUnipool({"sim", "examples/sims/compact-gangs.yaml", "--jobs",
                        "/nonexistent-dir/x.csv", "--no-progress"})
                .exit_code,
            2);
}

TEST(SimCommandTest, BadInputExitsTwo) {
  EXPECT_EQ(RunUnipool({"sim"}).exit_code, 2);
  EXPECT_EQ(RunUnipool({"sim", "--cluster", "examples/clusters/devbox.yaml"}).exit_code, 2);
  testing::RunResult r = RunUnipool({"sim", "examples/sims/llama3.yaml", "--policies", "lottery"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no policy named 'lottery'"), std::string::npos) << r.err;
  EXPECT_EQ(RunUnipool({"sim", "examples/sims/llama3.yaml", "--horizon", "soon"}).exit_code, 2);
}

TEST(SimCommandTest, MalformedSimulationFiles) {
  testing::ExpectGoldenErrors("testdata/sims/bad", {"sim"}, {"--no-progress"}, 10);
}

}  // namespace
}  // namespace unipool
