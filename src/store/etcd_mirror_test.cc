#include "store/etcd_mirror.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "store/local_etcd.h"
#include "store/store_test_util.h"

namespace unipool::store {
namespace {

using namespace std::chrono_literals;
using Json = EtcdClient::Json;

// #meta's etcd mod revision now: what a new leader compares the mirror with.
int64_t MetaMod(const EtcdOptions& o) {
  EtcdClient c(o);
  Result<Json> r = c.Call("kv/range", {{"key", EtcdClient::Base64(o.prefix + kEtcdMetaKey)}});
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || r->value("kvs", Json::array()).empty()) return 0;
  return EtcdClient::Int(r->value("kvs", Json::array()).front(), "mod_revision");
}

// Waits up to 30 s for the mirror to reach #meta's mod revision `mod`.
bool Reaches(const EtcdMirror& m, int64_t mod) {
  for (int i = 0; i < 3000 && m.stats().meta_mod < mod; ++i) std::this_thread::sleep_for(10ms);
  return m.stats().meta_mod == mod;
}

void ExpectSameKeys(Store& want, const KvMap& got) {
  const std::vector<KeyValue> all = want.Range("/", "", 0);
  ASSERT_EQ(all.size(), got.size());
  for (const KeyValue& kv : all) {
    auto it = got.find(kv.key);
    ASSERT_NE(it, got.end()) << kv.key;
    EXPECT_EQ(it->second.value, kv.value) << kv.key;
    EXPECT_EQ(it->second.create_revision, kv.create_revision) << kv.key;
    EXPECT_EQ(it->second.mod_revision, kv.mod_revision) << kv.key;
  }
}

// Commits `txn`, again while the store fails (kUnavailable, or
// kDeadlineExceeded while a new etcd leader is elected) for up to 30 s.
bool CommitSoon(Store& s, const Txn& txn) {
  for (int i = 0; i < 300; ++i) {
    Result<int64_t> r = s.Commit(txn);
    if (r.ok()) return true;
    if (!IsFailure(r.status())) return false;  // unavailable, or in doubt while etcd elects
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

std::unique_ptr<Store> MustOpen(const EtcdOptions& o, bool create, EtcdMirror* warm = nullptr) {
  auto s = OpenEtcdStore(o, create, 1000, warm);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

// What was there before the mirror started, and what came after, puts and
// deletes, with the store's own revisions.
TEST(EtcdMirrorTest, FollowsPutsAndDeletes) {
  const EtcdOptions o = EtcdFor("follow");
  auto s = MustOpen(o, true);
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Commit(Txn().Put("/a", "1").Put("/b", std::string("x\0\xff", 3))).ok());
  EtcdMirror m(o);
  ASSERT_TRUE(s->Commit(Txn().Put("/a", "2").Delete("/b").Put("/c", "3")).ok());
  for (int i = 0; i < 50; ++i)
    ASSERT_TRUE(s->Commit(Txn().Put("/n/" + std::to_string(i), "v")).ok());
  ASSERT_TRUE(s->Commit(Txn().Delete("/n/7")).ok());
  ASSERT_TRUE(Reaches(m, MetaMod(o)));
  EXPECT_EQ(m.stats().lists, 1);
  std::optional<EtcdSnapshot> copy = m.Take(MetaMod(o), 1s);
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->revision, s->revision());
  ExpectSameKeys(*s, copy->kvs);
  EXPECT_FALSE(m.Take(MetaMod(o), 0ms)) << "one takeover per mirror";
}

// The new leader starts from the mirror, and writes on from there.
TEST(EtcdMirrorTest, ATakeoverOpensFromTheMirror) {
  const EtcdOptions o = EtcdFor("takeover");
  auto old = MustOpen(o, true);
  ASSERT_TRUE(old);
  EtcdMirror m(o);
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(old->Commit(Txn().Put("/j/" + std::to_string(i), "r")).ok());
  const int64_t revision = old->revision();
  auto next = MustOpen(o, false, &m);
  ASSERT_TRUE(next);
  EXPECT_TRUE(m.stats().taken);
  EXPECT_EQ(next->revision(), revision);
  ExpectSameKeys(*old, [&] {
    KvMap kvs;
    for (KeyValue& kv : next->Range("/", "", 0)) kvs.emplace(kv.key, kv);
    return kvs;
  }());
  ASSERT_TRUE(next->Commit(Txn().Put("/j/new", "x")).ok());
}

// A mirror that never got a copy (its etcd was unreachable) is passed
// over: the store reads etcd itself.
TEST(EtcdMirrorTest, AMirrorWithoutACopyIsPassedOver) {
  const EtcdOptions o = EtcdFor("cold");
  auto old = MustOpen(o, true);
  ASSERT_TRUE(old);
  ASSERT_TRUE(old->Commit(Txn().Put("/k", "v")).ok());
  EtcdOptions nowhere = o;
  nowhere.endpoints = {"http://127.0.0.1:" + std::to_string(FreeLoopbackPort())};
  nowhere.timeout = 200ms;
  EtcdMirror m(nowhere);
  auto next = MustOpen(o, false, &m);
  ASSERT_TRUE(next);
  EXPECT_FALSE(m.stats().taken);
  ASSERT_TRUE(next->Get("/k"));
  EXPECT_EQ(next->Get("/k")->value, "v");
}

// The mirror's member is down while the store writes on and etcd compacts
// its history: back, the watch cannot resume (compacted), so the mirror
// lists again and is whole.
TEST(EtcdMirrorTest, ListsAgainAfterACompactionItMissed) {
  const std::string dir = TempDir("mirror-compaction");
  auto etcd = LocalEtcd::Start(dir, 3);
  ASSERT_TRUE(etcd.ok()) << etcd.status().message();
  EtcdOptions o;
  o.endpoints = (*etcd)->endpoints();
  o.prefix = "/mirror";
  o.timeout = 1000ms;
  EtcdOptions first = o;
  first.endpoints = {o.endpoints[0]};
  EtcdOptions others = o;
  others.endpoints = {o.endpoints[1], o.endpoints[2]};
  {
    auto s = MustOpen(others, true);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->Commit(Txn().Put("/a", "1").Put("/b", "2")).ok());
    EtcdMirror m(first);
    ASSERT_TRUE(Reaches(m, MetaMod(others)));
    (*etcd)->Kill(0);
    ASSERT_TRUE((*etcd)->WaitForLeader(30).ok());
    ASSERT_TRUE(CommitSoon(*s, Txn().Delete("/a").Put("/c", "3")));  // (etcd may elect anew)
    ASSERT_TRUE(CommitSoon(*s, Txn().Put("/b", "4")));
    EtcdClient c(others);
    Result<Json> head = c.Call("kv/range", {{"key", EtcdClient::Base64("/")}});
    ASSERT_TRUE(head.ok());
    const int64_t now = EtcdClient::Int(head->value("header", Json::object()), "revision");
    Result<Json> compacted = c.Call("kv/compaction", {{"revision", now}, {"physical", true}});
    ASSERT_TRUE(compacted.ok()) << compacted.status().message();
    ASSERT_TRUE((*etcd)->Restart(0).ok());
    ASSERT_TRUE(Reaches(m, MetaMod(others)));
    EXPECT_EQ(m.stats().lists, 2);
    std::optional<EtcdSnapshot> copy = m.Take(MetaMod(others), 1s);
    ASSERT_TRUE(copy);
    ExpectSameKeys(*s, copy->kvs);
  }
  etcd->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unipool::store
