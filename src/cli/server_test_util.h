// TestServer: a real `unipool server` process on a free loopback port with
// its own data directory and token file, for end-to-end tests. Tokens:
// admin, viewer (read-only), join, tenant-a (queue team-a), tenant-b (queue
// team-b); queues team-a and team-b exist once Start() returns.
#pragma once

#include <httplib.h>
#include <netinet/in.h>
#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "store/local_etcd.h"

namespace unipool::testing {

struct HttpReply {
  int status = 0;  // 0: no connection
  std::string body;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

// Sends `bytes` as they are on a new loopback connection to `port` and reads
// until the server closes it, a whole response is in, or `timeout_ms`.
// status 0: no answer (closed or timed out). For requests that a normal
// client would refuse to send (invalid UTF-8, broken framing).
struct RawReply {
  int status = 0;
  std::string head, body;
  double seconds = 0;
};
RawReply RawHttp(int port, const std::string& bytes, int timeout_ms = 5000);

// 127.0.0.1:port as a socket address.
struct sockaddr_in LoopbackAddress(int port);
// Binds socket `fd` to a free loopback port and returns the port.
int BindLoopback(int fd);

class TestServer {
 public:
  struct Options {
    std::string cluster = "examples/clusters/devbox.yaml";
    bool assume_nodes_up = true;
    std::vector<std::string> extra_args;
    std::string data_dir;                       // "" = dir()/data
    std::map<std::string, std::string> run_as;  // token name -> its runAs
    const TestServer* share_tokens = nullptr;   // this server's token file and tokens
  };
  explicit TestServer(Options options);
  TestServer() : TestServer(Options{}) {}
  ~TestServer();

  // Starts the process and waits until it serves (fails the test if not).
  void Start();
  // SIGTERM and wait.
  void Stop();
  // SIGKILL and wait: nothing is flushed.
  void Kill9();
  // Waits up to `seconds` for the process to exit by itself; its wait
  // status, or -1 if it still runs (then it is left running).
  int WaitExit(int seconds);

  const std::string& url() const { return url_; }
  int port() const;
  pid_t pid() const { return pid_; }
  // The server process's resident memory (VmRSS), in KiB.
  int64_t RssKb() const;
  const std::string& dir() const { return dir_; }
  const std::string& token(const std::string& who) const { return tokens_.at(who); }

  HttpReply Call(const std::string& method, const std::string& path, const std::string& who,
                 const std::string& body = "",
                 const std::string& content_type = "application/json") const;
  // Environment for CLI child processes: UNIPOOL_SERVER and UNIPOOL_TOKEN.
  void UseCli(const std::string& who) const;

 private:
  Options options_;
  std::string dir_;
  std::string url_;
  std::map<std::string, std::string> tokens_;
  pid_t pid_ = -1;
};

// A one-GPU job that sleeps, in team-a: for tests that count jobs.
std::string SleepJob(const std::string& name);

// `n` etcd members for servers on --store etcd, in a fresh directory `dir`
// (removed by the owner); `endpoints` gets their URLs, comma-separated.
// Fails the test when etcd does not start.
std::unique_ptr<store::LocalEtcd> StartEtcd(const std::string& dir, int n, std::string* endpoints);

// The index in `urls` of the server whose /readyz is 200 (the --ha
// leader), not `except`; -1 when none is within `seconds`.
int ReadyServer(const std::vector<std::string>& urls, int seconds, int except = -1);

// The ids of every job the server lists (all pages).
std::set<int64_t> JobIds(const TestServer& s);

}  // namespace unipool::testing
