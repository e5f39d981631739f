// The server against hostile clients: requests no normal client sends
// (invalid UTF-8, control characters, broken framing, hostile JSON), slow
// and idle connections, and per-client caps. Every request is answered
// with a 4xx (or the connection is closed), never a 5xx or a crash, and
// nothing is created by a request answered with an error.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

// Resident memory the server may reach during the hostile table (KiB).
constexpr int64_t kRssBoundKb = 256 * 1024;

struct Hostile {
  std::string name;
  std::string bytes;       // the whole request as sent
  bool json_error = true;  // the answer is our JSON error (not the HTTP layer's)
};

std::string Request(const std::string& method, const std::string& target, const std::string& token,
                    const std::string& body = "", const std::string& extra_headers = "") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  r += extra_headers;
  if (!body.empty() || method == "POST" || method == "PUT") {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return r + "\r\n" + body;
}

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer();
    server_->Start();
    HttpReply r = server_->Call("POST", "/v1/jobs", "tenant-a",
                                "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: ok}\n"
                                "spec: {command: [sleep, '1'], gpus: 8, queue: team-a}\n",
                                "application/yaml");
    ASSERT_EQ(r.status, 201) << r.body;
    r = server_->Call("POST", "/v1/nodes/dev-1/join", "join", "{}");
    ASSERT_EQ(r.status, 200) << r.body;
    agent_token_ = new std::string(r.json()["token"].get<std::string>());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete agent_token_;
  }

  static size_t JobCount() {
    HttpReply r = server_->Call("GET", "/v1/jobs?limit=1000", "admin");
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["items"].size();
  }
  static std::string Tok(const std::string& who) {
    return who == "agent" ? *agent_token_ : server_->token(who);
  }

  static TestServer* server_;
  static std::string* agent_token_;
};
TestServer* HostileTest::server_ = nullptr;
std::string* HostileTest::agent_token_ = nullptr;

// The reproducers: each one crashed the server, answered 500, or
// created something while answering an error.
TEST_F(HostileTest, InvalidUtf8IsA400AndCreatesNothing) {
  const size_t jobs = JobCount();
  const std::string admin = Tok("admin");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unmatched path", Request("GET", "/%ff", "")},
      {"job id", Request("GET", "/v1/jobs/%ff", admin)},
      {"parameter name", Request("GET", "/v1/jobs?%ff=1", admin)},
      {"queue name", Request("PUT", "/v1/queues/%ff", admin, "{}")},
      {"node name", Request("POST", "/v1/nodes/%ff/cordon", admin, "{}")},
      {"watch kind", Request("GET", "/v1/watch?kind=%ff&timeoutSeconds=0", admin)},
      {"logs rank", Request("GET", "/v1/jobs/1/logs?rank=%ff", admin)},
      {"spec field name",
       Request("POST", "/v1/jobs", admin,
               "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
               "\"spec\":{\"containers\":[{\"name\":\"c\",\"command\":[\"sleep\",\"1\"],"
               "\"x\xff\":1}]}}")},
      {"spec field name (YAML)",
       Request("POST", "/v1/jobs", admin,
               "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
               "  - {name: c, command: [sleep, '1'], \"x\xff\": 1}\n")},
      {"NUL in the path", Request("GET", "/v1/jobs/1%00", admin)},
      {"NUL in a queue name", Request("PUT", "/v1/queues/a%00b", admin, "{}")},
      {"control character in a queue name", Request("PUT", "/v1/queues/a%01b", admin, "{}")},
  };
  for (const auto& [name, bytes] : cases) {
    SCOPED_TRACE(name);
    RawReply r = RawHttp(server_->port(), bytes);
    EXPECT_GE(r.status, 400) << r.head << "\n" << r.body;
    EXPECT_LT(r.status, 500) << r.head << "\n" << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r.body;
  }
  EXPECT_EQ(server_->Call("GET", "/healthz", "").status, 200);
  EXPECT_EQ(JobCount(), jobs);
  HttpReply q = server_->Call("GET", "/v1/queues", "admin");
  EXPECT_EQ(q.status, 200) << q.body;
  EXPECT_EQ(q.json()["items"].size(), 3u) << q.body;  // default, team-a, team-b
}

