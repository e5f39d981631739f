// The API's edges: a table of bad requests (each gets a 4xx and a message
// naming the field and the cause), the authorization matrix (every route x
// every role), tenant isolation, TLS, and a real Prometheus scraping
// /metrics.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

// A port nobody listens on now: bind to port 0, read it back, close.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int port = BindLoopback(fd);
  close(fd);
  return port;
}

const char* kJob =
    "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: ok}\n"
    "spec: {command: [sleep, '1'], gpus: 8, queue: team-a}\n";

std::string Spec(const std::string& spec_fields, const std::string& meta = "{name: j}") {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata: " + meta +
         "\nspec: {command: [sleep, '1'], queue: team-a, " + spec_fields + "}\n";
}

struct Bad {
  const char* method;
  std::string path;
  const char* who;
  std::string body;
  int status;
  std::string message;  // a part of error.message
};

class ServerApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestServer();
    server_->Start();
    HttpReply r = server_->Call("POST", "/v1/jobs", "tenant-a", kJob, "application/yaml");
    ASSERT_EQ(r.status, 201) << r.body;
    r = server_->Call("POST", "/v1/jobs", "tenant-b",
                      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: theirs}\n"
                      "spec: {command: [sleep, '1'], gpus: 8, queue: team-b}\n",
                      "application/yaml");
    ASSERT_EQ(r.status, 201) << r.body;
    for (int i = 0; i < 100; ++i) {  // both start within a few scheduling passes
      if (server_->Call("GET", "/v1/jobs/2", "admin").json()["state"] == "Running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  static void TearDownTestSuite() { delete server_; }
  static TestServer* server_;
};
TestServer* ServerApiTest::server_ = nullptr;

TEST_F(ServerApiTest, EveryBadRequestGetsA4xxNamingTheCause) {
  const std::string big(1 << 21, 'x');
  const std::vector<Bad> cases = {
      // Authentication.
      {"GET", "/v1/jobs", "", "", 401, "missing 'Authorization: Bearer"},
      {"GET", "/v1/jobs", "not-a-token", "", 401, "unknown token"},
      {"GET", "/v1/summary", "", "", 401, "Bearer"},
      // Job specs.
      {"POST", "/v1/jobs", "admin", "", 400, "body"},
      {"POST", "/v1/jobs", "admin", "{", 400, "body"},
      {"POST", "/v1/jobs", "admin", "[1, 2]", 400, "body"},
      {"POST", "/v1/jobs", "admin", "kind: Job\n", 400, "apiVersion"},
      {"POST", "/v1/jobs", "admin", "apiVersion: unipool/v2\nkind: Job\n", 400, "unipool/v2"},
      {"POST", "/v1/jobs", "admin", "apiVersion: unipool/v1\nkind: Cron\n", 400, "kind"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 0"), 400, "spec.gpus"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: -8"), 400, "spec.gpus"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: eight"), 400, "spec.gpus"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 99999999999"), 400, "spec.gpus"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, gpusPerNode: 3"), 400, "gpusPerNode"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, gpuz: 8"), 400, "gpuz"},
      {"POST", "/v1/jobs", "admin",
       "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: j}\nspec: {command: [a], gpus: 8, "
       "queue: nope}\n",
       400, "unknown queue 'nope'"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8", "{name: Bad_Name}"), 400, "metadata.name"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8", "{}"), 400, "metadata.name"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8", "{name: " + std::string(64, 'a') + "}"), 400,
       "metadata.name"},
      {"POST", "/v1/jobs", "admin",
       "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: j}\nspec: {gpus: 8}\n", 400,
       "spec.command"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, priorityClassName: urgent"), 400,
       "priorityClassName"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, priority: 99999999"), 400, "spec.priority"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, preemptible: maybe"), 400, "preemptible"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, timeLimit: soon"), 400, "timeLimit"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, elastic: {minGpus: 16}"), 400, "minGpus"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, topology: {within: galaxy}"), 400,
       "no tier 'galaxy'"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, partition: nowhere"), 400,
       "no partition 'nowhere'"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, env: [{name: '1X', value: a}]"), 400, "env"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 8, restartPolicy: {maxRestarts: -1}"), 400,
       "maxRestarts"},
      {"POST", "/v1/jobs", "admin", Spec("gpus: 64"), 400, "the cluster has 32"},
      {"POST", "/v1/jobs", "admin", big, 413, "larger than"},
      {"POST", "/v1/jobs?dryRun=maybe", "admin", kJob, 400, "dryRun"},
      {"POST", "/v1/jobs?force=1", "admin", kJob, 400, "query parameter 'force'"},
      {"POST", "/v1/jobs", "admin",
       "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: "
       "i}]}\n",
       400, "nvidia.com/gpu"},
      // Listing and ids.
      {"GET", "/v1/jobs?limit=0", "admin", "", 400, "limit"},
      {"GET", "/v1/jobs?limit=5000", "admin", "", 400, "limit"},
      {"GET", "/v1/jobs?limit=ten", "admin", "", 400, "limit"},
      {"GET", "/v1/jobs?state=Sleeping", "admin", "", 400, "state"},
      {"GET", "/v1/jobs?label=novalue", "admin", "", 400, "label"},
      {"GET", "/v1/jobs?continue=-3", "admin", "", 400, "continue"},
      {"GET", "/v1/jobs?sort=name", "admin", "", 400, "query parameter 'sort'"},
      {"GET", "/v1/jobs/abc", "admin", "", 400, "job id 'abc'"},
      {"GET", "/v1/jobs/0", "admin", "", 400, "positive integer"},
      {"GET", "/v1/jobs/12345678901234567890", "admin", "", 400, "job id"},
      {"GET", "/v1/jobs/999", "admin", "", 404, "job 999 not found"},
      {"DELETE", "/v1/jobs/999", "admin", "", 404, "not found"},
      {"GET", "/v1/jobs/999/events", "admin", "", 404, "not found"},
      {"GET", "/v1/jobs/999/explain", "admin", "", 404, "not found"},
      {"GET", "/v1/jobs/1?verbose=1", "admin", "", 400, "query parameter 'verbose'"},
      // Reports.
      {"POST", "/v1/jobs/1/report", "admin", "", 400, "body"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"kind\": \"succeeded\"}", 400, "generation"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"generation\": 1}", 400, "body.kind"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"generation\": 1, \"kind\": \"exploded\"}", 400,
       "kind"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"generation\": 1, \"kind\": 7}", 400, "kind"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"generation\": 1, \"kind\": \"failed\", \"x\": 1}",
       400, "body.x: unknown field"},
      {"POST", "/v1/jobs/1/report", "admin", "{\"generation\": 77, \"kind\": \"succeeded\"}", 409,
       "not current"},
      // Nodes.
      {"GET", "/v1/nodes/nope", "admin", "", 404, "node 'nope' not found"},
      {"POST", "/v1/nodes/nope/cordon", "admin", "", 404, "node 'nope'"},
      {"POST", "/v1/nodes/dev-0/reboot", "admin", "", 404, "no route"},
      {"POST", "/v1/nodes/dev-0/cordon", "admin", "{\"reason\": 5}", 400, "body.reason"},
      {"POST", "/v1/nodes/dev-0/cordon", "admin", "{\"why\": \"x\"}", 400, "body.why"},
      {"POST", "/v1/nodes/dev-0/cordon", "admin", "not json", 400, "body"},
      {"POST", "/v1/nodes/dev-0/heartbeat", "admin", "{\"health\": [1]}", 400, "health"},
      {"GET", "/v1/nodes?state=sleeping", "admin", "", 400, "state"},
      {"POST", "/v1/nodes/nope/join", "join", "", 404, "not in the cluster file"},
      // Queues.
      {"PUT", "/v1/queues/q1", "admin", "", 400, "body"},
      {"PUT", "/v1/queues/q1", "admin", "{\"weight\": 0}", 400, "body.weight"},
      {"PUT", "/v1/queues/q1", "admin", "{\"weight\": 1.5}", 400, "body.weight"},
      {"PUT", "/v1/queues/q1", "admin", "{\"limit\": -1}", 400, "body.limit"},
      {"PUT", "/v1/queues/q1", "admin", "{\"policy\": \"lifo\"}", 400, "body.policy"},
      {"PUT", "/v1/queues/q1", "admin", "{\"quota\": 4}", 400, "body.quota: unknown field"},
      {"PUT", "/v1/queues/q1", "admin", "{\"name\": \"q2\"}", 400, "differs"},
      {"PUT", "/v1/queues/q1", "admin", "{\"parent\": \"nope\"}", 400, "nope"},
      {"PUT", "/v1/queues/q1", "admin", "{\"guarantee\": 10, \"limit\": 5}", 400, "guarantee"},
      {"PUT", "/v1/queues/team-a", "admin", "{\"parent\": \"default\"}", 400, "cannot change"},
      {"GET", "/v1/queues/nope", "admin", "", 404, "queue 'nope' not found"},
      // Watch.
      {"GET", "/v1/watch?kind=pods", "admin", "", 400, "kind"},
      {"GET", "/v1/watch?timeoutSeconds=9999", "admin", "", 400, "timeoutSeconds"},
      {"GET", "/v1/watch?revision=x", "admin", "", 400, "revision"},
      // Routes.
      {"GET", "/v2/jobs", "admin", "", 404, "no route"},
      {"PUT", "/v1/jobs", "admin", "{}", 405, "method not allowed"},
  };
  ASSERT_GE(cases.size(), 50u);
  for (const Bad& b : cases) {
    SCOPED_TRACE(std::string(b.method) + " " + b.path.substr(0, 80) + " as " + b.who + ": " +
                 b.body.substr(0, 200));
    HttpReply r = server_->Call(b.method, b.path, b.who, b.body,
                                b.path.starts_with("/v1/jobs") && b.method == std::string("POST") &&
                                        !b.path.ends_with("report")
                                    ? "application/yaml"
                                    : "application/json");
    EXPECT_EQ(r.status, b.status) << r.body.substr(0, 300);
    Json j = r.json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body.substr(0, 300);
    const std::string msg = j["error"]["message"];
    EXPECT_NE(msg.find(b.message), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_FALSE(j["error"]["code"].get<std::string>().empty());
  }
}

