#include "store/history.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/store_test_util.h"

namespace unipool::store {
namespace {

ArchivedJob Job(int64_t id, int64_t finished, std::string queue, std::string state) {
  return ArchivedJob{
      id,  finished, std::move(queue), std::move(state), "{\"id\":" + std::to_string(id) + "}",
      "[]"};
}

class HistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("history");
    std::filesystem::create_directories(dir_);
    auto h = History::Open(dir_ + "/history.db");
    ASSERT_TRUE(h.ok()) << h.status().message();
    h_ = std::move(h).value();
  }
  void TearDown() override {
    h_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::vector<int64_t> Ids(const HistoryQuery& q) {
    std::vector<int64_t> ids;
    auto l = h_->List(q);
    EXPECT_TRUE(l.ok()) << l.status().message();
    if (l.ok())
      for (const ArchivedJob& j : *l) ids.push_back(j.id);
    return ids;
  }
  std::string dir_;
  std::unique_ptr<History> h_;
};

TEST_F(HistoryTest, PutIsIdempotentAndSurvivesReopening) {
  ASSERT_TRUE(h_->Put({Job(1, 100, "a", "Succeeded"), Job(2, 200, "b", "Failed")}).ok());
  ArchivedJob partial = Job(2, 200, "b", "Failed");
  partial.events = "";  // archived again after a crash, its events deleted by then
  ASSERT_TRUE(h_->Put({partial}).ok());
  EXPECT_EQ(*h_->Count(), 2);
  h_.reset();
  auto again = History::Open(dir_ + "/history.db");
  ASSERT_TRUE(again.ok());
  auto j = (*again)->Get(2);
  ASSERT_TRUE(j.ok() && j->has_value());
  EXPECT_EQ((*j)->queue, "b");
  EXPECT_EQ((*j)->state, "Failed");
  EXPECT_EQ((*j)->record, "{\"id\":2}");
  EXPECT_EQ((*j)->events, "[]");
  ArchivedJob more = Job(2, 200, "b", "Failed");
  more.events = "[{},{}]";  // gained an event while it was archived
  ASSERT_TRUE((*again)->Put({more}).ok());
  EXPECT_EQ((*(*again)->Get(2))->events, "[{},{}]");
  auto none = (*again)->Get(3);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(HistoryTest, ListFiltersPagesNewestFirst) {
  std::vector<ArchivedJob> jobs;
  for (int64_t id = 1; id <= 10; ++id) {
    jobs.push_back(Job(id, id * 100, id % 2 ? "odd" : "even", id <= 5 ? "Succeeded" : "Failed"));
  }
  ASSERT_TRUE(h_->Put(jobs).ok());
  EXPECT_EQ(Ids({.limit = 3}), (std::vector<int64_t>{10, 9, 8}));
  EXPECT_EQ(Ids({.before = 8, .limit = 3}), (std::vector<int64_t>{7, 6, 5}));
  EXPECT_EQ(Ids({.finished_since = 800}), (std::vector<int64_t>{10, 9, 8}));
  EXPECT_EQ(Ids({.queue = "odd", .state = "Succeeded"}), (std::vector<int64_t>{5, 3, 1}));
}

TEST_F(HistoryTest, AFileThatIsNotAHistoryIsRefusedWithItsName) {
  const std::string bad = dir_ + "/not-history.db";
  std::ofstream(bad) << "this is not a database at all, just some text that is long enough";
  auto h = History::Open(bad);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find(bad), std::string::npos) << h.status().message();
  EXPECT_NE(h.status().message().find("not a unipool history"), std::string::npos)
      << h.status().message();
}

TEST_F(HistoryTest, ADirectoryThatDoesNotExistIsAnError) {
  auto h = History::Open(dir_ + "/no/such/dir/history.db");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("cannot open"), std::string::npos) << h.status().message();
}

}  // namespace
}  // namespace unipool::store
