#include "cli/server_test_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "server/auth.h"

namespace unipool::testing {

namespace fs = std::filesystem;

// A server may answer early (413) and close while a test still writes the
// body: that is an EPIPE for the test to see, not a signal that kills it.
[[maybe_unused]] static const bool kNoSigpipe = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

sockaddr_in LoopbackAddress(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

int BindLoopback(int fd) {
  sockaddr_in a = LoopbackAddress(0);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

TestServer::TestServer(Options options) : options_(std::move(options)) {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("unipool-server-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  const std::string tokens = dir_ + "/tokens.yaml";
  using server::Role;
  const std::vector<std::tuple<std::string, Role, std::vector<std::string>>> who = {
      {"admin", Role::kAdmin, {}},
      {"viewer", Role::kReadOnly, {}},
      {"join", Role::kJoin, {}},
      {"tenant-a", Role::kTenant, {"team-a"}},
      {"tenant-b", Role::kTenant, {"team-b"}}};
  for (const auto& [name, role, queues] : who) {
    auto t = server::TokenFile::Create(tokens, name, role, queues);
    EXPECT_TRUE(t.ok()) << t.status().message();
    tokens_[name] = t.ok() ? *t : "";
  }
}

TestServer::~TestServer() {
  Stop();
  fs::remove_all(dir_);
}

void TestServer::Start() {
  const std::string address = dir_ + "/address";
  fs::remove(address);
  std::vector<std::string> args = {
      UNIPOOL_BINARY,   "server",
      "--cluster",      std::string(UNIPOOL_SOURCE_DIR) + "/" + options_.cluster,
      "--tokens",       dir_ + "/tokens.yaml",
      "--data",         dir_ + "/data",
      "--listen",       "127.0.0.1:0",
      "--address-file", address,
      "--log-level",    "warn"};
  if (options_.assume_nodes_up) args.push_back("--assume-nodes-up");
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  pid_ = fork();
  if (pid_ == 0) {
    const std::string log = dir_ + "/server.log";
    freopen(log.c_str(), "a", stderr);
    freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (int i = 0; i < 500 && !fs::exists(address); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(address)) << "server did not start; log:\n"
                                   << std::ifstream(dir_ + "/server.log").rdbuf();
  std::getline(std::ifstream(address), url_);
  for (const char* q : {"team-a", "team-b"}) {
    HttpReply r = Call("PUT", std::string("/v1/queues/") + q, "admin", "{}");
    ASSERT_EQ(r.status, 200) << r.body;
  }
}

void TestServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void TestServer::Kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

HttpReply TestServer::Call(const std::string& method, const std::string& path,
                           const std::string& who, const std::string& body,
                           const std::string& content_type) const {
  httplib::Client c(url_);
  c.set_connection_timeout(5, 0);
  c.enable_server_certificate_verification(false);  // the TLS test's self-signed certificate
  c.set_read_timeout(60, 0);
  httplib::Headers h;
  if (!who.empty())
    h.emplace("Authorization", "Bearer " + (tokens_.count(who) ? tokens_.at(who) : who));
  httplib::Result r = method == "GET"      ? c.Get(path, h)
                      : method == "DELETE" ? c.Delete(path, h)
                      : method == "PUT"    ? c.Put(path, h, body, content_type)
                                           : c.Post(path, h, body, content_type);
  if (!r) return HttpReply{};
  return HttpReply{r->status, r->body};
}

void TestServer::UseCli(const std::string& who) const {
  setenv("UNIPOOL_SERVER", url_.c_str(), 1);
  setenv("UNIPOOL_TOKEN", tokens_.at(who).c_str(), 1);
  setenv("UNIPOOL_CONFIG", "/dev/null", 1);
}

}  // namespace unipool::testing
