// Tokens fail closed: a token file that is broken, deleted or writable by
// others revokes every token it held (node tokens keep working, so running
// jobs are not disturbed) until it is repaired; `token create` writes 0600.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string ReadAll(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

// Waits (up to 5 s) until GET /v1/summary as `who` answers `status`.
bool AnswersWithin(const TestServer& s, const std::string& who, int status) {
  for (int i = 0; i < 100; ++i) {
    if (s.Call("GET", "/v1/summary", who).status == status) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(ServerAuthTest, TokenFileFailsClosed) {
  TestServer s;
  s.Start();
  const std::string file = s.dir() + "/tokens.yaml";
  const std::string good = ReadAll(file);
  HttpReply join = s.Call("POST", "/v1/nodes/dev-1/join", "join", "{}");
  ASSERT_EQ(join.status, 200) << join.body;
  const std::string node_token = join.json()["token"].get<std::string>();
  auto heartbeat = [&] {
    httplib::Client c(s.url());
    auto r = c.Post("/v1/nodes/dev-1/heartbeat",
                    httplib::Headers{{"Authorization", "Bearer " + node_token}},
                    "{\"health\":\"ok\"}", "application/json");
    return r ? r->status : 0;
  };
  ASSERT_TRUE(AnswersWithin(s, "admin", 200));

  struct Case {
    const char* name;
    std::function<void()> damage;
    const char* logged;  // in the server's log
  };
  const std::vector<Case> cases = {
      {"a typo", [&] { std::ofstream(file) << good << "  - name: [oops\n"; },
       "token file rejected"},
      {"deleted", [&] { fs::remove(file); }, "cannot read token file"},
      {"world-writable", [&] { chmod(file.c_str(), 0666); }, "writable by group or others"},
      {"group-writable", [&] { chmod(file.c_str(), 0620); }, "writable by group or others"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    c.damage();
    EXPECT_TRUE(AnswersWithin(s, "admin", 401)) << "old tokens still work";
    EXPECT_EQ(s.Call("GET", "/v1/summary", "tenant-a").status, 401);
    EXPECT_EQ(heartbeat(), 200) << "node tokens must keep working";
    EXPECT_NE(ReadAll(s.dir() + "/server.log").find(c.logged), std::string::npos);
    // Repaired: the tokens work again.
    { std::ofstream(file) << good; }
    chmod(file.c_str(), 0600);
    EXPECT_TRUE(AnswersWithin(s, "admin", 200)) << "not restored after the repair";
  }
  HttpReply metrics = s.Call("GET", "/metrics", "admin");
  EXPECT_NE(metrics.body.find("unipool_token_file_valid 1"), std::string::npos);
  s.Stop();

  // A server does not start on an unsafe token file.
  chmod(file.c_str(), 0666);
  RunResult run = RunUnipool({"server", "--cluster", "examples/clusters/devbox.yaml", "--tokens",
                              file, "--data", s.dir() + "/data", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("is writable by group or others (mode 0666)"), std::string::npos)
      << run.err;
}

TEST(ServerAuthTest, TokenCreateWritesOwnerOnly) {
  const std::string dir =
      (fs::temp_directory_path() / ("unipool-tok-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  const std::string file = dir + "/tokens.yaml";
  ASSERT_EQ(RunUnipool({"token", "create", "--file", file, "--name", "first", "--role", "join"})
                .exit_code,
            0);
  chmod(file.c_str(), 0644);  // as older versions left it
  RunResult r = RunUnipool({"token", "create", "--file", file, "--name", "ops", "--role", "admin"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  RunResult bad =
      RunUnipool({"token", "create", "--file", file, "--name", "a b", "--role", "admin"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--name: expected 1 to 63 lowercase letters"), std::string::npos)
      << bad.err;
  fs::remove_all(dir);
}

// A join token registers only its nodes, and only a node without a live
// agent; the node's own token re-joins it (rotating the token) and acts
// only for that node.
TEST(ServerAuthTest, JoinTokensRegisterOnlyTheirNodesAndNoLiveOne) {
  TestServer s;
  s.Start();
  const std::string file = s.dir() + "/tokens.yaml";
  RunResult made = RunUnipool(
      {"token", "create", "--file", file, "--name", "rack", "--role", "join", "--nodes", "dev-1"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::string rack = made.out;
  rack.erase(rack.find_last_not_of("\n") + 1);
  auto call = [&](const std::string& path, const std::string& token, const std::string& body) {
    httplib::Client c(s.url());
    auto r = c.Post(path, httplib::Headers{{"Authorization", "Bearer " + token}}, body,
                    "application/json");
    return r ? std::pair{r->status, r->body} : std::pair{0, std::string()};
  };
  auto join = [&](const std::string& node, const std::string& token) {
    return call("/v1/nodes/" + node + "/join", token, "{}");
  };
  auto beat = [&](const std::string& node, const std::string& token) {
    return call("/v1/nodes/" + node + "/heartbeat", token, "{\"health\":\"ok\"}").first;
  };
  auto [other, why] = join("dev-2", rack);
  for (int i = 0; i < 100 && other == 401; ++i) {  // the token file is re-read on change
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::tie(other, why) = join("dev-2", rack);
  }
  EXPECT_EQ(other, 403);
  EXPECT_NE(why.find("join token 'rack' may not register node 'dev-2' (its nodes: dev-1)"),
            std::string::npos)
      << why;
  auto [first, body] = join("dev-1", rack);
  ASSERT_EQ(first, 200) << body;
  const std::string own = Json::parse(body)["token"];
  ASSERT_EQ(beat("dev-1", own), 200);
  auto [again, live] = join("dev-1", rack);
  EXPECT_EQ(again, 409);
  EXPECT_NE(live.find("node dev-1 has a live agent"), std::string::npos) << live;
  // Its own token re-joins it: a new token, the old one stops working.
  auto [rotated, fresh] = join("dev-1", own);
  ASSERT_EQ(rotated, 200) << fresh;
  const std::string next = Json::parse(fresh)["token"];
  EXPECT_EQ(beat("dev-1", own), 401);
  EXPECT_EQ(beat("dev-1", next), 200);
  EXPECT_EQ(join("dev-2", next).first, 403) << "a node's token acts only for its node";
  EXPECT_EQ(beat("dev-2", next), 403);
  // Entries that make no sense are refused.
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--name", "x1", "--role", "tenant", "--queues", "team-a",
                                 "--run-as", "a b"},
        {"--name", "x2", "--role", "join", "--run-as", "alice"},
        {"--name", "x3", "--role", "admin", "--nodes", "dev-1"}}) {
    std::vector<std::string> args = {"token", "create", "--file", file};
    args.insert(args.end(), bad.begin(), bad.end());
    RunResult r = RunUnipool(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("error: --"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace unipool::testing
