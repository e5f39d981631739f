// `unipool up`: a local cluster in one command, the default a new user
// starts with: a control plane (one server on SQLite in this process, or
// with --ha three etcd members and three servers that elect a leader) and
// local agents with virtual GPUs.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/daemon.h"
#include "core/topology/topology.h"
#include "io/cluster_reader.h"
#include "io/yaml_fields.h"
#include "server/auth.h"
#include "server/server.h"
#include "store/local_etcd.h"

namespace unipool::cli {
namespace {

namespace fs = std::filesystem;

struct UpFlags {
  int nodes = 4;
  int gpus = 8;
  std::string data = "unipool-up";
  int port = 8460;
  std::string run;
  std::string lease;  // "": 10s, or with --ha 30s (a failover must not fence the jobs)
  std::string min_runtime = "5m";
  bool ha = false;
};

Status WriteFile(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) return Unavailable("cannot write " + path);
  chmod(path.c_str(), mode);
  return Status::Ok();
}

// The local cluster: `nodes` nodes of `gpus` virtual GPUs under one switch.
std::string LocalCluster(int nodes, int gpus) {
  std::string s =
      "# Written by `unipool up`: local nodes with virtual GPUs.\n"
      "apiVersion: unipool/v1\nkind: Cluster\nmetadata:\n  name: local\nspec:\n  tiers:\n"
      "    - {name: node, bandwidthGbps: 3600, latencyUs: 1}\n"
      "    - {name: host, bandwidthGbps: 100, latencyUs: 5}\n"
      "  nodes:\n";
  for (int i = 0; i < nodes; ++i) {
    s += "    - {name: up-" + std::to_string(i) + ", gpus: " + std::to_string(gpus) +
         ", gpuModel: H100-SXM}\n";
  }
  return s;
}

// Tokens of the local cluster, made once and kept in the data directory.
Status LocalTokens(const std::string& data, std::string* admin, std::string* join) {
  const std::string file = data + "/tokens.yaml";
  *admin = agent::ReadTokenFile(data + "/admin.token");
  *join = agent::ReadTokenFile(data + "/join.token");
  if (!admin->empty() && !join->empty() && fs::exists(file)) return Status::Ok();
  fs::remove(file);
  Result<std::string> a =
      server::TokenFile::Create(file, {.name = "admin", .role = server::Role::kAdmin});
  if (!a.ok()) return a.status();
  Result<std::string> j =
      server::TokenFile::Create(file, {.name = "agents", .role = server::Role::kJoin});
  if (!j.ok()) return j.status();
  *admin = *a;
  *join = *j;
  UNIPOOL_RETURN_IF_ERROR(WriteFile(data + "/admin.token", *admin + "\n", 0600));
  return WriteFile(data + "/join.token", *join + "\n", 0600);
}

// Runs `unipool ARGS...` (this binary) as a child that dies with `up`
// (SIGTERM: a clean stop), its stderr appended to `log`.
pid_t SpawnChild(std::vector<std::string> args, const std::string& log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  sigset_t set;  // the child: unblock the signals the parent waits for
  sigemptyset(&set);
  pthread_sigmask(SIG_SETMASK, &set, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  freopen(log.c_str(), "a", stderr);
  freopen("/dev/null", "w", stdout);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

pid_t SpawnAgent(const std::string& url, const std::string& data, int i, int gpus,
                 const std::string& lease) {
  const std::string node = "up-" + std::to_string(i);
  const std::string work = data + "/agents/" + node;
  fs::create_directories(work);
  return SpawnChild({"unipool",
                     "agent",
                     "--server",
                     url,
                     "--join-token-file",
                     data + "/join.token",
                     "--node",
                     node,
                     "--gpus",
                     std::to_string(gpus),
                     "--work-dir",
                     work,
                     "--checkpoint-root",
                     data + "/checkpoints",
                     "--lease",
                     lease,
                     "--heartbeat",
                     "1s",
                     "--container-runtime",
                     "host"},
                    data + "/agents/" + node + ".log");
}

// Submits `file` and follows the job until it ends, printing its progress.
int RunAndFollow(const Client& client, const std::string& file) {
  Result<std::string> text = io::ReadFile(file);
  if (!text.ok()) {
    std::cerr << "error: " << text.status().message() << "\n";
    return kExitBadInput;
  }
  Result<Json> sub = client.Call("POST", "/v1/jobs", *text, "application/yaml");
  if (!sub.ok()) {
    std::cerr << "error: " << file << ": " << sub.status().message() << "\n";
    return ExitCodeFor(sub.status());
  }
  const std::string id = std::to_string((*sub)["id"].get<int64_t>());
  std::cout << "job/" << id << " submitted (" << (*sub)["name"].get<std::string>() << ", "
            << (*sub)["spec"]["gpus"] << " GPUs)" << std::endl;
  int64_t events_seen = 0, last_step = -1;
  while (true) {
    Result<Json> j = client.Call("GET", "/v1/jobs/" + id);
    Result<Json> ev = client.Call("GET", "/v1/jobs/" + id + "/events");
    if (!j.ok() || !ev.ok()) {
      std::cerr << "error: " << (j.ok() ? ev.status() : j.status()).message() << "\n";
      return kExitFailed;
    }
    // Progress first: the job's last report comes before its end.
    const Json& p = (*j)["progress"];
    if (p.is_object() && p.contains("step") && p["step"].get<int64_t>() != last_step) {
      last_step = p["step"].get<int64_t>();
      std::cout << "  step " << last_step;
      if (p.contains("loss")) std::cout << "  loss " << p["loss"];
      if (p.contains("throughput")) std::cout << "  throughput " << p["throughput"];
      std::cout << std::endl;
    }
    const Json& items = (*ev)["items"];
    for (; events_seen < static_cast<int64_t>(items.size()); ++events_seen) {
      const Json& e = items[events_seen];
      std::cout << "  " << e["type"].get<std::string>() << ": " << e["message"].get<std::string>()
                << std::endl;
    }
    const std::string state = (*j)["state"];
    if (state == "Succeeded") return kExitOk;
    if (state == "Failed" || state == "Cancelled") return kExitFailed;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// What both kinds of local cluster do once a control plane serves at
// `urls`: start the agents, wait for them, then run --run or wait for a
// stop. `stop` ends the control plane.
// The agents' pids go to `agents` (the caller stops them at the end).
int ServeLocalCluster(const UpFlags& f, const std::string& data, const std::string& urls,
                      const std::string& admin, const std::function<void()>& stop,
                      std::vector<pid_t>* agents) {
  for (int i = 0; i < f.nodes; ++i) agents->push_back(SpawnAgent(urls, data, i, f.gpus, f.lease));
  std::cout << "unipool is up: " << f.nodes << " nodes x " << f.gpus << " virtual GPUs at " << urls
            << "\n  data:   " << f.data << " (store, agent logs, checkpoints)\n"
            << "  export UNIPOOL_SERVER=" << urls << "\n"
            << "  export UNIPOOL_TOKEN=$(cat " << f.data << "/admin.token)\n";
  int code = kExitOk;
  ClientConfig cc{urls, admin, ""};
  Client client(cc);
  for (int i = 0; i < 300; ++i) {  // agents join within a second or two
    Result<Json> sum = client.Call("GET", "/v1/summary");
    if (sum.ok() && (*sum)["nodes"]["up"].get<int>() == f.nodes) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!f.run.empty()) {
    code = RunAndFollow(client, f.run);
    std::cout << (code == kExitOk ? "job succeeded; stopping the local cluster"
                                  : "job did not succeed; stopping the local cluster")
              << std::endl;
    stop();
  } else {
    std::cout << "next:\n  unipool submit -f examples/jobs/train.yaml\n  unipool get jobs -w\n"
                 "  unipool logs 1 -f\nCtrl-C stops everything.\n"
              << std::flush;
  }
  return code;
}

void StopAll(std::vector<pid_t>& pids) {
  for (pid_t pid : pids) kill(pid, SIGTERM);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  pids.clear();
}

// The control plane in this process: one server on SQLite.
int RunUpSingle(const UpFlags& f, const std::string& data, const std::string& admin, Duration lease,
                Duration min_runtime) {
  server::Logger log(stderr, server::LogLevel::kWarn);
  server::ServerOptions so;
  so.cluster_path = data + "/cluster.yaml";
  so.tokens_path = data + "/tokens.yaml";
  so.data_dir = data + "/store";
  so.history_path = data + "/store/history.db";
  so.init = true;  // up makes its own data directory: the first start creates the store
  so.port = f.port;
  so.node_lease = lease;
  so.min_runtime = min_runtime;
  Result<std::unique_ptr<server::Server>> s = server::Server::Open(so, log);
  if (!s.ok()) {
    std::cerr << "error: " << s.status().ToString() << "\n";
    return kExitFailed;
  }
  Result<int> port = (*s)->Bind();
  if (!port.ok()) {
    std::cerr << "error: " << port.status().message() << " (try --port 0)\n";
    return kExitFailed;
  }
  server::Server& srv = **s;
  OnStopSignal([&srv] { srv.Stop(); });
  std::thread serving([&] { (void)srv.Run(); });
  std::vector<pid_t> agents;
  const int code = ServeLocalCluster(
      f, data, srv.url(), admin, [&srv] { srv.Stop(); }, &agents);
  serving.join();
  StopAll(agents);
  return code;
}

// --ha: three etcd members and three `unipool server --ha` processes on
// loopback. `up` supervises the servers: one that exits (a leader that
// lost its term, or one killed to try a failover) is started again and
// follows.
class LocalHaControlPlane {
 public:
  LocalHaControlPlane(const UpFlags& f, std::string data) : f_(f), data_(std::move(data)) {}
  ~LocalHaControlPlane() { Stop(); }

  Status Start() {
    auto etcd = store::LocalEtcd::Start(data_ + "/etcd", 3);
    if (!etcd.ok()) return etcd.status();
    etcd_ = std::move(etcd).value();
    for (const std::string& u : etcd_->endpoints()) {
      endpoints_ += (endpoints_.empty() ? "" : ",") + u;
    }
    fs::create_directories(data_ + "/servers");
    for (int i = 0; i < 3; ++i) {
      ports_.push_back(f_.port > 0 ? f_.port + i : store::FreeLoopbackPort());
      urls_ += (urls_.empty() ? "" : ",") + ("http://127.0.0.1:" + std::to_string(ports_[i]));
      pids_.push_back(Spawn(i));
    }
    supervisor_ = std::thread([this] { Supervise(); });
    return Status::Ok();
  }
  const std::string& urls() const { return urls_; }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      for (pid_t p : pids_) kill(p, SIGTERM);
    }
    if (supervisor_.joinable()) supervisor_.join();
    etcd_.reset();
  }

 private:
  pid_t Spawn(int i) {
    const std::string name = "s" + std::to_string(i);
    std::vector<std::string> args = {"unipool",
                                     "server",
                                     "--cluster",
                                     data_ + "/cluster.yaml",
                                     "--tokens",
                                     data_ + "/tokens.yaml",
                                     "--store",
                                     "etcd",
                                     "--etcd-endpoints",
                                     endpoints_,
                                     "--etcd-max-txn-ops",
                                     "10000",
                                     "--history",  // one file: only the leader writes
                                     data_ + "/servers/history.db",
                                     "--ha",
                                     "--init",
                                     "--listen",
                                     "127.0.0.1:" + std::to_string(ports_[i]),
                                     "--node-lease",
                                     f_.lease,
                                     "--min-runtime",
                                     f_.min_runtime,
                                     "--log-level",
                                     "warn"};
    return SpawnChild(std::move(args), data_ + "/servers/" + name + ".log");
  }
  // Restarts a server that exited, a second later; at Stop, waits for all.
  void Supervise() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      std::lock_guard lock(mu_);
      bool left = false;
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] > 0 && waitpid(pids_[i], nullptr, WNOHANG) == pids_[i]) {
          pids_[i] = stopping_ ? 0 : Spawn(static_cast<int>(i));
        }
        left = left || pids_[i] > 0;
      }
      if (stopping_ && !left) return;
    }
  }

  const UpFlags& f_;
  const std::string data_;
  std::unique_ptr<store::LocalEtcd> etcd_;
  std::string endpoints_, urls_;
  std::vector<int> ports_;
  std::mutex mu_;
  std::vector<pid_t> pids_;
  bool stopping_ = false;
  std::thread supervisor_;
};

