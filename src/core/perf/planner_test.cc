#include "core/perf/planner.h"

#include <gtest/gtest.h>

namespace unipool::perf {
namespace {

HardwareView View(int64_t gpus, const char* gpu = "H100-SXM") {
  UniformCluster u;
  u.gpu = *FindBuiltinGpuModel(gpu);
  u.gpus = gpus;
  Result<Topology> t = Topology::Build(UniformClusterSpec(u));
  EXPECT_TRUE(t.ok());
  return *ViewOf(*t, gpus);
}

TEST(PlannerTest, ReturnsTopKFastestFirstAndFitting) {
  const Job job{*FindBuiltinModel("llama3-70b"), 512, {}};
  SearchOptions o;
  o.top_k = 5;
  Result<PlanSearch> r = Search(job, View(256), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->top.size(), 5u);
  for (size_t i = 0; i < r->top.size(); ++i) {
    EXPECT_TRUE(r->top[i].estimate.memory.fits());
    EXPECT_EQ(r->top[i].plan.gpus(), 256);
    if (i > 0) EXPECT_LE(r->top[i - 1].estimate.time.step, r->top[i].estimate.time.step);
  }
  EXPECT_GT(r->evaluated, 100);
  EXPECT_GT(r->pruned_memory, 0);  // 70B does not fit unsharded on one GPU
  // TP stays inside the 8-GPU NVLink domain.
  EXPECT_LE(r->top.front().plan.tp, 8);
}

TEST(PlannerTest, Deterministic) {
  const Job job{*FindBuiltinModel("mixtral-8x7b"), 256, {}};
  const HardwareView hw = View(128);
  SearchOptions o;
  o.top_k = 10;
  Result<PlanSearch> a = Search(job, hw, o), b = Search(job, hw, o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->top.size(), b->top.size());
  for (size_t i = 0; i < a->top.size(); ++i) EXPECT_EQ(a->top[i].plan, b->top[i].plan);
}

TEST(PlannerTest, FixedDimensionsAreRespected) {
  const Job job{*FindBuiltinModel("llama3-70b"), 512, {}};
  SearchOptions o;
  o.tp = 4;
  o.pp = 4;
  o.cp = 1;
  o.zero = 1;
  o.recompute = Recompute::kFull;
  Result<PlanSearch> r = Search(job, View(256), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const RankedPlan& p : r->top) {
    EXPECT_EQ(p.plan.tp, 4);
    EXPECT_EQ(p.plan.pp, 4);
    EXPECT_EQ(p.plan.dp, 16);
    EXPECT_EQ(p.plan.zero, 1);
    EXPECT_EQ(p.plan.recompute, Recompute::kFull);
  }
}

TEST(PlannerTest, ExplainsWhyAlternativesLose) {
  const Job job{*FindBuiltinModel("llama3-70b"), 512, {}};
  SearchOptions o;
  o.explain = true;
  Result<PlanSearch> r = Search(job, View(256), o);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->why_best.find("MFU"), std::string::npos);
  ASSERT_FALSE(r->alternatives.empty());
  for (const Alternative& a : r->alternatives) {
    EXPECT_FALSE(a.reason.empty()) << a.change;
    EXPECT_NE(a.change, "same plan");
    if (a.fits) EXPECT_GE(a.slowdown, 0) << a.change << ": " << a.reason;
  }
}

TEST(PlannerTest, TpCrossingTheNvlinkDomainIsNamed) {
  const Job job{*FindBuiltinModel("gpt3-175b"), 256, {}};
  const HardwareView hw = View(256, "A100-SXM4-80GB");
  Plan a, b;
  a.tp = 8;
  a.pp = 8;
  a.dp = 4;
  b = a;
  b.tp = 16;
  b.pp = 4;
  const RankedPlan best{a, *Evaluate(job, hw, a)}, alt{b, *Evaluate(job, hw, b)};
  const std::string why = ExplainLoss(hw, best, alt);
  EXPECT_NE(why.find("TP=16 crosses the 'scale-up' domain (8 GPUs)"), std::string::npos) << why;
  EXPECT_EQ(PlanDiff(a, b), "tp16 pp4");
}

TEST(PlannerTest, NothingFitsIsResourceExhausted) {
  const Job job{*FindBuiltinModel("llama3-405b"), 64, {}};
  Result<PlanSearch> r = Search(job, View(8), SearchOptions{});
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("the smallest needs"), std::string::npos);
}

TEST(PlannerTest, NoValidSplitIsInvalidArgument) {
  Job job{*FindBuiltinModel("llama3-8b"), 0, {}};
  EXPECT_EQ(Search(job, View(64), SearchOptions{}).status().code(), StatusCode::kInvalidArgument);
  job.global_batch = 3;  // no DP size of 64 GPUs divides 3 with TP, PP, CP this model allows
  SearchOptions o;
  o.tp = 1;
  o.pp = 1;
  o.cp = 1;
  EXPECT_EQ(Search(job, View(64), o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace unipool::perf
