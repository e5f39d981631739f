// Tokens fail closed: a token file that is broken, deleted or writable by
// others revokes every token it held (node tokens keep working, so running
// jobs are not disturbed) until it is repaired; `token create` writes 0600.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

namespace fs = std::filesystem;

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

}  // namespace
}  // namespace unipool::testing