// curl's default -d sends a form; the server says what to send instead.
TEST_F(ServerApiTest, FormEncodedBodiesAreRefusedWithAHint) {
  HttpReply r =
      server_->Call("POST", "/v1/jobs", "admin", kJob, "application/x-www-form-urlencoded");
  EXPECT_EQ(r.status, 415) << r.body;
  EXPECT_NE(r.body.find("application/yaml"), std::string::npos) << r.body;
}

// Every route against every role: allowed (not 401/403) or denied (403).
TEST_F(ServerApiTest, AuthorizationMatrix) {
  struct Route {
    const char* method;
    std::string path;
    std::string body;
    std::set<std::string> allowed;  // of admin, viewer, tenant-a, agent, join
  };
  HttpReply joined = server_->Call("POST", "/v1/nodes/dev-3/join", "join");
  ASSERT_EQ(joined.status, 200) << joined.body;
  const std::string agent = joined.json()["token"];
  const std::string report = "{\"generation\": 0, \"kind\": \"checkpoint\"}";
  const std::vector<Route> routes = {
      {"GET", "/metrics", "", {"admin", "viewer"}},
      {"GET", "/v1/summary", "", {"admin", "viewer", "tenant-a"}},
      {"POST", "/v1/jobs?dryRun=true", kJob, {"admin", "tenant-a"}},
      {"GET", "/v1/jobs", "", {"admin", "viewer", "tenant-a"}},
      {"GET", "/v1/jobs/1", "", {"admin", "viewer", "tenant-a"}},
      {"GET", "/v1/jobs/1/events", "", {"admin", "viewer", "tenant-a"}},
      {"GET", "/v1/jobs/1/explain", "", {"admin", "viewer", "tenant-a"}},
      {"POST", "/v1/jobs/1/report", report, {"admin"}},  // agent: not its node's job
      {"DELETE", "/v1/jobs/999", "", {"admin", "tenant-a"}},
      {"GET", "/v1/nodes", "", {"admin", "viewer", "tenant-a"}},
      {"GET", "/v1/nodes/dev-3", "", {"admin", "viewer", "tenant-a", "agent"}},
      {"GET", "/v1/nodes/dev-0", "", {"admin", "viewer", "tenant-a"}},  // agent of dev-3: no
      {"POST", "/v1/nodes/dev-2/uncordon", "", {"admin"}},
      {"POST", "/v1/nodes/dev-3/heartbeat", "{}", {"admin", "agent"}},
      {"POST", "/v1/nodes/dev-0/heartbeat", "{}", {"admin"}},
      {"GET", "/v1/nodes/dev-3/assignments", "", {"admin", "agent"}},
      {"GET", "/v1/nodes/dev-0/assignments", "", {"admin"}},
      {"POST", "/v1/nodes/dev-2/join", "", {"admin", "join"}},
      {"GET", "/v1/queues", "", {"admin", "viewer", "tenant-a"}},
      {"GET", "/v1/queues/team-a", "", {"admin", "viewer", "tenant-a"}},
      {"PUT", "/v1/queues/team-a", "{}", {"admin"}},
      {"GET", "/v1/watch?timeoutSeconds=0", "", {"admin", "viewer", "tenant-a"}},
  };
  int checked = 0;
  for (const Route& r : routes) {
    for (const std::string who : {"admin", "viewer", "tenant-a", "agent", "join"}) {
      SCOPED_TRACE(std::string(r.method) + " " + r.path + " as " + who);
      HttpReply reply =
          server_->Call(r.method, r.path, who == "agent" ? agent : who, r.body,
                        r.path.starts_with("/v1/jobs?") ? "application/yaml" : "application/json");
      if (r.allowed.contains(who)) {
        EXPECT_NE(reply.status, 401) << reply.body;
        EXPECT_NE(reply.status, 403) << reply.body;
        EXPECT_LT(reply.status, 500) << reply.body;
      } else {
        EXPECT_EQ(reply.status, 403) << reply.body;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 110);
}

// A tenant never sees or touches another tenant's jobs, through any route.
TEST_F(ServerApiTest, TenantsAreIsolated) {
  // Job 2 belongs to tenant-b (queue team-b).
  for (const char* path : {"/v1/jobs/2", "/v1/jobs/2/events", "/v1/jobs/2/explain"}) {
    EXPECT_EQ(server_->Call("GET", path, "tenant-a").status, 404) << path;
    EXPECT_EQ(server_->Call("GET", path, "tenant-b").status, 200) << path;
  }
  EXPECT_EQ(server_->Call("DELETE", "/v1/jobs/2", "tenant-a").status, 404);
  EXPECT_EQ(server_->Call("POST", "/v1/jobs/2/cancel", "tenant-a").status, 404);
  Json list = server_->Call("GET", "/v1/jobs?limit=1000", "tenant-a").json();
  for (const Json& j : list["items"]) EXPECT_EQ(j["queue"], "team-a");
  EXPECT_FALSE(list["items"].empty());
  Json queues = server_->Call("GET", "/v1/queues", "tenant-a").json();
  ASSERT_EQ(queues["items"].size(), 1u);
  EXPECT_EQ(queues["items"][0]["name"], "team-a");
  EXPECT_EQ(server_->Call("GET", "/v1/queues/team-b", "tenant-a").status, 404);
  Json node = server_->Call("GET", "/v1/nodes/dev-1", "tenant-a").json();
  for (const Json& id : node["jobs"]) EXPECT_NE(id, 2);
  HttpReply sub = server_->Call("POST", "/v1/jobs", "tenant-a",
                                "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: x}\n"
                                "spec: {command: [a], gpus: 8, queue: team-b}\n",
                                "application/yaml");
  EXPECT_EQ(sub.status, 403);
  Json watch = server_->Call("GET", "/v1/watch?timeoutSeconds=0&revision=1", "tenant-a").json();
  for (const Json& e : watch["events"]) EXPECT_EQ(e["object"]["queue"], "team-a");
  EXPECT_EQ(server_->Call("GET", "/v1/jobs/2", "tenant-b").json()["state"], "Running");
}

// promtool accepts /metrics, and a real Prometheus server scrapes it with a
// bearer token and answers a query for one of its metrics.
TEST_F(ServerApiTest, PrometheusScrapesMetrics) {
  if (access("/usr/bin/prometheus", X_OK) != 0 || access("/usr/bin/promtool", X_OK) != 0) {
    GTEST_SKIP() << "Debian package prometheus not installed (scripts/install-deps.sh)";
  }
  HttpReply m = server_->Call("GET", "/metrics", "viewer");
  ASSERT_EQ(m.status, 200);
  for (const char* name :
       {"unipool_gpus{partition=\"dev\",state=\"allocated\"} ", "unipool_jobs{queue=\"team-a\"",
        "unipool_queue_pending_gpus", "unipool_scheduling_cycle_seconds_bucket",
        "unipool_api_requests_total{route=\"/v1/jobs\",method=\"POST\",code=\"201\"}",
        "unipool_api_request_seconds_bucket", "unipool_largest_free_block_gpus{tier=\"nvlink\"} 8",
        "unipool_preemptions_total", "unipool_node_failures_total",
        "unipool_heartbeats_missed_total", "process_cpu_seconds_total ",
        "process_resident_memory_bytes ", "process_open_fds ", "unipool_build_info{version=\"",
        "unipool_node_gpus{node=\"dev-0\",state=\"allocated\"} ",
        "unipool_node_state{node=\"dev-1\",state=\"up\"} 1",
        "unipool_job_wait_seconds_bucket{queue=\"team-a\",le=\"1\"} "}) {
    EXPECT_NE(m.body.find(name), std::string::npos) << name;
  }
  const std::string dir = server_->dir();
  std::ofstream(dir + "/metrics.txt") << m.body;
  ASSERT_EQ(std::system(("promtool check metrics < " + dir + "/metrics.txt").c_str()), 0);

  const std::string hostport = server_->url().substr(7);
  std::ofstream(dir + "/viewer.token") << server_->token("viewer");
  std::ofstream(dir + "/prometheus.yml") << "global: {scrape_interval: 1s}\n"
                                            "scrape_configs:\n"
                                            "  - job_name: unipool\n"
                                            "    authorization: {credentials_file: "
                                         << dir
                                         << "/viewer.token}\n"
                                            "    static_configs: [{targets: ['"
                                         << hostport << "']}]\n";
  const int port = FreePort();
  const pid_t pid = fork();
  if (pid == 0) {
    freopen((dir + "/prometheus.log").c_str(), "w", stderr);
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port);
    const std::string config = "--config.file=" + dir + "/prometheus.yml";
    const std::string storage = "--storage.tsdb.path=" + dir + "/tsdb";
    execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  httplib::Client prom("127.0.0.1", port);
  prom.set_connection_timeout(1, 0);
  prom.set_read_timeout(5, 0);
  std::string answer;
  for (int i = 0; i < 150; ++i) {  // up to 30 s: start-up, then a 1 s scrape
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto r = prom.Get("/api/v1/query?query=unipool_gpus%7Bstate%3D%22allocated%22%7D");
    if (r && r->status == 200 && r->body.find("\"result\":[{") != std::string::npos) {
      answer = r->body;
      break;
    }
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  ASSERT_FALSE(answer.empty()) << std::ifstream(dir + "/prometheus.log").rdbuf();
  EXPECT_NE(answer.find("\"partition\":\"dev\""), std::string::npos) << answer;
  const int64_t allocated =
      server_->Call("GET", "/v1/summary", "admin").json()["gpus"]["allocated"];
  EXPECT_NE(answer.find("\"" + std::to_string(allocated) + "\""), std::string::npos) << answer;
}

// HTTPS with --tls-cert/--tls-key; the CLI trusts the certificate with --ca-cert.
TEST(ServerTlsTest, ServesHttps) {
  if (access("/usr/bin/openssl", X_OK) != 0) GTEST_SKIP() << "openssl not installed";
  const std::string dir =
      std::filesystem::temp_directory_path() / ("unipool-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1"
                         " -addext subjectAltName=IP:127.0.0.1 -keyout " +
                         dir + "/key.pem -out " + dir + "/cert.pem 2>/dev/null")
                            .c_str()),
            0);
  TestServer s(TestServer::Options{
      .extra_args = {"--tls-cert", dir + "/cert.pem", "--tls-key", dir + "/key.pem"}});
  s.Start();
  ASSERT_TRUE(s.url().starts_with("https://")) << s.url();
  s.UseCli("viewer");
  RunResult ok = RunUnipool({"status", "--ca-cert", dir + "/cert.pem"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("32 free"), std::string::npos);
  RunResult untrusted = RunUnipool({"status"});
  EXPECT_EQ(untrusted.exit_code, 5) << untrusted.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace unipool::testing
