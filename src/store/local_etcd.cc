#include "store/local_etcd.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "store/etcd_client.h"

namespace unipool::store {
namespace {

namespace fs = std::filesystem;

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

namespace {

std::string Loopback(int port) { return "http://127.0.0.1:" + std::to_string(port); }

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > bytes) s = s.substr(s.size() - bytes);
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<LocalEtcd>> LocalEtcd::Start(const std::string& dir, int members,
                                                    const std::string& binary,
                                                    std::vector<std::string> flags) {
  std::unique_ptr<LocalEtcd> e(new LocalEtcd());
  e->dir_ = dir;
  e->binary_ = binary;
  e->flags_ = std::move(flags);
  e->token_ = "unipool-" + std::to_string(getpid()) + "-" +
              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("etcd: cannot create " + dir + ": " + ec.message());
  // The ports of a directory used before (its members' data names them);
  // else fresh ones, kept for the next start.
  const std::string ports = dir + "/ports";
  std::ifstream known(ports);
  for (int c = 0, p = 0; known >> c >> p;) {
    e->client_ports_.push_back(c);
    e->peer_ports_.push_back(p);
  }
  if (static_cast<int>(e->client_ports_.size()) != members) {
    e->client_ports_.clear();
    e->peer_ports_.clear();
    std::ofstream out(ports, std::ios::trunc);
    for (int i = 0; i < members; ++i) {
      e->client_ports_.push_back(FreeLoopbackPort());
      e->peer_ports_.push_back(FreeLoopbackPort());
      out << e->client_ports_.back() << " " << e->peer_ports_.back() << "\n";
    }
  }
  for (int i = 0; i < members; ++i) {
    e->endpoints_.push_back(Loopback(e->client_ports_[i]));
    e->initial_cluster_ +=
        (i ? "," : "") + ("m" + std::to_string(i)) + "=" + Loopback(e->peer_ports_[i]);
  }
  e->pids_.assign(members, 0);
  for (int i = 0; i < members; ++i) UNIPOOL_RETURN_IF_ERROR(e->Spawn(i));
  UNIPOOL_RETURN_IF_ERROR(e->WaitForLeader(30));
  return e;
}

LocalEtcd::~LocalEtcd() {
  for (pid_t p : pids_) {
    if (p <= 0) continue;
    kill(p, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (pid_t& p : pids_) {
    while (p > 0 && waitpid(p, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    p = 0;
  }
}

Status LocalEtcd::Spawn(int i) {
  const std::string name = "m" + std::to_string(i);
  const std::string log = dir_ + "/" + name + ".log";
  std::vector<std::string> args = {binary_,
                                   "--name=" + name,
                                   "--data-dir=" + dir_ + "/" + name,
                                   "--listen-client-urls=" + endpoints_[i],
                                   "--advertise-client-urls=" + endpoints_[i],
                                   "--listen-peer-urls=" + Loopback(peer_ports_[i]),
                                   "--initial-advertise-peer-urls=" + Loopback(peer_ports_[i]),
                                   "--initial-cluster=" + initial_cluster_,
                                   "--initial-cluster-state=new",
                                   "--initial-cluster-token=" + token_,
                                   "--heartbeat-interval=100",
                                   "--election-timeout=1000",
                                   "--max-txn-ops=10000",
                                   "--logger=zap",
                                   "--log-outputs=stderr"};
  args.insert(args.end(), flags_.begin(), flags_.end());
  const pid_t pid = fork();
  if (pid < 0) return Unavailable("etcd: fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setpgid(0, 0);  // a terminal's Ctrl-C reaches the owner, which stops it
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  pids_[i] = pid;
  return Status::Ok();
}

Status LocalEtcd::WaitForLeader(int seconds) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] == 0) continue;
      int status = 0;
      if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        const std::string log = dir_ + "/m" + std::to_string(i) + ".log";
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
          return FailedPrecondition("etcd: cannot run " + binary_ +
                                    " (install Debian's etcd-server)");
        }
        return Unavailable("etcd member m" + std::to_string(i) + " exited: " + Tail(log, 600));
      }
      EtcdOptions o;
      o.endpoints = {endpoints_[i]};
      o.timeout = std::chrono::milliseconds(500);
      Result<EtcdClient::Json> st =
          EtcdClient(o).Call("maintenance/status", EtcdClient::Json::object());
      // (member ids are 64-bit unsigned, written as strings; "0" or none: no leader)
      bool led = false;
      if (st.ok()) {
        const auto it = st->find("leader");
        led = it != st->end() && *it != "0" && *it != 0;
      }
      all = all && led;
    }
    if (all) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Unavailable("etcd: no leader within " + std::to_string(seconds) + " s (logs in " + dir_ +
                     ")");
}

void LocalEtcd::Kill(int i) {
  if (pids_[i] <= 0) return;
  kill(pids_[i], SIGKILL);
  waitpid(pids_[i], nullptr, 0);
  pids_[i] = 0;
}

Status LocalEtcd::Restart(int i) {
  if (pids_[i] > 0) return Status::Ok();
  return Spawn(i);
}

}  // namespace unipool::store
