#include "core/sched/queues.h"

#include <gtest/gtest.h>

namespace unipool::sched {
namespace {

QueueSpec Q(std::string name, std::string parent, int64_t guarantee, int64_t limit,
            int64_t weight = 1) {
  QueueSpec s;
  s.name = std::move(name);
  s.parent = std::move(parent);
  s.guarantee = Gpus(guarantee);
  s.limit = Gpus(limit);
  s.weight = weight;
  return s;
}

TEST(QueueTreeTest, ChargesWalkUpTheTree) {
  QueueTree t;
  QueueId org = t.Add(Q("org", "", 0, 100)).value();
  QueueId team = t.Add(Q("team", "org", 64, 0)).value();
  QueueId proj = t.Add(Q("proj", "team", 0, 0)).value();
  EXPECT_FALSE(t.is_leaf(team));
  EXPECT_TRUE(t.is_leaf(proj));
  t.Charge(proj, Gpus(40));
  EXPECT_EQ(t.used(org), Gpus(40));
  EXPECT_EQ(t.used(team), Gpus(40));
  EXPECT_TRUE(t.WithinGuarantee(proj, Gpus(24)));  // team's 64 covers it
  EXPECT_FALSE(t.WithinGuarantee(proj, Gpus(25)));
  EXPECT_EQ(t.LimitExceededBy(proj, Gpus(61)), org);
  EXPECT_FALSE(t.LimitExceededBy(proj, Gpus(60)).has_value());
}

TEST(QueueTreeTest, NoGuaranteeMeansBorrowing) {
  QueueTree t;
  QueueId a = t.Add(Q("a", "", 0, 0)).value();
  EXPECT_FALSE(t.Borrowing(a));  // no guarantees anywhere: nobody borrows
  QueueId b = t.Add(Q("b", "", 8, 0)).value();
  EXPECT_TRUE(t.Borrowing(a));  // b's owners may reclaim what a uses
  EXPECT_FALSE(t.Borrowing(b));
  t.Charge(b, Gpus(16));
  EXPECT_TRUE(t.Borrowing(b));
}

// Borrowed: what reclaiming may take while every guarantee on the path
// holds; the tightest guarantee on the path decides.
TEST(QueueTreeTest, BorrowedIsTheLeastExcessOverThePathsGuarantees) {
  QueueTree t;
  ASSERT_TRUE(t.Add(Q("org", "", 64, 0)).ok());
  QueueId team = t.Add(Q("team", "org", 32, 0)).value();
  QueueId other = t.Add(Q("other", "org", 0, 0)).value();
  QueueId free = t.Add(Q("free", "", 0, 0)).value();
  t.Charge(team, Gpus(48));  // team 16 over its 32; org 48 of 64
  EXPECT_EQ(t.Borrowed(team), Gpus(0)) << "org is under its guarantee";
  t.Charge(other, Gpus(24));  // org 72: 8 over
  EXPECT_EQ(t.Borrowed(team), Gpus(8));
  EXPECT_EQ(t.Borrowed(other), Gpus(8));
  t.Charge(free, Gpus(10));
  EXPECT_EQ(t.Borrowed(free), Gpus(10)) << "no guarantee on its path: all of it";
  QueueTree none;
  QueueId x = none.Add(Q("x", "", 0, 0)).value();
  none.Charge(x, Gpus(5));
  EXPECT_EQ(none.Borrowed(x), Gpus(0)) << "no guarantees anywhere: nobody borrows";
}

TEST(QueueTreeTest, ShareKeyPutsQueuesUnderGuaranteeFirst) {
  QueueTree t;
  QueueId a = t.Add(Q("a", "", 100, 0)).value();
  QueueId b = t.Add(Q("b", "", 0, 0, 2)).value();
  t.Charge(a, Gpus(50));
  t.Charge(b, Gpus(10));
  EXPECT_LT(t.ShareKey(a), t.ShareKey(b));  // a is at half its guarantee
  t.Charge(a, Gpus(60));                    // a now over its guarantee: 110/1
  EXPECT_GT(t.ShareKey(a), t.ShareKey(b));  // b: 10/2
}

TEST(QueueTreeTest, RejectsBadSpecs) {
  QueueTree t;
  EXPECT_EQ(t.Add(Q("", "", 0, 0)).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(t.Add(Q("a", "", 0, 0)).ok());
  EXPECT_EQ(t.Add(Q("a", "", 0, 0)).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(t.Add(Q("b", "zz", 0, 0)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.Add(Q("c", "", 10, 5)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Add(Q("d", "", 0, 0, 0)).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace unipool::sched