int RunUpHa(const UpFlags& f, const std::string& data, const std::string& admin) {
  LocalHaControlPlane cp(f, data);
  if (Status st = cp.Start(); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitFailed;
  }
  std::mutex mu;
  std::condition_variable stopped_cv;
  bool stopped = false;
  auto stop = [&] {
    {
      std::lock_guard lock(mu);
      stopped = true;
    }
    stopped_cv.notify_all();
    cp.Stop();  // a --run that follows its job sees the servers go
  };
  OnStopSignal(stop);
  std::cout << "control plane: 3 etcd members (" << f.data << "/etcd) and 3 servers with --ha ("
            << f.data << "/servers/s*.log); kill one to watch another take over" << std::endl;
  std::vector<pid_t> agents;
  const int code = ServeLocalCluster(f, data, cp.urls(), admin, stop, &agents);
  {
    std::unique_lock lock(mu);
    stopped_cv.wait(lock, [&] { return stopped; });
  }
  StopAll(agents);  // before the servers: agents stopping report to them
  cp.Stop();
  return code;
}

int RunUp(UpFlags& f) {
  BlockStopSignals();  // before the server starts its threads
  Duration lease, min_runtime;
  if (f.lease.empty()) f.lease = f.ha ? "30s" : "10s";
  if (!ParsePositiveDuration("--lease", f.lease, &lease) ||
      !io::ParseDuration(f.min_runtime, &min_runtime)) {
    return kExitBadInput;
  }
  std::error_code ec;
  fs::create_directories(f.data, ec);
  if (ec) {
    std::cerr << "error: --data " << f.data << ": " << ec.message() << "\n";
    return kExitBadInput;
  }
  const std::string data = fs::absolute(f.data).string();
  std::string admin, join;
  if (Status st = WriteFile(data + "/cluster.yaml", LocalCluster(f.nodes, f.gpus));
      !st.ok() || !(st = LocalTokens(data, &admin, &join)).ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitFailed;
  }
  return f.ha ? RunUpHa(f, data, admin) : RunUpSingle(f, data, admin, lease, min_runtime);
}

}  // namespace

