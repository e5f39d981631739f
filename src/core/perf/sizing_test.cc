#include "core/perf/sizing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace unipool::perf {
namespace {

TEST(SizingTest, YoungDalyWallTime) {
  FailureModel f;
  f.node_failures_per_hour = 1e-4;
  f.restart_s = 600;
  f.write_bytes_per_s_per_node = 2e9;
  f.storage_bytes_per_s = 1e12;
  // 1,000 nodes: MTBF 10 h; 1e9 params -> 14 GB checkpoint at 1 TB/s.
  const FailureOverhead o = ExpectedWallTime(86400, 1000, 1e9, f);
  EXPECT_DOUBLE_EQ(o.mtbf_s, 36000);
  EXPECT_DOUBLE_EQ(o.checkpoint_bytes, 14e9);
  EXPECT_DOUBLE_EQ(o.checkpoint_write_s, 0.014);
  const double tau = std::sqrt(2 * 0.014 * 36000);
  EXPECT_DOUBLE_EQ(o.interval_s, tau);
  const double wall = 86400 * (1 + 0.014 / tau) / (1 - (600 + (tau + 0.014) / 2) / 36000);
  EXPECT_DOUBLE_EQ(o.wall_s, wall);
  EXPECT_DOUBLE_EQ(o.expected_failures, wall / 36000);
  EXPECT_TRUE(o.finishes);
}

TEST(SizingTest, FailuresFasterThanRestartsNeverFinish) {
  FailureModel f;
  f.node_failures_per_hour = 1;  // each of 1,000 nodes fails hourly
  f.restart_s = 600;
  const FailureOverhead o = ExpectedWallTime(3600, 1000, 1e9, f);
  EXPECT_FALSE(o.finishes);
  EXPECT_TRUE(std::isinf(o.wall_s));
}

Topology Cluster(int64_t gpus) {
  UniformCluster u;
  u.gpu = *FindBuiltinGpuModel("H100-SXM");
  u.gpus = gpus;
  return std::move(*Topology::Build(UniformClusterSpec(u)));
}

TEST(SizingTest, ChoosesTheSmallestCountThatMeetsTheTarget) {
  const Topology topo = Cluster(4096);
  Job job{*FindBuiltinModel("llama3-8b"), 512, {}};
  SearchOptions o;
  SizingTarget t;
  t.tokens_per_s = 2e6;
  Result<SizingResult> r = Size(job, topo, t, FailureModel{}, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->chosen.meets_target);
  EXPECT_GE(r->chosen.effective_tokens_per_s, 2e6);
  ASSERT_GE(r->tried.size(), 2u);
  for (size_t i = 0; i + 1 < r->tried.size(); ++i) {
    EXPECT_FALSE(r->tried[i].meets_target);
    EXPECT_LT(r->tried[i].gpus, r->tried[i + 1].gpus);
  }
  EXPECT_EQ(r->search.top.front().plan.gpus(), r->chosen.gpus);
  // An unreachable goal returns the fastest, flagged.
  t.tokens_per_s = 1e12;
  r = Size(job, topo, t, FailureModel{}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->chosen.meets_target);
}

TEST(SizingTest, DeadlineMode) {
  const Topology topo = Cluster(4096);
  Job job{*FindBuiltinModel("llama3-8b"), 512, {}};
  SizingTarget t;
  t.tokens = 1e12;
  t.deadline_s = 30 * 86400;
  Result<SizingResult> r = Size(job, topo, t, FailureModel{}, SearchOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->chosen.meets_target);
  EXPECT_LE(r->chosen.failures.wall_s, t.deadline_s);
  EXPECT_EQ(Size(job, topo, SizingTarget{}, FailureModel{}, SearchOptions{}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace unipool::perf
