// The agent end-to-end tests' fixture: a server process, agent processes
// with virtual GPUs, and what the tests inject and watch: a proxy that cuts
// an agent's network, and a /proc monitor of a job's live copies.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"
#include "io/time_format.h"

namespace unipool::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

inline std::string ReadAll(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

// The uid of `user`, created (a system user and its group, no home) when
// missing; -1 if that fails. REQUIRES: root.
inline uid_t EnsureUser(const char* user) {
  if (const passwd* pw = getpwnam(user)) return pw->pw_uid;
  const std::string cmd = std::string("useradd --system --user-group --no-create-home ") +
                          "--home-dir /nonexistent --shell /usr/sbin/nologin " + user;
  if (std::system(cmd.c_str()) != 0) return static_cast<uid_t>(-1);
  const passwd* pw = getpwnam(user);
  return pw == nullptr ? static_cast<uid_t>(-1) : pw->pw_uid;
}

inline bool Alive(pid_t pid) {
  const std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  return !stat.empty() && stat.find(") Z ") == std::string::npos;
}

// Whether `pid` is gone within `seconds`: a job is Succeeded when the first
// node's run ends well (as a PyTorchJob's master), and the other nodes' runs
// are stopped after that, so their processes end shortly after the state.
inline bool GoneWithin(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (Alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// A TCP forwarder that can cut every connection: the agent's network.
class Proxy {
 public:
  explicit Proxy(int target) : target_(target) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    port_ = BindLoopback(listen_fd_);
    listen(listen_fd_, 64);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~Proxy() {
    done_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    Cut(true);
    acceptor_.join();
    for (auto& t : pumps_) t.join();
  }
  int port() const { return port_; }
  // Cut: every connection closes and new ones are closed at once.
  void Cut(bool cut) {
    cut_ = cut;
    if (!cut) return;
    std::lock_guard lock(mu_);
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
  }

 private:
  void Accept() {
    while (!done_) {
      const int c = accept(listen_fd_, nullptr, nullptr);
      if (c < 0) continue;
      if (cut_) {
        close(c);
        continue;
      }
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a = LoopbackAddress(target_);
      if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(c);
        close(s);
        continue;
      }
      std::lock_guard lock(mu_);
      fds_.push_back(c);
      fds_.push_back(s);
      pumps_.emplace_back([c, s] { Pump(c, s); });
      pumps_.emplace_back([c, s] { Pump(s, c); });
    }
  }
  static void Pump(int from, int to) {
    char buf[16384];
    while (true) {
      const ssize_t n = read(from, buf, sizeof buf);
      if (n <= 0 || write(to, buf, n) != n) break;
    }
    shutdown(to, SHUT_RDWR);
  }
  int target_, port_ = 0, listen_fd_ = -1;
  std::atomic<bool> cut_{false}, done_{false};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

class AgentE2eTest : public ::testing::Test {
 protected:
  AgentE2eTest() : AgentE2eTest({}, {}) {}
  // Extra arguments for the server and for every agent.
  // `run_as`: the tokens' runAs (TestServer::Options).
  // `cluster`, `gpus`: the cluster file and each agent's GPUs.
  // `lease`: the nodes' lease (the server's and every agent's).
  AgentE2eTest(const std::vector<std::string>& server_extra, std::vector<std::string> agent_extra,
               std::map<std::string, std::string> run_as = {},
               const std::string& cluster = "testdata/clusters/local-3x2.yaml",
               std::string gpus = "2", std::string lease = "3s")
      : server_(TestServer::Options{
            .cluster = cluster,
            .assume_nodes_up = false,
            .extra_args = Concat({"--node-lease", lease, "--min-runtime", "0s"}, server_extra),
            .run_as = std::move(run_as)}),
        agent_extra_(std::move(agent_extra)),
        gpus_(std::move(gpus)),
        lease_(std::move(lease)) {}
  static std::vector<std::string> Concat(std::vector<std::string> a,
                                         const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  ~AgentE2eTest() override {
    for (auto& [node, pid] : agents_) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
  void SetUp() override {
    server_.Start();
    // The trainer's queue: a short checkpoint grace.
    ASSERT_EQ(server_.Call("PUT", "/v1/queues/default", "admin", "{\"graceSeconds\": 10}").status,
              200);
    ckpt_ = server_.dir() + "/checkpoints";
  }

  // Starts `unipool agent` for `node`, reaching the server at `url`.
  void StartAgent(const std::string& node, std::string url = "",
                  const std::string& health_check = "") {
    if (url.empty()) url = server_.url();
    const std::string work = server_.dir() + "/agents/" + node;
    fs::create_directories(work);
    const pid_t pid = fork();
    if (pid == 0) {
      freopen((work + ".log").c_str(), "a", stderr);
      freopen("/dev/null", "w", stdout);
      // The join token in a file (owner-only), as an operator would give
      // it: on the command line every local user could read it.
      const std::string join = work + ".join-token";
      std::ofstream(join) << server_.token("join") << "\n";
      chmod(join.c_str(), 0600);
      std::vector<std::string> args = {UNIPOOL_BINARY,
                                       "agent",
                                       "--server",
                                       url,
                                       "--join-token-file",
                                       join,
                                       "--node",
                                       node,
                                       "--gpus",
                                       gpus_,
                                       "--work-dir",
                                       work,
                                       "--checkpoint-root",
                                       ckpt_,
                                       "--heartbeat",
                                       "300ms",
                                       "--lease",
                                       lease_,
                                       "--health-interval",
                                       "500ms",
                                       "--health-check",
                                       health_check.empty() ? "true" : health_check};
      args.insert(args.end(), agent_extra_.begin(), agent_extra_.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    agents_[node] = pid;
  }
  void WaitNodesUp(int n, int seconds = 5) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (server_.Call("GET", "/v1/summary", "admin").json()["nodes"]["up"] == n) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "nodes not up: " << server_.Call("GET", "/v1/nodes", "admin").body;
  }
  int64_t SubmitTrainer(const std::string& name, int gpus, const std::string& args,
                        const std::string& extra = "") {
    const std::string yaml = "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
                             "}\nspec:\n  command: [python3, examples/jobs/trainer.py]\n"
                             "  args: [" +
                             args +
                             "]\n  workingDir: " UNIPOOL_SOURCE_DIR
                             "\n"
                             "  gpus: " +
                             std::to_string(gpus) +
                             "\n  gpusPerNode: 2\n"
                             "  restartPolicy: {maxRestarts: 3, backoff: 1s}\n" +
                             extra;
    return SubmitYaml(yaml);
  }
  Json Job(int64_t id) {
    return server_.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
  }
  // Waits until `pred(job)` holds; fails after `seconds`.
  template <class Pred>
  Json WaitFor(int64_t id, Pred pred, int seconds, const std::string& what) {
    Json j;
    for (int i = 0; i < seconds * 20; ++i) {
      j = Job(id);
      if (pred(j)) return j;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "job " << id << " never " << what << ": " << j.dump();
    return j;
  }
  std::string Ckpt(int64_t id) { return ckpt_ + "/job-" + std::to_string(id); }
  // Submits a job of `yaml`; returns its id (-1 and a failure if refused).
  int64_t SubmitYaml(const std::string& yaml) {
    HttpReply r = server_.Call("POST", "/v1/jobs", "admin", yaml, "application/yaml");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
  }
  // The end of each agent's log and the job's events, for a failure's report.
  void DumpLogs(int64_t id) {
    for (const char* n : {"n0", "n1", "n2"}) {
      const std::string log = ReadAll(server_.dir() + "/agents/" + n + ".log");
      std::cerr << "--- agent " << n << "\n"
                << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    }
    std::cerr << server_.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").body
              << "\n";
  }
  // The job's first event of `type`, waited for up to `seconds`; null (and
  // a failure) when none came.
  Json WaitEvent(int64_t id, const std::string& type, int seconds) {
    const std::string path = "/v1/jobs/" + std::to_string(id) + "/events";
    for (int i = 0; i < seconds * 20; ++i) {
      // The reply is held: a range-for over a member of a temporary
      // would read freed memory (the temporary dies before the loop).
      const Json events = server_.Call("GET", path, "admin").json();
      for (const Json& e : events["items"]) {
        if (e["type"] == type) return e;
      }
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "job " << id << ": no " << type
                  << " event: " << server_.Call("GET", path, "admin").body;
    return Json();
  }
  std::vector<std::string> EventTypes(int64_t id) {
    std::vector<std::string> out;
    Json ev = server_.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").json();
    for (const Json& e : ev["items"]) out.push_back(e["type"]);
    return out;
  }

  TestServer server_;
  std::vector<std::string> agent_extra_;
  std::string gpus_;
  std::string lease_;
  std::string ckpt_;
  std::map<std::string, pid_t> agents_;
};

// How many processes run `sleep SECONDS` (a marker value no other test uses).
inline int CountSleepers(const std::string& seconds) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "cmdline");
    std::string cmd;
    std::getline(in, cmd, '\0');
    std::string arg;
    std::getline(in, arg, '\0');
    if (cmd == "sleep" && arg == seconds) ++n;
  }
  return n;
}

// Waits (up to 5 s) until `CountSleepers(seconds)` is `want`; returns the
// last count.
inline int WaitSleepers(const std::string& seconds, int want) {
  int n = -1;
  for (int i = 0; i < 200 && n != want; ++i) {
    n = CountSleepers(seconds);
    if (n != want) std::this_thread::sleep_for(25ms);
  }
  return n;
}

// Samples /proc ten times a second: for each rank of `job` (the one whose
// checkpoint directory is `ckpt`: tests running beside this one have jobs
// of the same id), the runs (generations) that have a live process. Two at
// once is a job running twice.
class CopyMonitor {
 public:
  CopyMonitor(int64_t job, std::string ckpt) : job_(std::to_string(job)), ckpt_(std::move(ckpt)) {
    thread_ = std::thread([this] {
      while (!done_) {
        Sample();
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  ~CopyMonitor() { Stop(); }
  void Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int samples() const { return samples_; }
  int overlaps() const { return overlaps_; }
  std::set<std::string> generations() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void Sample() {
    std::map<std::string, std::set<std::string>> runs;  // rank -> generations
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/proc", ec)) {
      std::string env = ReadAll((e.path() / "environ").string());
      std::map<std::string, std::string> vars;
      for (size_t at = 0; at < env.size();) {
        const size_t end = env.find('\0', at);
        const std::string kv = env.substr(at, end == std::string::npos ? end : end - at);
        const size_t eq = kv.find('=');
        if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
        if (end == std::string::npos) break;
        at = end + 1;
      }
      if (vars["UNIPOOL_JOB_ID"] != job_ || vars["UNIPOOL_CHECKPOINT_DIR"] != ckpt_) continue;
      runs[vars["RANK"]].insert(vars["UNIPOOL_RESTART_COUNT"]);
    }
    std::lock_guard lock(mu_);
    ++samples_;
    for (const auto& [rank, gens] : runs) {
      seen_.insert(gens.begin(), gens.end());
      if (gens.size() > 1) {
        ++overlaps_;
        break;
      }
    }
  }
  const std::string job_, ckpt_;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::set<std::string> seen_;
  std::atomic<int> samples_{0}, overlaps_{0};
  std::thread thread_;
};

}  // namespace unipool::testing
