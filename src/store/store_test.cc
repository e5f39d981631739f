#include "store/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "store/store_test_util.h"

namespace unipool::store {
namespace {

using namespace std::chrono_literals;

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = TempDir(GetParam());
    if (GetParam() == "etcd") etcd_ = EtcdFor("p");  // kept when a test opens it again
    store_ = Open();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<Store> Open(size_t history = 100000) {
    if (GetParam() == "memory") return NewMemoryStore(history);
    if (GetParam() == "etcd") {
      auto s = OpenEtcdStore(etcd_, true, history);
      EXPECT_TRUE(s.ok()) << s.status().message();
      return s.ok() ? std::move(s).value() : NewMemoryStore();
    }
    auto s = OpenSqliteStore(dir_, true, history);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return std::move(s).value();
  }
  std::string dir_;
  EtcdOptions etcd_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, PutGetRangeDelete) {
  ASSERT_EQ(*store_->Commit(Txn().Put("/jobs/1", "a").Put("/jobs/2", "b")), 1);
  ASSERT_EQ(*store_->Commit(Txn().Put("/jobs/1", "c").Put("/nodes/x", "n")), 2);
  auto kv = store_->Get("/jobs/1");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->value, "c");
  EXPECT_EQ(kv->create_revision, 1);
  EXPECT_EQ(kv->mod_revision, 2);
  EXPECT_EQ(store_->Range("/jobs/").size(), 2u);
  auto page = store_->Range("/jobs/", "/jobs/1", 10);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].key, "/jobs/2");
  EXPECT_EQ(store_->Range("/jobs/", "", 1).size(), 1u);
  ASSERT_TRUE(store_->Commit(Txn().Delete("/jobs/2")).ok());
  EXPECT_FALSE(store_->Get("/jobs/2"));
  EXPECT_EQ(store_->revision(), 3);
}

TEST_P(StoreTest, CompareAndSwap) {
  ASSERT_TRUE(store_->Commit(Txn().IfAbsent("/k").Put("/k", "1")).ok());
  Result<int64_t> again = store_->Commit(Txn().IfAbsent("/k").Put("/k", "2"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAborted);
  EXPECT_NE(again.status().message().find("/k"), std::string::npos);
  ASSERT_TRUE(store_->Commit(Txn().IfRevision("/k", 1).Put("/k", "3").Put("/other", "x")).ok());
  EXPECT_FALSE(store_->Commit(Txn().IfRevision("/k", 1).Put("/other", "y")).ok());
  EXPECT_EQ(store_->Get("/other")->value, "x");  // all or nothing
  EXPECT_EQ(store_->Commit(Txn()).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, WatchSeesChangesInOrder) {
  ASSERT_TRUE(store_->Commit(Txn().Put("/jobs/1", "a")).ok());
  std::thread writer([&] {
    std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(store_->Commit(Txn().Put("/nodes/1", "n").Put("/jobs/2", "b")).ok());
    ASSERT_TRUE(store_->Commit(Txn().Delete("/jobs/1")).ok());
  });
  std::vector<Event> seen;
  int64_t since = 1;
  while (seen.size() < 2) {
    auto events = store_->Watch("/jobs/", since, 2s);
    ASSERT_TRUE(events.ok());
    for (const Event& e : *events) {
      seen.push_back(e);
      since = e.kv.mod_revision;
    }
  }
  writer.join();
  EXPECT_EQ(seen[0].kv.key, "/jobs/2");
  EXPECT_EQ(seen[0].type, Event::Type::kPut);
  EXPECT_EQ(seen[1].kv.key, "/jobs/1");
  EXPECT_EQ(seen[1].type, Event::Type::kDelete);
  // Nothing new: returns empty at the timeout.
  auto none = store_->Watch("/jobs/", since, 10ms);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST_P(StoreTest, CompactedHistoryAsksForAList) {
  store_.reset();  // one store per directory at a time
  store_ = Open(/*history=*/2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store_->Commit(Txn().Put("/k", std::to_string(i))).ok());
  auto old = store_->Watch("/", 1, 1ms);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("compacted"), std::string::npos);
  EXPECT_TRUE(store_->Watch("/", 4, 1ms).ok());
}

TEST_P(StoreTest, ManyWritersGroupCommit) {
  std::vector<std::thread> writers;
  for (int w = 0; w < 8; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 100; ++i) {
        ASSERT_TRUE(
            store_->Commit(Txn().Put("/w/" + std::to_string(w) + "/" + std::to_string(i), "v"))
                .ok());
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(store_->Range("/w/").size(), 800u);
  EXPECT_EQ(store_->revision(), 800);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("memory", "sqlite", "etcd"));

TEST(SqliteStoreTest, ReopenKeepsEverything) {
  const std::string dir = TempDir("reopen");
  {
    auto s = OpenSqliteStore(dir, true);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Commit(Txn().Put("/a", std::string("x\0y", 3)).Put("/b", "2")).ok());
    ASSERT_TRUE((*s)->Commit(Txn().Delete("/b").Put("/a", "z")).ok());
  }
  auto s = OpenSqliteStore(dir, true);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->revision(), 2);
  auto a = (*s)->Get("/a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->value, "z");
  EXPECT_EQ(a->create_revision, 1);
  EXPECT_FALSE((*s)->Get("/b"));
  // History before the reopen is gone: a watcher must list again.
  EXPECT_FALSE((*s)->Watch("/", 0, 1ms).ok());
  ASSERT_TRUE((*s)->Commit(Txn().Put("/c", "3")).ok());
  EXPECT_EQ((*s)->revision(), 3);
  s = Result<std::unique_ptr<Store>>(Unavailable("closed"));
  std::filesystem::remove_all(dir);
}

TEST(SqliteStoreTest, OneServerPerDataDirectory) {
  const std::string dir = TempDir("lock");
  auto first = OpenSqliteStore(dir, true);
  ASSERT_TRUE(first.ok());
  auto second = OpenSqliteStore(dir, true);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
  first = Result<std::unique_ptr<Store>>(Unavailable("closed"));
  EXPECT_TRUE(OpenSqliteStore(dir, true).ok());  // free again
  std::filesystem::remove_all(dir);
}

TEST(SqliteStoreTest, BadDirectoryIsAnError) {
  auto s = OpenSqliteStore("/proc/unipool-no-such/dir", true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("data directory"), std::string::npos);
}

}  // namespace
}  // namespace unipool::store
