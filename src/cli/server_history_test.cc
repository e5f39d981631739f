// The history end to end: jobs that ended --history-retention ago leave
// the store for the history file and are still there for `get`, `describe`,
// `get jobs --since`, paging and tenants' scopes, after a kill -9 too; ids
// are never given again.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using namespace std::chrono_literals;

std::vector<int64_t> Ids(TestServer& s, const std::string& query, const std::string& who) {
  HttpReply r = s.Call("GET", "/v1/jobs" + query, who);
  EXPECT_EQ(r.status, 200) << query << ": " << r.body;
  std::vector<int64_t> ids;
  if (r.status != 200) return ids;
  const nlohmann::json body = r.json();
  for (const auto& j : body["items"]) ids.push_back(j["id"].get<int64_t>());
  return ids;
}

// Waits until `n` jobs were archived.
void WaitArchived(TestServer& s, int n) {
  const std::string want = "unipool_jobs_archived_total " + std::to_string(n);
  std::string m;
  for (int i = 0; i < 300 && m.find(want) == std::string::npos; ++i) {
    std::this_thread::sleep_for(100ms);
    m = s.Call("GET", "/metrics", "admin").body;
  }
  ASSERT_NE(m.find(want), std::string::npos) << m;
}

TEST(ServerHistoryTest, EndedJobsMoveToTheHistoryAndStayReadable) {
  TestServer s(TestServer::Options{.extra_args = {"--history-retention", "1s"}});
  s.Start();
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    HttpReply r = s.Call("POST", "/v1/jobs", "tenant-a", SleepJob("h" + std::to_string(i)),
                         "application/yaml");
    ASSERT_EQ(r.status, 201) << r.body;
    ids.push_back(r.json()["id"].get<int64_t>());
  }
  for (int k : {0, 1, 2}) {
    ASSERT_EQ(s.Call("POST", "/v1/jobs/" + std::to_string(ids[k]) + "/cancel", "admin").status,
              200);
  }
  WaitArchived(s, 3);

  // One job, its events and why it ended, from the history.
  HttpReply one = s.Call("GET", "/v1/jobs/" + std::to_string(ids[0]), "tenant-a");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.json()["state"], "Cancelled");
  HttpReply events = s.Call("GET", "/v1/jobs/" + std::to_string(ids[0]) + "/events", "tenant-a");
  ASSERT_EQ(events.status, 200) << events.body;
  EXPECT_NE(events.body.find("Cancelled"), std::string::npos) << events.body;
  EXPECT_EQ(s.Call("GET", "/v1/jobs/" + std::to_string(ids[0]), "tenant-b").status, 404)
      << "another tenant's archived job is not there for it";

  // Listing merges the live job and the archived ones, newest first, in pages.
  const std::vector<int64_t> all = {ids[3], ids[2], ids[1], ids[0]};
  EXPECT_EQ(Ids(s, "", "admin"), all);
  EXPECT_EQ(Ids(s, "?limit=2", "admin"), (std::vector<int64_t>{ids[3], ids[2]}));
  EXPECT_EQ(Ids(s, "?limit=2&continue=" + std::to_string(ids[2]), "admin"),
            (std::vector<int64_t>{ids[1], ids[0]}));
  EXPECT_EQ(Ids(s, "?state=Cancelled", "admin"), (std::vector<int64_t>{ids[2], ids[1], ids[0]}));
  EXPECT_EQ(Ids(s, "?since=1h", "admin"), all);
  EXPECT_EQ(Ids(s, "?since=2261-01-01T00:00:00.000Z", "admin"), (std::vector<int64_t>{ids[3]}))
      << "only what has not ended";
  EXPECT_TRUE(Ids(s, "", "tenant-b").empty());
  EXPECT_EQ(s.Call("GET", "/v1/jobs?since=yesterday", "admin").status, 400);

  // The CLI's --since, and describe of an archived job.
  s.UseCli("admin");
  RunResult get = RunUnipool({"get", "jobs", "--since", "7d"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("Cancelled"), std::string::npos) << get.out;
  RunResult describe = RunUnipool({"describe", "job", std::to_string(ids[1])});
  EXPECT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_NE(describe.out.find("Cancelled"), std::string::npos) << describe.out;

  // kill -9: the history holds; no id is given again.
  s.Kill9();
  s.Start();
  EXPECT_EQ(Ids(s, "", "admin"), all);
  HttpReply next = s.Call("POST", "/v1/jobs", "tenant-a", SleepJob("after"), "application/yaml");
  ASSERT_EQ(next.status, 201);
  EXPECT_GT(next.json()["id"].get<int64_t>(), ids[3]);
}

TEST(ServerHistoryTest, ABadRetentionOrHistoryFileIsRefusedInOneLine) {
  RunResult bad = RunUnipool({"server", "--cluster", "examples/clusters/devbox.yaml", "--tokens",
                              "unused.yaml", "--history-retention", "soon"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--history-retention"), std::string::npos) << bad.err;
  RunResult missing = RunUnipool({"server", "--cluster", "examples/clusters/devbox.yaml",
                                  "--tokens", "unused.yaml", "--store", "memory", "--history",
                                  "/nonexistent-dir/history.db", "--listen", "127.0.0.1:0"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("/nonexistent-dir/history.db"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace unipool::testing
