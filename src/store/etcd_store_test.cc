// What only the etcd backend has: several stores on one etcd, prefixes,
// etcd going away and coming back, etcd's limits. The Store contract itself
// is tested on every backend in store_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "store/etcd_client.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace unipool::store {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Store> MustOpen(const EtcdOptions& o) {
  auto s = OpenEtcdStore(o, true);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(EtcdStoreTest, ReopenKeepsEverythingWithItsRevisions) {
  const EtcdOptions o = EtcdFor("reopen");
  {
    auto s = MustOpen(o);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Commit(Txn().Put("/a", std::string("x\0y\xff", 4)).Put("/b", "2")).ok());
    ASSERT_TRUE(s->Commit(Txn().Delete("/b").Put("/a", "z")).ok());
    ASSERT_TRUE(s->Commit(Txn().Put("/c", "")).ok());
  }
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->revision(), 3);
  auto a = s->Get("/a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->value, "z");
  EXPECT_EQ(a->create_revision, 1);
  EXPECT_EQ(a->mod_revision, 2);
  EXPECT_FALSE(s->Get("/b"));
  ASSERT_TRUE(s->Get("/c"));
  EXPECT_EQ(s->Get("/c")->value, "");
  EXPECT_FALSE(s->Watch("/", 0, 1ms).ok()) << "history before the reopen is gone";
  ASSERT_EQ(*s->Commit(Txn().Put("/d", "4")), 4);
}

// A prefix and a longer one that starts with it never see each other's keys.
TEST(EtcdStoreTest, ClustersSharingAnEtcdKeepToTheirPrefixes) {
  EtcdOptions a = EtcdFor("share"), b = a;
  b.prefix = a.prefix + "-b";
  auto sa = MustOpen(a), sb = MustOpen(b);
  ASSERT_TRUE(sa && sb);
  ASSERT_TRUE(sa->Commit(Txn().Put("/jobs/1", "a")).ok());
  ASSERT_TRUE(sb->Commit(Txn().Put("/jobs/1", "b")).ok());
  sa.reset();
  sb.reset();
  auto again = MustOpen(a);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->Range("/").size(), 1u);
  EXPECT_EQ(again->Get("/jobs/1")->value, "a");
}

// Two servers pointed at one prefix: the second to write wins the prefix,
// the first is refused (not interleaved) and says why.
TEST(EtcdStoreTest, ASecondWriterOnAPrefixIsRefused) {
  const EtcdOptions o = EtcdFor("two");
  auto first = MustOpen(o);
  ASSERT_TRUE(first);
  ASSERT_TRUE(first->Commit(Txn().Put("/k", "1")).ok());
  auto second = MustOpen(o);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->Get("/k")->value, "1");
  ASSERT_TRUE(second->Commit(Txn().Put("/k", "2")).ok());
  Result<int64_t> late = first->Commit(Txn().Put("/k", "3"));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(late.status().message().find("another unipool server writes"), std::string::npos)
      << late.status().message();
  for (int i = 0; i < 300 && first->Get("/k")->value != "2"; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(first->Get("/k")->value, "2") << "it reads the prefix again";
  EXPECT_NE(first->Writable().message().find("read-only"), std::string::npos)
      << first->Writable().message();
  EXPECT_EQ(second->Get("/k")->value, "2");
}

TEST(EtcdStoreTest, KeysNotWrittenByUnipoolAreRefused) {
  const EtcdOptions o = EtcdFor("foreign");
  EtcdClient c(o);
  ASSERT_TRUE(c.Call("kv/put", {{"key", EtcdClient::Base64(o.prefix + "/jobs/1")},
                                {"value", EtcdClient::Base64("{}")}})
                  .ok());
  auto s = OpenEtcdStore(o, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/jobs/1 was not written by unipool"), std::string::npos)
      << s.status().message();
}

TEST(EtcdStoreTest, BadOptionsAreErrors) {
  EtcdOptions o = EtcdFor("bad");
  o.prefix = "/unipool/";
  EXPECT_NE(OpenEtcdStore(o, true).status().message().find("without a trailing '/'"),
            std::string::npos);
  o.endpoints.clear();
  EXPECT_NE(OpenEtcdStore(o, true).status().message().find("no endpoints"), std::string::npos);
}

// Flushes larger than etcd takes in one transaction go in several, each
// at a transaction's boundary.
TEST(EtcdStoreTest, LargeBatchesAreSplitWithinEtcdsLimits) {
  EtcdOptions o = EtcdFor("split");
  o.max_txn_ops = 8;
  {
    auto s = MustOpen(o);
    ASSERT_TRUE(s);
    std::vector<std::thread> writers;
    for (int w = 0; w < 4; ++w) {
      writers.emplace_back([&, w] {
        for (int i = 0; i < 50; ++i) {
          const std::string k = "/w/" + std::to_string(w) + "/" + std::to_string(i);
          ASSERT_TRUE(s->Commit(Txn().Put(k, "v").Put(k + "/x", "y")).ok());
        }
      });
    }
    for (auto& t : writers) t.join();
    Result<int64_t> big = s->Apply(Txn()
                                       .Put("/1", "")
                                       .Put("/2", "")
                                       .Put("/3", "")
                                       .Put("/4", "")
                                       .Put("/5", "")
                                       .Put("/6", "")
                                       .Put("/7", "")
                                       .Put("/8", ""));
    ASSERT_FALSE(big.ok());
    EXPECT_NE(big.status().message().find("--max-txn-ops"), std::string::npos);
  }
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->Range("/w/").size(), 400u);
  EXPECT_EQ(s->revision(), 200);
}