// At least 150 distinct hostile requests over every route: 0 crashes, 0
// 5xx, nothing created, memory bounded.
TEST_F(HostileTest, HostileTableGetsNo5xx) {
  const size_t jobs = JobCount();
  const std::string admin = Tok("admin"), agent = Tok("agent"), tenant = Tok("tenant-a");
  std::vector<Hostile> cases;
  auto add = [&](std::string name, std::string bytes, bool json_error = true) {
    cases.push_back({std::move(name), std::move(bytes), json_error});
  };
  // Every route, with a bad segment, a bad parameter name and value, a
  // duplicate parameter, an unknown one and a NUL.
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"GET", "/v1/summary"},
      {"GET", "/v1/jobs"},
      {"POST", "/v1/jobs"},
      {"GET", "/v1/jobs/1"},
      {"DELETE", "/v1/jobs/1"},
      {"POST", "/v1/jobs/1/cancel"},
      {"GET", "/v1/jobs/1/events"},
      {"GET", "/v1/jobs/1/explain"},
      {"POST", "/v1/jobs/1/report"},
      {"GET", "/v1/jobs/1/logs"},
      {"GET", "/v1/nodes"},
      {"GET", "/v1/nodes/dev-1"},
      {"POST", "/v1/nodes/dev-1/cordon"},
      {"POST", "/v1/nodes/dev-1/join"},
      {"POST", "/v1/nodes/dev-1/heartbeat"},
      {"GET", "/v1/nodes/dev-1/assignments"},
      {"GET", "/v1/queues"},
      {"GET", "/v1/queues/team-a"},
      {"PUT", "/v1/queues/team-a"},
      {"GET", "/v1/watch"},
      {"GET", "/metrics"}};
  for (const auto& [method, path] : routes) {
    const std::string who = path.find("/heartbeat") != std::string::npos ||
                                    path.find("/assignments") != std::string::npos ||
                                    path.find("/report") != std::string::npos
                                ? agent
                                : admin;
    const std::string body = method == "GET" || method == "DELETE" ? "" : "{}";
    const std::string r = method + " " + path;
    add(r + " bad segment", Request(method, path + "/%c3%28", who, body));
    add(r + " bad parameter name", Request(method, path + "?%e2%82=1", who, body));
    add(r + " bad parameter value", Request(method, path + "?limit=%f0%28%8c%bc", who, body));
    add(r + " duplicate parameter", Request(method, path + "?limit=1&limit=2", who, body));
    add(r + " unknown parameter", Request(method, path + "?nope=1", who, body));
    add(r + " NUL parameter", Request(method, path + "?x=%00", who, body));
    add(r + " control in header", Request(method, path, who, body,
                                          "X-Note: a\x01"
                                          "b\r\n"));
  }
  // Hostile bodies for every route that reads one.
  const std::vector<std::pair<std::string, std::string>> writers = {
      {"/v1/jobs", admin},
      {"/v1/jobs/1/report", agent},
      {"/v1/nodes/dev-1/join", Tok("join")},
      {"/v1/nodes/dev-1/heartbeat", agent},
      {"/v1/nodes/dev-1/cordon", admin},
      {"/v1/queues/team-a", admin}};
  const std::vector<std::pair<std::string, std::string>> bodies = {
      {"not JSON", "{"},
      {"invalid UTF-8 string", "{\"reason\":\"\xc3\x28\"}"},
      {"duplicate keys", "{\"reason\":\"a\",\"reason\":\"b\"}"},
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']')},
      {"string for a number", "{\"gpus\":\"8\",\"weight\":\"3\",\"generation\":\"1\"}"},
      {"huge number", "{\"gpus\":1e400,\"weight\":99999999999999999999999}"},
      {"array", "[1,2,3]"},
      {"null", "null"},
      {"control character", "{\"reason\":\"a\\u0000b\",\"health\":\"o\\u0001k\"}"},
      {"Xid counts out of range", "{\"health\":\"ok\",\"xids\":[[0,79,-1],[99,1,1]]}"},
      {"Xid count not a list", "{\"health\":\"ok\",\"xids\":[\"79\"]}"},
      {"Xid count of floats", "{\"health\":\"ok\",\"xids\":[[0.5,79,1e300]]}"},
  };
  for (const auto& [path, who] : writers) {
    const std::string method = path.starts_with("/v1/queues") ? "PUT" : "POST";
    for (const auto& [what, body] : bodies) {
      add(method + " " + path + " " + what, Request(method, path, who, body));
    }
  }
  // Authentication.
  add("bearer invalid UTF-8", Request("GET", "/v1/jobs", "\xff\xfe"));
  add("bearer huge", Request("GET", "/v1/jobs", std::string(4000, 'a')));
  add("basic auth",
      "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Authorization: Basic YTpi\r\n\r\n");
  add("empty bearer",
      "GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Authorization: Bearer \r\n\r\n");
  add("bearer NUL", Request("GET", "/v1/jobs", std::string("ab\0cd", 5)), false);
  // Methods and paths.
  add("unknown method", Request("BREW", "/v1/jobs", admin));
  add("HEAD", Request("HEAD", "/v1/jobs", admin), false);
  add("traversal", Request("GET", "/../v1/jobs", admin), false);
  add("double slashes", Request("GET", "//v1//jobs", admin));
  add("encoded slash", Request("GET", "/v1/jobs/1%2fevents", admin));
  add("long path", Request("GET", "/v1/jobs/" + std::string(20000, '9'), admin), false);
  add("absolute form", Request("GET", "http://127.0.0.1/v1/jobs/%ff", admin), false);
  // Framing: the HTTP layer refuses these (its own answer, or a close).
  add("garbage request line", "\x16\x03\x01\x02\x00\r\n\r\n", false);
  add("HTTP/0.9", "GET /\r\n\r\n", false);
  add("no Host", "GET /v1/jobs HTTP/1.1\r\nConnection: close\r\n\r\n", false);
  add("bad version", "GET /v1/jobs HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  add("letters for Content-Length",
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: abc\r\n\r\n",
      false);
  add("negative Content-Length",
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: -1\r\n\r\n",
      false);
  add("huge Content-Length",
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Length: 99999999999999999999\r\n\r\n",
      false);
  add("Content-Length over the limit",
      Request("POST", "/v1/jobs", admin, std::string(2 << 20, 'x')));
  add("bad chunk size",
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
      "\r\nzz\r\nabc\r\n0\r\n\r\n",
      false);
  add("chunked over the limit",
      "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
      "Authorization: Bearer " +
          admin + "\r\n\r\n300000\r\n" + std::string(0x300000, 'y') + "\r\n0\r\n\r\n",
      false);
  add("header over the limit",
      Request("GET", "/v1/jobs", admin, "", "X-Big: " + std::string(40000, 'h') + "\r\n"), false);
  std::string many;
  for (int i = 0; i < 2000; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  add("many headers", Request("GET", "/v1/jobs", admin, "", many), false);
  add("header without colon", Request("GET", "/v1/jobs", admin, "", "nonsense\r\n"), false);
  add("bare LF", "GET /v1/jobs HTTP/1.1\nHost: x\nConnection: close\n\n", false);
  add("form body", Request("POST", "/v1/jobs", admin, "a=1",
                           "Content-Type: application/x-www-form-urlencoded\r\n"));
  ASSERT_GE(cases.size(), 150u);

  std::set<std::string> names;
  int64_t max_rss = 0;
  for (const Hostile& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name";
    RawReply r = RawHttp(server_->port(), c.bytes);
    // 505 is HTTP's own answer to an unknown protocol version (RFC 9110
    // 15.6.6), given by the HTTP layer before any of ours runs.
    if (c.name != "bad version") {
      EXPECT_LT(r.status, 500) << r.head << "\n" << r.body.substr(0, 300);
    }
    if (c.json_error) {
      EXPECT_GE(r.status, 400) << r.head << "\n" << r.body.substr(0, 300);
      const Json j = Json::parse(r.body, nullptr, false);
      EXPECT_TRUE(j.is_object() && j.contains("error") && !j["error"].value("message", "").empty())
          << r.body.substr(0, 300);
    } else {
      EXPECT_TRUE(r.status == 0 || (r.status >= 400 && r.status < 500) || r.status == 505)
          << r.head;
    }
    max_rss = std::max(max_rss, server_->RssKb());
    ASSERT_EQ(server_->Call("GET", "/healthz", "").status, 200) << "server died";
  }
  EXPECT_EQ(JobCount(), jobs);
  EXPECT_LT(max_rss, kRssBoundKb);
  std::printf("hostile table: %zu requests, max server RSS %lld KiB\n", cases.size(),
              static_cast<long long>(max_rss));
}

