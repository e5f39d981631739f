#include "store/etcd_maintenance.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>

#include "store/local_etcd.h"
#include "store/store_test_util.h"

namespace unipool::store {
namespace {

using namespace std::chrono_literals;
using Json = EtcdClient::Json;

// 20 revisions of a 512 KiB value: about 10 MiB of file, of which one
// revision is live once compacted.
void Bloat(const EtcdClient& c, const std::string& key) {
  const std::string value(512 << 10, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        c.Call("kv/put", {{"key", EtcdClient::Base64(key)}, {"value", EtcdClient::Base64(value)}})
            .ok());
  }
}

MaintenanceOptions Small() {
  MaintenanceOptions m;
  m.defrag_min_bytes = 4 << 20;
  return m;
}

// Three etcd members on loopback, removed after each test.
class EtcdMaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("maintenance");
    auto etcd = LocalEtcd::Start(dir_, 3);
    ASSERT_TRUE(etcd.ok()) << etcd.status().message();
    etcd_ = std::move(etcd).value();
    options_.endpoints = etcd_->endpoints();
  }
  void TearDown() override {
    etcd_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<LocalEtcd> etcd_;
  EtcdOptions options_;
};

TEST_F(EtcdMaintenanceTest, CompactsToThePreviousRoundAndDefragmentsOneMemberAtATime) {
  const EtcdOptions& o = options_;
  EtcdClient client(o);
  Bloat(client, "/big");
  EtcdMaintenance m(o, Small());

  MaintenanceRound first = m.RunOnce();
  ASSERT_TRUE(first.status.ok()) << first.status.message();
  EXPECT_EQ(first.compacted_to, 0) << "the first round only notes the revision";
  ASSERT_EQ(first.members.size(), 3u);
  for (const MemberStatus& s : first.members) EXPECT_GT(s.db_size, 8 << 20) << s.endpoint;

  // The second round compacts what the first saw: old revisions are gone.
  MaintenanceRound second = m.RunOnce();
  ASSERT_TRUE(second.status.ok()) << second.status.message();
  EXPECT_EQ(second.compacted_to, first.revision);
  Result<Json> old = EtcdClient(o).Call(
      "kv/range", {{"key", EtcdClient::Base64("/big")}, {"revision", first.revision - 5}});
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("compacted"), std::string::npos) << old.status().message();

  // Each round defragments one member, until none is mostly free space.
  std::set<std::string> done;
  int rounds = 0;
  for (MaintenanceRound r = second; !r.defragmented.empty() || done.empty(); r = m.RunOnce()) {
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    if (r.defragmented.empty()) {
      std::string sizes;
      for (const MemberStatus& s : r.members) {
        sizes += " " + std::to_string(s.db_size) + "/" + std::to_string(s.db_size_in_use);
      }
      ASSERT_LT(++rounds, 50) << "no member was ever defragmented; size/in use:" << sizes;
      // etcd counts compacted pages free once later writes have committed.
      ASSERT_TRUE(client
                      .Call("kv/put", {{"key", EtcdClient::Base64("/small")},
                                       {"value", EtcdClient::Base64("x")}})
                      .ok());
      std::this_thread::sleep_for(100ms);
      continue;
    }
    EXPECT_TRUE(done.insert(r.defragmented).second) << r.defragmented << " twice";
    for (const MemberStatus& s : r.members) {
      if (s.endpoint == r.defragmented) {
        EXPECT_LT(s.db_size, 4 << 20) << "its file shrank";
      }
    }
  }
  EXPECT_EQ(done.size(), 3u);
  // The data is all there.
  Result<Json> now = client.Call("kv/range", {{"key", EtcdClient::Base64("/big")}});
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->value("kvs", Json::array()).size(), 1u);
}

// A member that is down is reported and skipped; the others are served.
TEST_F(EtcdMaintenanceTest, AMemberThatIsDownIsReported) {
  EtcdOptions& o = options_;
  o.timeout = 1000ms;
  etcd_->Kill(2);
  ASSERT_TRUE(etcd_->WaitForLeader(30).ok());  // (it may have led)
  EtcdMaintenance m(o, Small());
  MaintenanceRound r = m.RunOnce();
  ASSERT_EQ(r.members.size(), 3u);
  EXPECT_TRUE(r.members[0].ok && r.members[1].ok);
  EXPECT_FALSE(r.members[2].ok);
  EXPECT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find(o.endpoints[2]), std::string::npos) << r.status.message();
}

}  // namespace
}  // namespace unipool::store