void AddUpCommand(CLI::App& app, int& exit_code) {
  auto u = std::make_shared<UpFlags>();
  CLI::App* cmd = app.add_subcommand(
      "up", "Start a local cluster: a server and agents with virtual GPUs (Ctrl-C stops it)");
  cmd->add_option("--nodes", u->nodes, "local agents")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--gpus", u->gpus, "virtual GPUs per node")
      ->check(CLI::Range(1, kMaxGpusPerNode))
      ->capture_default_str();
  cmd->add_option("--data", u->data, "data directory (store, logs, checkpoints, tokens)")
      ->capture_default_str();
  cmd->add_option("--port", u->port, "server port (0: any free one)")->capture_default_str();
  cmd->add_option("--run", u->run, "submit this job, show its progress, stop when it ends");
  cmd->add_option("--lease", u->lease,
                  "node lease: how fast a lost agent is noticed (default 10s; with --ha 30s, "
                  "which outlasts a leader failover)");
  cmd->add_option("--min-runtime", u->min_runtime, "before a job may be preempted")
      ->capture_default_str();
  cmd->add_flag("--ha", u->ha,
                "a highly available control plane: 3 etcd members and 3 servers electing a "
                "leader (kill one to try a failover)");
  cmd->callback([u, &exit_code] { exit_code = RunUp(*u); });
}

}  // namespace unipool::cli
