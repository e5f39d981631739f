#include "core/perf/stack.h"

#include <gtest/gtest.h>

namespace unipool::perf {
namespace {

TEST(StackTest, EveryNamedProfileResolvesAndNamesItself) {
  for (const std::string& name : StackNames()) {
    Result<Framework> f = StackProfile(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_EQ(f->stack, name);
  }
  EXPECT_FALSE(StackProfile("megatron-2021")->flash_attention);
  EXPECT_TRUE(StackProfile("torchtitan-fsdp2")->zero3_node_aggregation);
  EXPECT_TRUE(StackProfile("mcore-2025")->ep_overlap);
  EXPECT_FALSE(StackProfile("nemo-2024")->ep_overlap);
}

TEST(StackTest, AnUnknownProfileListsTheKnownOnes) {
  Result<Framework> f = StackProfile("jax-2030");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("pytorch-fsdp"), std::string::npos);
}

}  // namespace
}  // namespace unipool::perf
