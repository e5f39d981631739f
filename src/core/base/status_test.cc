#include "core/base/status.h"

#include <gtest/gtest.h>

#include "core/base/units.h"

namespace unipool {
namespace {

TEST(StatusTest, OkHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, PlaceIsPrintedWhenKnown) {
  EXPECT_EQ(InvalidArgument("bad", {12, 5}).ToString(), "12:5: bad");
  EXPECT_EQ(InvalidArgument("bad").ToString(), "bad");
  EXPECT_EQ(InvalidArgument("bad").code(), StatusCode::kInvalidArgument);
}

TEST(ResultTest, HoldsValueOrError) {
  Result<int> good = 7;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = NotFound("no such job");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

Status FailsAtSecond(int* steps) {
  UNIPOOL_RETURN_IF_ERROR(Status::Ok());
  ++*steps;
  UNIPOOL_RETURN_IF_ERROR(FailedPrecondition("stop"));
  ++*steps;
  return Status::Ok();
}

TEST(StatusTest, ReturnIfErrorStopsAtFirstError) {
  int steps = 0;
  EXPECT_EQ(FailsAtSecond(&steps).message(), "stop");
  EXPECT_EQ(steps, 1);
}

TEST(UnitsTest, ConversionsAreExact) {
  EXPECT_EQ(Seconds(2).value(), 2000000000);
  EXPECT_EQ(Milliseconds(3) + Microseconds(4), Nanoseconds(3004000));
  EXPECT_EQ(Gbps(400).value(), 400000000000);
  EXPECT_EQ(GiB(1), Bytes(1073741824));
  EXPECT_EQ(Gpus(8) * 4, Gpus(32));
  EXPECT_EQ(Gpus(32) / Gpus(8), 4);
}

}  // namespace
}  // namespace unipool