TEST(EtcdStoreTest, AnEndpointThatIsDownIsSkipped) {
  EtcdOptions o = EtcdFor("skip");
  o.endpoints.insert(o.endpoints.begin(), "http://127.0.0.1:1");
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Commit(Txn().Put("/k", "v")).ok());
}

// etcd down: writes fail and are undone, the store is read-only and says
// why; etcd back: writes resume by themselves, nothing durable was lost.
TEST(EtcdStoreTest, WritesResumeWhenEtcdComesBack) {
  const std::string dir = TempDir("etcd-down");
  auto etcd = LocalEtcd::Start(dir, 1);
  ASSERT_TRUE(etcd.ok()) << etcd.status().message();
  EtcdOptions o;
  o.endpoints = (*etcd)->endpoints();
  o.prefix = "/down";
  o.timeout = 1000ms;
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Commit(Txn().Put("/kept", "1")).ok());
  (*etcd)->Kill(0);
  Result<int64_t> lost = s->Commit(Txn().Put("/lost", "2"));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(lost.status().message().find("cannot reach etcd"), std::string::npos)
      << lost.status().message();
  EXPECT_FALSE(s->Get("/lost")) << "undone: memory shows what etcd holds";
  EXPECT_FALSE(s->Writable().ok());
  ASSERT_TRUE((*etcd)->Restart(0).ok());
  ASSERT_TRUE((*etcd)->WaitForLeader(30).ok());
  for (int i = 0; i < 1000 && !s->Writable().ok(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(s->Writable().ok()) << s->Writable().message();
  ASSERT_TRUE(s->Commit(Txn().Put("/after", "3")).ok());
  s.reset();
  auto again = MustOpen(o);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->Get("/kept"));
  EXPECT_FALSE(again->Get("/lost"));
  EXPECT_TRUE(again->Get("/after"));
  again.reset();
  etcd->reset();
  std::filesystem::remove_all(dir);
}

// etcd past its quota (alarm NOSPACE): the store is read-only and says so
// in one line, with what to do; nothing is lost, nothing crashes.
TEST(EtcdStoreTest, OutOfSpaceIsReadOnlyWithTheCause) {
  const std::string dir = TempDir("etcd-nospace");
  auto etcd =
      LocalEtcd::Start(dir, 1, "etcd", {"--quota-backend-bytes=" + std::to_string(4 << 20)});
  ASSERT_TRUE(etcd.ok()) << etcd.status().message();
  EtcdOptions o;
  o.endpoints = (*etcd)->endpoints();
  o.prefix = "/full";
  auto s = MustOpen(o);
  ASSERT_TRUE(s);
  const std::string big(256 << 10, 'x');
  Status failed;
  int acknowledged = 0;
  for (int i = 0; i < 100 && failed.ok(); ++i) {
    Result<int64_t> r = s->Commit(Txn().Put("/big/" + std::to_string(i), big));
    if (r.ok()) {
      ++acknowledged;
    } else {
      failed = r.status();
    }
  }
  ASSERT_FALSE(failed.ok()) << "a 4 MiB quota never filled";
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable);
  EXPECT_NE(failed.message().find("out of space (alarm NOSPACE)"), std::string::npos)
      << failed.message();
  EXPECT_EQ(failed.message().find('\n'), std::string::npos) << "one line";
  EXPECT_FALSE(s->Writable().ok());
  s.reset();
  auto again = MustOpen(o);  // what was acknowledged is there
  ASSERT_TRUE(again);
  EXPECT_EQ(again->Range("/big/").size(), static_cast<size_t>(acknowledged));
  again.reset();
  etcd->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unipool::store
