#include "core/perf/model.h"

#include <gtest/gtest.h>

namespace unipool::perf {
namespace {

double Rel(double a, double b) { return std::abs(a / b - 1); }

TEST(ModelTest, GptFlopsMatchMegatronFormula) {
  const ModelSpec m = *FindBuiltinModel("gpt3-175b");
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  const StepFlops f = TrainingFlops(m, B, Recompute::kNone);
  // Narayanan et al. SC'21, eq. (3) without recomputation.
  EXPECT_LT(Rel(f.model, 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))), 1e-12);
  EXPECT_EQ(f.recompute, 0);
  // With full recomputation: 96 B s l h^2 (1 + s/6h + V/16lh).
  const StepFlops full = TrainingFlops(m, B, Recompute::kFull);
  EXPECT_LT(Rel(full.hardware(), 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))),
            1e-12);
  EXPECT_DOUBLE_EQ(full.model, f.model);  // recompute is counted apart
  // Selective: the attention core forward, 4 B s^2 h per layer.
  EXPECT_DOUBLE_EQ(TrainingFlops(m, B, Recompute::kSelective).recompute, 4 * B * s * s * h * l);
}

TEST(ModelTest, PresetParameterCounts) {
  // Llama 3 8B: 32 x (attention 4096 x (2 x 4096 + 2 x 1024) + SwiGLU 3 x 4096 x 14336
  // + norms 2 x 4096) + 2 x 128256 x 4096 + 4096 = 8,030,261,248.
  EXPECT_EQ(CountParams(*FindBuiltinModel("llama3-8b")).total, 8030261248.0);
  EXPECT_NEAR(CountParams(*FindBuiltinModel("llama3-70b")).total / 1e9, 70.55, 0.01);
  EXPECT_NEAR(CountParams(*FindBuiltinModel("llama3-405b")).total / 1e9, 405.85, 0.01);
  EXPECT_NEAR(CountParams(*FindBuiltinModel("gpt3-175b")).total / 1e9, 174.6, 0.1);
  const ParamCounts mix = CountParams(*FindBuiltinModel("mixtral-8x7b"));
  EXPECT_NEAR(mix.total / 1e9, 46.7, 0.1);   // Mixtral paper: 46.7B total
  EXPECT_NEAR(mix.active / 1e9, 12.9, 0.1);  // 12.9B active
  const ParamCounts ds = CountParams(*FindBuiltinModel("deepseek-v3"));
  EXPECT_NEAR(ds.total / 1e9, 671, 5);  // DeepSeek-V3: 671B total, 37B active
  EXPECT_NEAR(ds.active / 1e9, 37, 3);
}

TEST(ModelTest, PresetsAreSortedValidAndFoundIgnoringCase) {
  const auto& all = BuiltinModels();
  ASSERT_GE(all.size(), 6u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(Validate(all[i]).ok()) << all[i].name;
    if (i > 0) EXPECT_LT(all[i - 1].name, all[i].name);
  }
  EXPECT_TRUE(FindBuiltinModel("LLAMA3-405B").has_value());
  EXPECT_FALSE(FindBuiltinModel("llama4").has_value());
}

TEST(ModelTest, ValidateNamesTheField) {
  ModelSpec m = *FindBuiltinModel("llama3-8b");
  m.kv_heads = 6;
  EXPECT_EQ(Validate(m).message().rfind("kvHeads:", 0), 0u) << Validate(m).message();
  m = *FindBuiltinModel("mixtral-8x7b");
  m.moe.top_k = 9;
  EXPECT_EQ(Validate(m).message().rfind("moe.topK:", 0), 0u);
  m = *FindBuiltinModel("llama3-8b");
  m.hidden = 4100;
  EXPECT_EQ(Validate(m).message().rfind("attentionHeads:", 0), 0u);
}

}  // namespace
}  // namespace unipool::perf