// Slow senders and idle keep-alive connections hold no worker: with 300
// connections sending a header line now and then, and 2,000 idle after one
// request each, 100 heartbeats and 100 GETs all answer within a second.
TEST_F(HostileTest, SlowAndIdleConnectionsStarveNothing) {
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);
  nofile.rlim_cur = nofile.rlim_max;
  setrlimit(RLIMIT_NOFILE, &nofile);
  if (nofile.rlim_cur < 2600)
    GTEST_SKIP() << "needs 2,600 open files, may have " << nofile.rlim_cur;
  const int port = server_->port();
  auto connect_one = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in a = LoopbackAddress(port);
    EXPECT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    return fd;
  };
  std::vector<int> slow, idle;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(connect_one());
    const std::string start = "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n";
    send(slow.back(), start.data(), start.size(), MSG_NOSIGNAL);
  }
  const std::string ping = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int i = 0; i < 2000; ++i) {
    idle.push_back(connect_one());
    send(idle.back(), ping.data(), ping.size(), MSG_NOSIGNAL);
  }
  std::atomic<bool> done{false};
  std::thread dribble([&] {  // a header line per slow connection every 3 s
    for (int round = 0; !done; ++round) {
      const std::string line = "X-Slow-" + std::to_string(round) + ": 1\r\n";
      for (int fd : slow) send(fd, line.data(), line.size(), MSG_NOSIGNAL);
      for (int i = 0; i < 30 && !done; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  double worst_heartbeat = 0, worst_get = 0;
  for (int i = 0; i < 100; ++i) {
    RawReply h = RawHttp(
        port, Request("POST", "/v1/nodes/dev-1/heartbeat", Tok("agent"), "{\"health\":\"ok\"}"));
    EXPECT_EQ(h.status, 200) << h.body;
    worst_heartbeat = std::max(worst_heartbeat, h.seconds);
    RawReply g = RawHttp(port, Request("GET", "/v1/jobs/1", Tok("tenant-a")));
    EXPECT_EQ(g.status, 200) << g.body;
    worst_get = std::max(worst_get, g.seconds);
  }
  done = true;
  dribble.join();
  const std::string metrics = server_->Call("GET", "/metrics", "admin").body;
  const size_t at = metrics.find("\nunipool_api_connections ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::atoi(metrics.c_str() + at + 25), 2000) << "the gauge counts open connections";
  for (int fd : slow) close(fd);
  for (int fd : idle) close(fd);
  EXPECT_LT(worst_heartbeat, 1.0);
  EXPECT_LT(worst_get, 1.0);
  std::printf("with 300 slow + 2000 idle connections: worst heartbeat %.3f s, worst GET %.3f s\n",
              worst_heartbeat, worst_get);
}

// A client (token) has a cap on requests in flight; past it, 429 with
// Retry-After. Admins and agents are not capped.
TEST_F(HostileTest, PerClientCapAnswers429) {
  // 40 long polls of one tenant (on queues, which nothing changes) for 8 s:
  // at most 32 are in flight, the rest (and its other requests meanwhile)
  // get 429 with Retry-After; an admin's requests are not capped.
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::vector<std::thread> polls;
  std::atomic<int> ok{0}, limited{0}, other{0};
  std::atomic<bool> retry_after{true};
  auto count = [&](const RawReply& r) {
    if (r.status == 200) {
      ++ok;
    } else if (r.status == 429) {
      ++limited;
      if (lower(r.head).find("retry-after: 1") == std::string::npos ||
          r.body.find("too many requests in flight") == std::string::npos) {
        retry_after = false;
      }
    } else {
      ++other;
    }
  };
  for (int i = 0; i < 40; ++i) {
    polls.emplace_back([&] {
      count(RawHttp(server_->port(),
                    Request("GET", "/v1/watch?kind=queues&timeoutSeconds=8", Tok("tenant-a")),
                    20000));
    });
  }
  // Until the server holds 32 of them (a slow machine makes this longer).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  while (limited == 0 && std::chrono::steady_clock::now() < until) {
    RawReply r = RawHttp(server_->port(), Request("GET", "/v1/summary", Tok("tenant-a")));
    if (r.status == 429) count(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(RawHttp(server_->port(), Request("GET", "/v1/summary", Tok("admin"))).status, 200);
  for (std::thread& t : polls) t.join();
  EXPECT_GE(limited.load(), 1);
  EXPECT_GE(ok.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_TRUE(retry_after.load());
  EXPECT_EQ(RawHttp(server_->port(), Request("GET", "/v1/summary", Tok("tenant-a"))).status, 200);
}

// A tenant is held to its queue's limits (unfinished jobs, spec size,
// submissions a minute): 429 with Retry-After and the limit's name. Admins
// are not limited.
TEST_F(HostileTest, QueueLimitsAnswer429) {
  auto job = [](size_t pad) {
    return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: l}\n"
           "spec: {command: [sleep, '600'], gpus: 1, queue: team-b, env: {P: '" +
           std::string(pad, 'p') + "'}}\n";
  };
  auto submit = [&](const std::string& who, size_t pad) {
    return server_->Call("POST", "/v1/jobs", who, job(pad), "application/yaml");
  };
  HttpReply put = server_->Call("PUT", "/v1/queues/team-b", "admin",
                                "{\"maxJobs\": 3, \"maxSpecBytes\": 2000, "
                                "\"maxSubmitsPerMinute\": 6000}");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.json()["maxJobs"], 3);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(submit("tenant-b", 1).status, 201);
  HttpReply full = submit("tenant-b", 1);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_NE(full.body.find("(maxJobs)"), std::string::npos) << full.body;
  EXPECT_EQ(submit("admin", 1).status, 201) << "admins are not limited";
  HttpReply big = submit("tenant-b", 3000);
  EXPECT_EQ(big.status, 429) << big.body;
  EXPECT_NE(big.body.find("(maxSpecBytes)"), std::string::npos) << big.body;

  put = server_->Call("PUT", "/v1/queues/team-b", "admin",
                      "{\"maxJobs\": 100000, \"maxSubmitsPerMinute\": 60}");
  ASSERT_EQ(put.status, 200) << put.body;
  int accepted = 0;
  HttpReply last;
  for (int i = 0; i < 20; ++i) {
    last = submit("tenant-b", 1);
    if (last.status != 201) break;
    ++accepted;
  }
  EXPECT_LE(accepted, 7) << "a burst is a tenth of a minute's rate (6), plus what refilled";
  EXPECT_EQ(last.status, 429) << last.body;
  EXPECT_NE(last.body.find("(maxSubmitsPerMinute)"), std::string::npos) << last.body;
  RawReply raw = RawHttp(server_->port(), Request("POST", "/v1/jobs", Tok("tenant-b"), job(1)));
  std::string head = raw.head;
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_EQ(raw.status, 429);
  EXPECT_NE(head.find("retry-after: 1"), std::string::npos) << raw.head;
}

}  // namespace
}  // namespace unipool::testing
