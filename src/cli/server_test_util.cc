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

RawReply RawHttp(int port, const std::string& bytes, int timeout_ms) {
  RawReply out;
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = LoopbackAddress(port);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return out;
  }
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string in;
  char buf[65536];
  size_t want = std::string::npos;  // bytes of a whole response, once known
  while (in.size() < want) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos && want == std::string::npos) {
      std::string head = in.substr(0, end);
      for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      const size_t cl = head.find("content-length:");
      if (cl != std::string::npos) want = end + 4 + std::stoull(head.substr(cl + 15));
    }
  }
  close(fd);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t end = in.find("\r\n\r\n");
  if (in.starts_with("HTTP/1.") && in.size() > 12 && end != std::string::npos) {
    out.status = std::atoi(in.substr(9, 3).c_str());
    out.head = in.substr(0, end);
    out.body = in.substr(end + 4);
  }
  return out;
}

int TestServer::port() const { return std::atoi(url_.substr(url_.rfind(':') + 1).c_str()); }

int64_t TestServer::RssKb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::atoll(line.substr(6).c_str());
  }
  return -1;
}

TestServer::TestServer(Options options) : options_(std::move(options)) {
  static int counter = 0;
  dir_ = fs::temp_directory_path() /
         ("unipool-server-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  const std::string tokens = dir_ + "/tokens.yaml";
  if (options_.share_tokens) {  // servers of one cluster (--ha) share one token file
    fs::copy_file(options_.share_tokens->dir() + "/tokens.yaml", tokens);
    tokens_ = options_.share_tokens->tokens_;
    return;
  }
  using server::Role;
  const std::vector<std::tuple<std::string, Role, std::vector<std::string>>> who = {
      {"admin", Role::kAdmin, {}},
      {"viewer", Role::kReadOnly, {}},
      {"join", Role::kJoin, {}},
      {"tenant-a", Role::kTenant, {"team-a"}},
      {"tenant-b", Role::kTenant, {"team-b"}}};
  for (const auto& [name, role, queues] : who) {
    server::Principal p{.name = name, .role = role};
    p.queues.insert(queues.begin(), queues.end());
    if (auto it = options_.run_as.find(name); it != options_.run_as.end()) p.run_as = it->second;
    auto t = server::TokenFile::Create(tokens, p);
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
      UNIPOOL_BINARY, "server", "--cluster",
      std::string(UNIPOOL_SOURCE_DIR) + "/" + options_.cluster, "--tokens", dir_ + "/tokens.yaml",
      "--data", options_.data_dir.empty() ? dir_ + "/data" : options_.data_dir,
      // A restart keeps the port: agents and clients find it again.
      "--listen", "127.0.0.1:" + std::to_string(url_.empty() ? 0 : port()), "--address-file",
      address, "--log-level", "warn", "--init"};
  if (options_.assume_nodes_up) args.push_back("--assume-nodes-up");
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  fflush(nullptr);  // else the child writes what this process buffered
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
    HttpReply r;
    for (int i = 0; i < 100; ++i) {  // --ha: until a leader is elected
      r = Call("PUT", std::string("/v1/queues/") + q, "admin", "{}");
      if (r.status != 503) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
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

int TestServer::WaitExit(int seconds) {
  for (int i = 0; i < seconds * 100 && pid_ > 0; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
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
  c.set_follow_location(true);  // a follower's redirect to the leader (--ha)
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

std::string SleepJob(const std::string& name) {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
         "}\nspec:\n  command: [sleep, '600']\n  gpus: 1\n  queue: team-a\n";
}

std::unique_ptr<store::LocalEtcd> StartEtcd(const std::string& dir, int n, std::string* endpoints) {
  fs::remove_all(dir);
  auto e = store::LocalEtcd::Start(dir, n);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return nullptr;
  endpoints->clear();
  for (const std::string& u : (*e)->endpoints()) *endpoints += (endpoints->empty() ? "" : ",") + u;
  return std::move(e).value();
}

int ReadyServer(const std::vector<std::string>& urls, int seconds, int except) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    for (size_t i = 0; i < urls.size(); ++i) {
      if (static_cast<int>(i) == except) continue;
      httplib::Client c(urls[i]);
      c.set_connection_timeout(0, 200000);
      auto r = c.Get("/readyz");
      if (r && r->status == 200) return static_cast<int>(i);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::set<int64_t> JobIds(const TestServer& s) {
  std::set<int64_t> ids;
  for (std::string cont;;) {
    HttpReply r =
        s.Call("GET", "/v1/jobs?limit=1000" + (cont.empty() ? "" : "&continue=" + cont), "admin");
    EXPECT_EQ(r.status, 200) << r.body;
    const nlohmann::json j = r.json();
    for (const nlohmann::json& item : j["items"]) ids.insert(item["id"].get<int64_t>());
    if (!j.contains("continue")) break;
    cont = j["continue"].get<std::string>();
  }
  return ids;
}

}  // namespace unipool::testing
