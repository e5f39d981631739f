#include "server/records.h"

#include <gtest/gtest.h>

namespace unipool::server {
namespace {

// A queue is stored as the API shows it and reads back the same.
TEST(QueueRecordTest, EveryFieldReadsBack) {
  QueueRecord q;
  q.spec.name = "research";
  q.spec.parent = "org";
  q.spec.guarantee = Gpus(8);
  q.spec.limit = Gpus(24);
  q.spec.weight = 3;
  q.spec.policy = sched::QueuePolicy::kFifo;
  q.spec.order = sched::QueueOrder::kLeastAttained;
  q.spec.grace = Seconds(300);
  const Json j = QueueToJson(q);
  EXPECT_EQ(j["order"], "las");
  Result<sched::QueueSpec> back = QueueSpecFromJson(j, "/queues/research");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->name, "research");
  EXPECT_EQ(back->parent, "org");
  EXPECT_EQ(back->guarantee, Gpus(8));
  EXPECT_EQ(back->limit, Gpus(24));
  EXPECT_EQ(back->weight, 3);
  EXPECT_EQ(back->policy, sched::QueuePolicy::kFifo);
  EXPECT_EQ(back->order, sched::QueueOrder::kLeastAttained);
  EXPECT_EQ(back->grace, Seconds(300));
}

// A record written before queues had an order is first come, first served.
TEST(QueueRecordTest, NoOrderIsSubmissionOrderAndABadOneIsNamed) {
  Result<sched::QueueSpec> old = QueueSpecFromJson(Json{{"name", "a"}}, "/queues/a");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->order, sched::QueueOrder::kSubmission);
  Result<sched::QueueSpec> bad =
      QueueSpecFromJson(Json{{"name", "a"}, {"order", "sjf2"}}, "/queues/a");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "/queues/a.order: expected submission, sjf or las, got 'sjf2'");
}

// Found by the records fuzzer: a policy with a line break in it made a
// two-line error.
TEST(QueueRecordTest, ABadPolicyIsQuotedOnOneLine) {
  Result<sched::QueueSpec> bad =
      QueueSpecFromJson(Json{{"name", "a"}, {"policy", "best-effouar\ntWWWWrt"}}, "/queues/a");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "/queues/a.policy: expected best-effort or fifo, got 'best-effouar\\ntWWWWrt'");
}

}  // namespace
}  // namespace unipool::server
