// What the web dashboard reads beyond the rest of the API: its own files
// (public, with security headers), GET /v1/topology (a group and its
// children with their GPUs' use, scoped by job), and GET
// /v1/jobs/{id}/progress (progress reports over time, thinned past a bound).
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

int64_t RunningJob(const TestServer& s, const std::string& who, const std::string& queue,
                   int gpus) {
  HttpReply r = s.Call("POST", "/v1/jobs", who,
                       "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: j}\nspec: {command: "
                       "[sleep, '9'], gpus: " +
                           std::to_string(gpus) + ", queue: " + queue + "}\n",
                       "application/yaml");
  EXPECT_EQ(r.status, 201) << r.body;
  const int64_t id = r.json().value("id", int64_t{-1});
  for (int i = 0; i < 100; ++i) {
    if (s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json()["state"] == "Running") {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return id;
}

TEST(DashboardApiTest, ServesItsFilesWithoutATokenAndWithSecurityHeaders) {
  TestServer s;
  s.Start();
  RawReply page = RawHttp(s.port(), "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(page.status, 200) << page.head;
  EXPECT_NE(page.head.find("Content-Type: text/html"), std::string::npos) << page.head;
  EXPECT_NE(page.head.find("Content-Security-Policy: default-src 'self'"), std::string::npos);
  EXPECT_NE(page.head.find("X-Content-Type-Options: nosniff"), std::string::npos);
  EXPECT_NE(page.body.find("/ui/app.js"), std::string::npos);
  RawReply js =
      RawHttp(s.port(), "GET /ui/app.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(js.status, 200);
  EXPECT_NE(js.head.find("text/javascript"), std::string::npos);
  RawReply none =
      RawHttp(s.port(), "GET /ui/nope.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(none.status, 404);
  // The data still needs a token.
  EXPECT_EQ(
      RawHttp(s.port(), "GET /v1/topology HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").status,
      401);
}

TEST(DashboardApiTest, TopologyGroupsAddUpAndAJobIsFoundInThem) {
  TestServer s;
  s.Start();
  const int64_t a = RunningJob(s, "tenant-a", "team-a", 16);
  const int64_t b = RunningJob(s, "tenant-b", "team-b", 8);
  const Json top = s.Call("GET", "/v1/topology?job=" + std::to_string(a), "tenant-a").json();
  ASSERT_TRUE(top.contains("children")) << top.dump();
  EXPECT_EQ(top["gpus"], 32);
  EXPECT_EQ(top["allocated"], 24);
  EXPECT_EQ(top["jobGpus"], 16);
  int64_t gpus = 0, allocated = 0, job = 0;
  for (const Json& c : top["children"]) {
    gpus += c["gpus"].get<int64_t>();
    allocated += c["allocated"].get<int64_t>();
    job += c["jobGpus"].get<int64_t>();
  }
  EXPECT_EQ(gpus, 32);
  EXPECT_EQ(allocated, 24);
  EXPECT_EQ(job, 16);
  EXPECT_EQ(top["path"].size(), 1u);
  // One scale-up group: its node.
  const Json group = s.Call("GET", "/v1/topology?tier=0&group=0", "admin").json();
  EXPECT_EQ(group["childKind"], "node");
  ASSERT_EQ(group["children"].size(), 1u) << group.dump();
  EXPECT_EQ(group["children"][0]["name"], "dev-0");
  EXPECT_EQ(group["children"][0]["state"], "up");
  EXPECT_EQ(group["path"].size(), 2u);
  // Errors: no such tier or group, another tenant's job.
  EXPECT_EQ(s.Call("GET", "/v1/topology?tier=7", "admin").status, 400);
  HttpReply missing = s.Call("GET", "/v1/topology?tier=0&group=99", "admin");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("it has 4 groups"), std::string::npos) << missing.body;
  EXPECT_EQ(s.Call("GET", "/v1/topology?job=" + std::to_string(b), "tenant-a").status, 404);
}

// The nodes page's jobs column and the overview's power colouring: each
// node lists the jobs running there (those the caller may see), and a
// group sums the power its GPUs last reported (none: no field).
TEST(DashboardApiTest, NodesListTheirJobsAndGroupsTheirPower) {
  TestServer s;
  s.Start();
  const int64_t a = RunningJob(s, "tenant-a", "team-a", 16);
  const int64_t b = RunningJob(s, "tenant-b", "team-b", 8);
  const auto jobs_seen = [&](const std::string& token) {
    std::set<int64_t> ids;
    const Json nodes = s.Call("GET", "/v1/nodes", token).json();
    for (const Json& n : nodes["items"]) {
      for (const Json& id : n["jobs"]) ids.insert(id.get<int64_t>());
    }
    return ids;
  };
  EXPECT_EQ(jobs_seen("admin"), (std::set<int64_t>{a, b}));
  EXPECT_EQ(jobs_seen("tenant-a"), (std::set<int64_t>{a}));
  EXPECT_FALSE(s.Call("GET", "/v1/topology", "admin").json().contains("powerWatts"));
  // Readings [index, util, memUsed, memTotal, temperature, power, ecc]; GPU 1 gives no power.
  HttpReply beat = s.Call("POST", "/v1/nodes/dev-0/heartbeat", "admin",
                          R"({"health": "ok", "gpus": [[0, 90, 1000, 81920, 60, 455.5, 0],
                                                        [1, 80, 1000, 81920, 58, -1, 0],
                                                        [2, 70, 1000, 81920, 57, 300, 0]]})");
  ASSERT_EQ(beat.status, 200) << beat.body;
  const Json top = s.Call("GET", "/v1/topology", "admin").json();
  EXPECT_DOUBLE_EQ(top["powerWatts"].get<double>(), 755.5) << top.dump();
  EXPECT_EQ(top["powerGpus"], 2);
  double children = 0;
  for (const Json& c : top["children"]) children += c.value("powerWatts", 0.0);
  EXPECT_DOUBLE_EQ(children, 755.5);
}

// M20 clock skew: a node's agent measures its clock against the server's
// (serverTimeMs in each heartbeat reply) and sends the offset; past the
// bound (--max-clock-offset, 1 s) its running jobs get a ClockSkew event,
// the diagnosis names it, and the offset is a gauge.
TEST(DashboardApiTest, ASkewedNodeClockIsShownCountedAndDiagnosed) {
  TestServer s;
  s.Start();
  const int64_t id = RunningJob(s, "tenant-a", "team-a", 8);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  const std::string node = s.Call("GET", path, "admin").json()["tasks"][0]["node"];
  const std::string beat_path = "/v1/nodes/" + node + "/heartbeat";
  HttpReply beat = s.Call("POST", beat_path, "admin", R"({"health": "ok", "clockOffsetMs": 0.4})");
  ASSERT_EQ(beat.status, 200) << beat.body;
  const int64_t server_ms = beat.json()["serverTimeMs"];
  const int64_t here_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  EXPECT_LT(std::abs(here_ms - server_ms), 60000);
  Json n = s.Call("GET", "/v1/nodes/" + node, "admin").json();
  EXPECT_DOUBLE_EQ(n["clockOffsetSeconds"].get<double>(), 0.0004) << n.dump();
  EXPECT_EQ(n["clockSkewed"], false);
  ASSERT_EQ(
      s.Call("POST", beat_path, "admin", R"({"health": "ok", "clockOffsetMs": -2500})").status,
      200);
  n = s.Call("GET", "/v1/nodes/" + node, "admin").json();
  EXPECT_DOUBLE_EQ(n["clockOffsetSeconds"].get<double>(), -2.5);
  EXPECT_EQ(n["clockSkewed"], true);
  Json skew;
  for (int i = 0; i < 100 && skew.is_null(); ++i) {
    const Json events = s.Call("GET", path + "/events", "admin").json();
    for (const Json& e : events["items"]) {
      if (e["type"] == "ClockSkew") skew = e;
    }
    if (skew.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(skew.is_null());
  EXPECT_NE(skew["message"].get<std::string>().find("-2.500 s from the server's (bound 1 s)"),
            std::string::npos)
      << skew.dump();
  const Json d = s.Call("GET", path + "/diagnosis", "admin").json();
  bool named = false;
  for (const Json& c : d["causes"]) named |= c["kind"] == "ClockSkew";
  EXPECT_TRUE(named) << d.dump();
  const std::string metrics = s.Call("GET", "/metrics", "admin").body;
  EXPECT_NE(metrics.find("unipool_node_clock_offset_seconds{node=\"" + node + "\"} -2.5"),
            std::string::npos);
  EXPECT_NE(metrics.find("kind=\"ClockSkew\""), std::string::npos);
  // Bad offsets are refused by name.
  HttpReply bad = s.Call("POST", beat_path, "admin", R"({"health": "ok", "clockOffsetMs": "x"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("body.clockOffsetMs"), std::string::npos) << bad.body;
}

// M20 host memory: each rank's RSS comes in the agents' signals reports;
// growth past max(256 MiB, 25%) over the baseline (10 steps after the
// first reading) is a MemoryGrowth event, an anomaly, a cause in the
// diagnosis; the job's RSS is a gauge. Malformed entries and ranks on
// nodes the job does not run on change nothing.
TEST(DashboardApiTest, HostMemoryGrowthIsAnEventAGaugeAndACause) {
  TestServer s;
  s.Start();
  const int64_t id = RunningJob(s, "tenant-a", "team-a", 8);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  const Json job = s.Call("GET", path, "admin").json();
  const std::string node = job["tasks"][0]["node"];
  const int64_t generation = job["generation"];
  auto signals = [&](const std::string& ranks) {
    return s.Call("POST", path + "/report", "admin",
                  R"({"generation": )" + std::to_string(generation) +
                      R"(, "kind": "signals", "data": {"ranks": [)" + ranks + "]}}");
  };
  auto entry = [&](int64_t step, int64_t mib, const std::string& where) {
    return R"({"rank": 0, "node": ")" + where + R"(", "step": )" + std::to_string(step) +
           R"(, "rssBytes": )" + std::to_string(mib << 20) + "}";
  };
  for (int64_t step = 0; step <= 40; step += 5) {
    ASSERT_EQ(signals(entry(step, 1000, node)).status, 200);
  }
  // Garbage and a node the job is not on: ignored, the baseline stands.
  for (const std::string& bad :
       {std::string(R"({"rank": 0, "node": ")") + node + R"(", "step": 45, "rssBytes": "x"})",
        std::string(R"({"rank": 0, "node": ")") + node + R"(", "step": 45, "rssBytes": -5})",
        std::string(R"({"rank": -1, "node": ")") + node + R"(", "step": 45, "rssBytes": 1})",
        std::string(R"({"rank": 0, "node": ")") + node + R"(", "step": 4.5, "rssBytes": 1})",
        entry(45, 9000, "elsewhere"), std::string("7"), std::string("null")}) {
    EXPECT_EQ(signals(bad).status, 200) << bad;
  }
  auto grown = [&] {
    const Json events = s.Call("GET", path + "/events", "admin").json();
    for (const Json& e : events["items"]) {
      if (e["type"] == "MemoryGrowth") return e;
    }
    return Json();
  };
  EXPECT_TRUE(grown().is_null());
  ASSERT_EQ(signals(entry(50, 1200, node)).status, 200);  // +200 MiB: under 256 MiB
  EXPECT_TRUE(grown().is_null());
  ASSERT_EQ(signals(entry(60, 1300, node)).status, 200);  // +300 MiB
  const Json e = grown();
  ASSERT_FALSE(e.is_null());
  EXPECT_NE(
      e["message"].get<std::string>().find("rank 0 on " + node +
                                           ": resident memory grew from 1000 MiB at step 10 to "
                                           "1300 MiB at step 60 (+30%, 6.0 MiB per step)"),
      std::string::npos)
      << e.dump();
  const Json d = s.Call("GET", path + "/diagnosis", "admin").json();
  bool named = false;
  for (const Json& c : d["causes"]) named |= c["kind"] == "MemoryGrowth";
  EXPECT_TRUE(named) << d.dump();
  std::string metrics;
  for (int i = 0; i < 100; ++i) {  // the gauge is set at the next reconcile
    metrics = s.Call("GET", "/metrics", "admin").body;
    if (metrics.find("unipool_job_host_memory_bytes{") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(metrics.find("unipool_job_host_memory_bytes{job=\"" + std::to_string(id)),
            std::string::npos);
  EXPECT_NE(metrics.find(std::to_string(1300LL << 20)), std::string::npos);
  EXPECT_NE(metrics.find("kind=\"MemoryGrowth\"} 1"), std::string::npos);
}

TEST(DashboardApiTest, ProgressIsKeptOverTimeAndThinnedPastItsBound) {
  TestServer s;
  s.Start();
  const int64_t id = RunningJob(s, "tenant-a", "team-a", 8);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  const Json job = s.Call("GET", path, "admin").json();
  for (int step = 1; step <= 300; ++step) {
    Json body{{"generation", job["generation"]},
              {"kind", "progress"},
              {"data", {{"step", step}, {"loss", 1.0 / step}}}};
    ASSERT_EQ(s.Call("POST", path + "/report", "admin", body.dump()).status, 200);
  }
  const Json p = s.Call("GET", path + "/progress", "tenant-a").json();
  ASSERT_TRUE(p["items"].is_array()) << p.dump();
  EXPECT_LE(p["items"].size(), 256u);
  EXPECT_GE(p["items"].size(), 128u);
  EXPECT_EQ(p["items"][0]["step"], 1);  // the whole run stays in view
  EXPECT_EQ(p["items"].back()["step"], 300);
  EXPECT_FALSE(p["items"][0].contains("throughput"));  // not reported: absent
  EXPECT_EQ(s.Call("GET", path + "/progress", "tenant-b").status, 404);
}

}  // namespace
}  // namespace unipool::testing
