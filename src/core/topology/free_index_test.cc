#include "core/topology/free_index.h"

#include <gtest/gtest.h>

#include "core/topology/test_clusters.h"

namespace unipool {
namespace {

TEST(FreeIndexTest, CountsFollowTakeAndGive) {
  Result<Topology> t = Topology::Build(testing::ThreeTier(192));
  ASSERT_TRUE(t.ok());
  FreeIndex free(*t);
  EXPECT_EQ(free.free_total(), Gpus(192));
  free.Take(NodeId(9), 0b1111);
  EXPECT_EQ(free.free(NodeId(9)), Gpus(4));
  EXPECT_EQ(free.free_mask(NodeId(9)), GpuMask{0xF0});
  EXPECT_EQ(free.free(1, GroupId(4)), Gpus(12));  // node 9 is in rack 4
  EXPECT_EQ(free.free(2, GroupId(1)), Gpus(60));
  EXPECT_EQ(free.free(2, GroupId(0)), Gpus(64));
  EXPECT_EQ(free.free_total(), Gpus(188));
  free.Give(NodeId(9), 0b0101);
  EXPECT_EQ(free.free_mask(NodeId(9)), GpuMask{0xF5});
  EXPECT_EQ(free.free_total(), Gpus(190));
}

TEST(FreeIndexTest, UnevenNodes) {
  Result<Topology> t = Topology::Build(testing::ExplicitTwoRacks());
  ASSERT_TRUE(t.ok());
  FreeIndex free(*t);
  EXPECT_EQ(free.free_mask(NodeId(2)), GpuMask{0xF});
  EXPECT_EQ(free.free(1, GroupId(1)), Gpus(8));
  EXPECT_EQ(AllGpus(kMaxGpusPerNode), ~GpuMask{0});
  EXPECT_EQ(CountGpus(AllGpus(64)), 64);
  EXPECT_EQ(CountGpus(AllGpus(100)), 100);
}

}  // namespace
}  // namespace unipool
