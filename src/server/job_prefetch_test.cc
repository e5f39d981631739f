#include "server/job_prefetch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "server/control.h"
#include "store/local_etcd.h"

namespace unipool::server {
namespace {

using namespace std::chrono_literals;

JobRecord Job(int64_t id) {
  JobRecord j;
  j.id = id;
  j.request.name = "train";
  j.request.command = {"true"};
  j.request.gpus = 1;
  j.request.queue = "default";
  return j;
}

bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 3000 && !done(); ++i) std::this_thread::sleep_for(10ms);
  return done();
}

// Records parsed while following are given for the revision they were
// parsed from, once; a changed or deleted job is parsed again or dropped.
TEST(JobPrefetchTest, GivesARecordParsedFromTheStoresRevisionOnce) {
  ASSERT_TRUE(JobFromJson(JobToJson(Job(1))).ok())
      << JobFromJson(JobToJson(Job(1))).status().message();
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("prefetch-" + std::to_string(getpid()))).string();
  auto etcd = store::LocalEtcd::Start(dir, 1);
  ASSERT_TRUE(etcd.ok()) << etcd.status().message();
  store::EtcdOptions o;
  o.endpoints = (*etcd)->endpoints();
  o.prefix = "/prefetch";
  {
    auto s = store::OpenEtcdStore(o, true);
    ASSERT_TRUE(s.ok()) << s.status().message();
    store::Store& st = **s;
    ASSERT_TRUE(st.Commit(store::Txn()
                              .Put(JobKey(1), JobToJson(Job(1)).dump())
                              .Put(JobKey(2), JobToJson(Job(2)).dump())
                              .Put(NodeKey("n0"), "{}"))
                    .ok());
    store::EtcdMirror mirror(o);
    JobPrefetch prefetch;
    prefetch.Follow(mirror);
    ASSERT_TRUE(Eventually([&] { return prefetch.size() == 2; }));
    const store::KeyValue one = *st.Get(JobKey(1));
    ASSERT_TRUE(
        st.Commit(store::Txn().Put(JobKey(1), JobToJson(Job(1)).dump()).Delete(JobKey(2))).ok());
    ASSERT_TRUE(Eventually([&] { return prefetch.size() == 1 && !prefetch.Take(one); }));
    std::optional<JobRecord> now = prefetch.Take(*st.Get(JobKey(1)));
    ASSERT_TRUE(now);
    EXPECT_EQ(now->id, 1);
    EXPECT_FALSE(prefetch.Take(*st.Get(JobKey(1)))) << "given once";
  }
  etcd->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unipool::server
