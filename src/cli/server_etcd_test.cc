// The server on etcd (--store etcd), end to end: what it acknowledges
// survives kill -9, one etcd member down changes nothing, a lost quorum
// makes it read-only with the cause, and it resumes by itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "cli/server_test_util.h"
#include "store/local_etcd.h"

namespace unipool::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class ServerEtcdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("unipool-etcd-e2e-" + std::to_string(getpid()))).string();
    etcd_ = StartEtcd(dir_, 3, &endpoints_);
    ASSERT_TRUE(etcd_);
    StartServer({});
  }
  void StartServer(std::vector<std::string> more) {
    std::vector<std::string> args = {"--store",  "etcd",          "--etcd-endpoints",
                                     endpoints_, "--etcd-prefix", "/e2e"};
    args.insert(args.end(), more.begin(), more.end());
    server_.reset();
    server_ = std::make_unique<TestServer>(TestServer::Options{.extra_args = args});
    server_->Start();
  }
  void TearDown() override {
    server_.reset();
    etcd_.reset();
    fs::remove_all(dir_);
  }
  int64_t Submit(const std::string& name) {
    HttpReply r = server_->Call("POST", "/v1/jobs", "tenant-a", SleepJob(name), "application/yaml");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
  }

  std::string dir_, endpoints_;
  std::unique_ptr<store::LocalEtcd> etcd_;
  std::unique_ptr<TestServer> server_;
};

TEST_F(ServerEtcdTest, AcknowledgedJobsSurviveKillNineAndIdsAreNeverReused) {
  std::set<int64_t> acknowledged;
  for (int i = 0; i < 30; ++i) acknowledged.insert(Submit("j" + std::to_string(i)));
  server_->Kill9();
  server_->Start();
  EXPECT_EQ(JobIds(*server_), acknowledged);
  EXPECT_GT(Submit("after"), *acknowledged.rbegin());
}

// The member the server talks to dies: the next one answers, nobody sees it.
TEST_F(ServerEtcdTest, OneEtcdMemberDownInterruptsNothing) {
  std::set<int64_t> acknowledged;
  for (int i = 0; i < 5; ++i) acknowledged.insert(Submit("a" + std::to_string(i)));
  etcd_->Kill(0);
  for (int i = 0; i < 20; ++i) acknowledged.insert(Submit("b" + std::to_string(i)));
  EXPECT_EQ(server_->Call("GET", "/readyz", "").status, 200);
  EXPECT_EQ(JobIds(*server_), acknowledged);
  ASSERT_TRUE(etcd_->Restart(0).ok());
}

// The leader keeps etcd small by itself: rounds of compaction (and of
// defragmentation when a member's file is mostly free), with each member's
// size in /metrics.
TEST_F(ServerEtcdTest, TheLeaderCompactsEtcdOnASchedule) {
  StartServer({"--etcd-maintenance", "1s"});
  for (int i = 0; i < 5; ++i) Submit("m" + std::to_string(i));
  std::string metrics;
  for (int i = 0; i < 300; ++i) {
    metrics = server_->Call("GET", "/metrics", "admin").body;
    if (metrics.find("unipool_etcd_compactions_total 0") == std::string::npos &&
        metrics.find("unipool_etcd_compactions_total") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(metrics.find("unipool_etcd_compactions_total 0"), std::string::npos) << metrics;
  for (const std::string& e : {etcd_->endpoints()[0], etcd_->endpoints()[2]}) {
    EXPECT_NE(metrics.find("unipool_etcd_db_size_bytes{endpoint=\"" + e + "\"}"), std::string::npos)
        << metrics;
  }
  EXPECT_NE(metrics.find("unipool_etcd_db_size_in_use_bytes{"), std::string::npos);
  EXPECT_EQ(metrics.find("unipool_etcd_maintenance_failures_total 1"), std::string::npos)
      << metrics;
}

// The write sent while the quorum is lost is refused (503: it is not
// there) or in doubt (504: etcd took it, raft may commit it when the
// quorum is back). Either way, once writes resume, what the server shows
// is what etcd holds: the same jobs before and after a restart.
TEST_F(ServerEtcdTest, LostQuorumIsReadOnlyWithTheCauseAndResumesByItself) {
  std::set<int64_t> acknowledged = {Submit("before")};
  etcd_->Kill(1);
  etcd_->Kill(2);
  HttpReply w = server_->Call("POST", "/v1/jobs", "tenant-a", SleepJob("lost"), "application/yaml");
  ASSERT_TRUE(w.status == 503 || w.status == 504) << w.status << " " << w.body;
  RecordProperty("lost_write_status", w.status);
  EXPECT_NE(w.body.find("etcd"), std::string::npos) << w.body;
  if (w.status == 504) {
    EXPECT_NE(w.body.find("may still land"), std::string::npos) << w.body;
  }
  EXPECT_EQ(server_->Call("GET", "/readyz", "").status, 503);
  EXPECT_EQ(JobIds(*server_), acknowledged) << "reads are served, the unwritten job is not there";
  ASSERT_TRUE(etcd_->Restart(1).ok());
  ASSERT_TRUE(etcd_->Restart(2).ok());
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = server_->Call("GET", "/readyz", "").status == 200;
    if (!ready) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(ready) << "did not resume writes";
  acknowledged.insert(Submit("after"));
  const std::set<int64_t> shown = JobIds(*server_);
  for (int64_t id : acknowledged) EXPECT_EQ(shown.count(id), 1u) << "job " << id;
  if (w.status == 503) {
    EXPECT_EQ(shown, acknowledged) << "a refused write never lands";
  }
  EXPECT_LE(shown.size(), acknowledged.size() + 1);
  server_->Stop();
  server_->Start();
  EXPECT_EQ(JobIds(*server_), shown) << "the server showed what etcd holds";
}

}  // namespace
}  // namespace unipool::testing
