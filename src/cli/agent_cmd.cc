// `unipool agent` (the node agent), `unipool logs` and `unipool up` (a
// server and local agents with virtual GPUs in one command).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "agent/agent.h"
#include "agent/watchdog.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/daemon.h"
#include "io/cluster_reader.h"
#include "io/yaml_fields.h"
#include "server/server.h"

namespace unipool::cli {
namespace {

namespace fs = std::filesystem;

bool ParseDur(const std::string& flag, const std::string& v, Duration* out) {
  if (io::ParseDuration(v, out) && out->value() > 0) return true;
  std::cerr << "error: " << flag << ": expected a duration like 5s, got '" << v << "'\n";
  return false;
}

std::string ReadToken(const std::string& path) { return agent::ReadTokenFile(path); }

// ---- agent -------------------------------------------------------------------

struct AgentFlags {
  agent::AgentOptions opt;
  std::string gpus = "auto";
  std::string join_token_file;
  std::string heartbeat = "5s", lease = "30s", health_interval = "60s", outage_grace = "0s";
  std::string log_level = "info";
  int64_t log_max_mb = 64, log_budget_mb = 8192;
  std::string log_retention = "7d";
};

int RunAgent(AgentFlags& f) {
  BlockStopSignals();  // before the agent starts its threads
  server::Logger log;
  if (!SetLogLevel(log, f.log_level)) return kExitBadInput;
  if (f.gpus != "auto") {
    int64_t n = 0;
    if (!io::ParseInt64(f.gpus, &n) || n < 1 || n > 64) {
      std::cerr << "error: --gpus: expected auto or a number of GPUs from 1 to 64\n";
      return kExitBadInput;
    }
    f.opt.gpus = static_cast<int>(n);
  }
  if (!ParseDur("--heartbeat", f.heartbeat, &f.opt.heartbeat) ||
      !ParseDur("--lease", f.lease, &f.opt.lease) ||
      !ParseDur("--health-interval", f.health_interval, &f.opt.health_interval)) {
    return kExitBadInput;
  }
  if (!ParseDur("--log-retention", f.log_retention, &f.opt.log_retention)) return kExitBadInput;
  if (f.log_max_mb < 1 || f.log_budget_mb < 1 || f.opt.logs.files < 1) {
    std::cerr << "error: --log-max-mb, --log-files and --log-budget-mb must be at least 1\n";
    return kExitBadInput;
  }
  f.opt.logs.max_bytes = f.log_max_mb << 20;
  f.opt.log_budget_bytes = f.log_budget_mb << 20;
  if (!io::ParseDuration(f.outage_grace, &f.opt.outage_grace) || f.opt.outage_grace.value() < 0) {
    std::cerr << "error: --outage-grace: expected a duration like 5m (0s: off), got '"
              << f.outage_grace << "'\n";
    return kExitBadInput;
  }
  if (f.opt.join_token.empty() && !f.join_token_file.empty()) {
    f.opt.join_token = ReadToken(f.join_token_file);
  }
  if (f.opt.join_token.empty() && std::getenv("UNIPOOL_JOIN_TOKEN")) {
    f.opt.join_token = std::getenv("UNIPOOL_JOIN_TOKEN");
  }
  if (f.opt.join_token.empty()) {
    std::cerr << "error: no join token: give --join-token, --join-token-file or "
                 "$UNIPOOL_JOIN_TOKEN\n";
    return kExitBadInput;
  }
  if (f.opt.container_template.empty() && f.opt.container_runtime != "none" &&
      f.opt.container_runtime != "host") {
    Result<std::string> t = agent::RuntimeTemplate(f.opt.container_runtime);
    if (!t.ok()) {
      std::cerr << "error: " << t.status().message() << "\n";
      return kExitBadInput;
    }
    f.opt.container_template = *t;
  }
  if (f.opt.node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    f.opt.node = host;
  }
  agent::Agent a(f.opt, log);
  Status st = a.Start();
  if (!st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return st.code() == StatusCode::kUnavailable        ? kExitUnreachable
           : st.code() == StatusCode::kPermissionDenied ? kExitDenied
                                                        : kExitBadInput;
  }
  OnStopSignal([&a] { a.Stop(); });
  a.Run();
  return kExitOk;
}

// ---- logs --------------------------------------------------------------------

struct LogsFlags {
  ClientConfig config;
  std::string job;
  int rank = 0;
  bool follow = false;
};

int RunLogs(LogsFlags& f) {
  if (Status st = ResolveClientConfig(&f.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  Client client(f.config);
  int64_t offset = 0;
  while (true) {
    Result<Json> job = client.Call("GET", "/v1/jobs/" + f.job);
    if (!job.ok()) {
      std::cerr << "error: " << job.status().message() << "\n";
      return ExitCodeFor(job.status());
    }
    std::map<std::string, std::string> headers;
    Result<Json> text = client.Call("GET",
                                    "/v1/jobs/" + f.job + "/logs?rank=" + std::to_string(f.rank) +
                                        "&offset=" + std::to_string(offset),
                                    "", "application/json", 30, &headers);
    bool more = false;  // a chunk came: the next may follow at once
    if (text.ok() && text->is_string()) {
      const std::string s = text->get<std::string>();
      std::cout << s << std::flush;
      more = !s.empty();
      // Where the log goes on: past what was read, or past what rotated away.
      int64_t next = 0;
      offset = io::ParseInt64(headers["X-Unipool-Offset"], &next) && next >= offset
                   ? next
                   : offset + static_cast<int64_t>(s.size());
    } else if (!text.ok() && !f.follow) {
      std::cerr << "error: " << text.status().message() << "\n";
      return ExitCodeFor(text.status());
    }
    if (more) continue;  // the whole log (it comes in chunks of 1 MiB at most)
    const std::string state = (*job)["state"];
    const bool ended = state == "Succeeded" || state == "Failed" || state == "Cancelled";
    if (!f.follow || (ended && text.ok())) return kExitOk;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// ---- up ----------------------------------------------------------------------

struct UpFlags {
  int nodes = 4;
  int gpus = 8;
  std::string data = "unipool-up";
  int port = 8460;
  std::string run;
  std::string lease = "10s";
  std::string min_runtime = "5m";
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
  *admin = ReadToken(data + "/admin.token");
  *join = ReadToken(data + "/join.token");
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

pid_t SpawnAgent(const std::string& url, const std::string& data, int i, int gpus,
                 const std::string& lease) {
  const std::string node = "up-" + std::to_string(i);
  const std::string work = data + "/agents/" + node;
  fs::create_directories(work);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // The child: unblock the signals the parent waits for, die with `up`
  // (SIGTERM: a clean stop), then exec.
  sigset_t set;
  sigemptyset(&set);
  pthread_sigmask(SIG_SETMASK, &set, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  const std::string log = data + "/agents/" + node + ".log";
  freopen(log.c_str(), "a", stderr);
  freopen("/dev/null", "w", stdout);
  const std::string gpus_s = std::to_string(gpus);
  const std::string tokens = data + "/join.token";
  const std::string ckpt = data + "/checkpoints";
  const std::string heartbeat = "1s";
  execl("/proc/self/exe", "unipool", "agent", "--server", url.c_str(), "--join-token-file",
        tokens.c_str(), "--node", node.c_str(), "--gpus", gpus_s.c_str(), "--work-dir",
        work.c_str(), "--checkpoint-root", ckpt.c_str(), "--lease", lease.c_str(), "--heartbeat",
        heartbeat.c_str(), "--container-runtime", "host", static_cast<char*>(nullptr));
  _exit(127);
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

int RunUp(UpFlags& f) {
  BlockStopSignals();  // before the server starts its threads
  Duration lease, min_runtime;
  if (!ParseDur("--lease", f.lease, &lease) || !io::ParseDuration(f.min_runtime, &min_runtime)) {
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
  server::Logger log(stderr, server::LogLevel::kWarn);
  server::ServerOptions so;
  so.cluster_path = data + "/cluster.yaml";
  so.tokens_path = data + "/tokens.yaml";
  so.data_dir = data + "/store";
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
  const std::string url = srv.url();
  std::vector<pid_t> agents;
  std::atomic<bool> stopping{false};
  OnStopSignal([&] {
    stopping = true;
    srv.Stop();
  });
  std::thread serving([&] { (void)srv.Run(); });
  for (int i = 0; i < f.nodes; ++i) agents.push_back(SpawnAgent(url, data, i, f.gpus, f.lease));

  std::cout << "unipool is up: " << f.nodes << " nodes x " << f.gpus << " virtual GPUs at " << url
            << "\n  data:   " << f.data << " (store, agent logs, checkpoints)\n"
            << "  export UNIPOOL_SERVER=" << url << "\n"
            << "  export UNIPOOL_TOKEN=$(cat " << f.data << "/admin.token)\n";
  int code = kExitOk;
  ClientConfig cc{url, admin, ""};
  Client client(cc);
  for (int i = 0; i < 100; ++i) {  // agents join within a second or two
    Result<Json> sum = client.Call("GET", "/v1/summary");
    if (sum.ok() && (*sum)["nodes"]["up"].get<int>() == f.nodes) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!f.run.empty()) {
    code = RunAndFollow(client, f.run);
    std::cout << (code == kExitOk ? "job succeeded; stopping the local cluster"
                                  : "job did not succeed; stopping the local cluster")
              << std::endl;
    srv.Stop();
  } else {
    std::cout << "next:\n  unipool submit -f examples/jobs/train.yaml\n  unipool get jobs -w\n"
                 "  unipool logs 1 -f\nCtrl-C stops everything.\n"
              << std::flush;
  }
  serving.join();
  for (pid_t pid : agents) kill(pid, SIGTERM);
  for (pid_t pid : agents) waitpid(pid, nullptr, 0);
  return code;
}

}  // namespace

void AddAgentCommands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "Run the node agent: join the server, heartbeat, run and watch job processes");
  cmd->add_option("--server", f->opt.server, "server URL")->required();
  cmd->add_option("--join-token", f->opt.join_token, "join token (else $UNIPOOL_JOIN_TOKEN)");
  cmd->add_option("--join-token-file", f->join_token_file, "file holding the join token");
  cmd->add_option("--node", f->opt.node,
                  "this node's name in the cluster file (default: hostname)");
  cmd->add_option("--gpus", f->gpus, "auto (nvidia-smi) or N virtual GPUs")->capture_default_str();
  cmd->add_option("--address", f->opt.address, "address other nodes reach this one at")
      ->capture_default_str();
  cmd->add_option("--work-dir", f->opt.work_dir, "logs and run files")->capture_default_str();
  cmd->add_option("--checkpoint-root", f->opt.checkpoint_root,
                  "checkpoints of jobs that name none (shared storage across nodes)");
  cmd->add_option("--container-runtime", f->opt.container_runtime,
                  "jobs with an image: none (they fail, saying so), host (run on the host, the "
                  "image ignored), bwrap, podman, docker, apptainer or enroot")
      ->capture_default_str();
  cmd->add_option("--container-template", f->opt.container_template,
                  "a custom runtime command: {image} {workdir} {uid} {gid} {gpus} {command} "
                  "{mounts:...} {devices:...} {env:...} {rootfs:...} (docs/operations.md)");
  cmd->add_option("--pvc-root", f->opt.pvc_root,
                  "directory whose subdirectory NAME is PersistentVolumeClaim NAME in jobs' "
                  "volumes");
  cmd->add_option("--secret-dir", f->opt.secret_dir,
                  "Kubernetes secretKeyRef {name: S, key: K} of a job in queue Q reads DIR/Q/S/K "
                  "(keep it 0700)");
  cmd->add_option("--job-dirs", f->opt.job_dirs,
                  "directories where tenants' jobs may work and keep checkpoints (default: the "
                  "checkpoint root, /home, /scratch, /tmp)")
      ->delimiter(',');
  cmd->add_option("--heartbeat", f->heartbeat, "heartbeat period")->capture_default_str();
  cmd->add_option("--lease", f->lease, "the server's --node-lease (fence after 2/3 of it)")
      ->capture_default_str();
  cmd->add_option("--health-check", f->opt.health_check,
                  "program run periodically; non-zero exit drains the node")
      ->capture_default_str();
  cmd->add_option("--health-interval", f->health_interval, "how often")->capture_default_str();
  cmd->add_option("--ca-cert", f->opt.ca_cert, "PEM file to trust for https");
  cmd->add_option("--outage-grace", f->outage_grace,
                  "the server's --outage-grace: keep tasks through a server outage this long "
                  "while a majority of the nodes confirms it (0s: off)")
      ->capture_default_str();
  cmd->add_option("--log-max-mb", f->log_max_mb, "a process's log file rotates past this size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--log-files", f->opt.logs.files,
                  "files kept per process log (the current one and rotated ones)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--log-budget-mb", f->log_budget_mb,
                  "all runs' files on this node; past it the oldest finished runs' go")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--log-retention", f->log_retention,
                  "a finished run's logs are removed this long after its last write")
      ->capture_default_str();
  cmd->add_option("--hang-hook", f->opt.hang_hook,
                  "program run (sh -c) when a run is declared hung (spec.progressTimeout), "
                  "before it is killed; $UNIPOOL_JOB_ID and $UNIPOOL_PIDS are set");
  cmd->add_option("--cgroup", f->opt.cgroup,
                  "auto (a cgroup v2 directory per run where one can be created), off (process "
                  "tags only) or a cgroup v2 directory to create runs under; the runs' cpu, memory "
                  "and pids limits are enforced where it offers those controllers")
      ->capture_default_str();
  cmd->add_option("--log-level", f->log_level, "debug, info, warn or error")->capture_default_str();
  cmd->callback([f, &exit_code] { exit_code = RunAgent(*f); });

  // The agent's watchdog (agent/watchdog.h): started by the agent itself.
  auto w = std::make_shared<std::pair<std::string, std::string>>();
  cmd = app.add_subcommand("agent-watchdog", "")->group("");
  cmd->add_option("--cgroup", w->first);
  cmd->add_option("--tag", w->second)->required();
  cmd->callback([w, &exit_code] { exit_code = agent::RunWatchdog(3, 4, w->first, w->second); });

  auto l = std::make_shared<LogsFlags>();
  cmd = app.add_subcommand("logs", "Print a job's log (one rank), read from its node's agent");
  cmd->add_option("JOB", l->job, "job id")->required();
  cmd->add_option("--rank", l->rank, "global rank")->capture_default_str();
  cmd->add_flag("-f,--follow", l->follow, "keep printing until the job ends");
  cmd->add_option("--server", l->config.server, "server URL (else $UNIPOOL_SERVER)");
  cmd->add_option("--token", l->config.token, "bearer token (else $UNIPOOL_TOKEN)");
  cmd->callback([l, &exit_code] { exit_code = RunLogs(*l); });

  auto u = std::make_shared<UpFlags>();
  cmd = app.add_subcommand(
      "up", "Start a local cluster: a server and agents with virtual GPUs (Ctrl-C stops it)");
  cmd->add_option("--nodes", u->nodes, "local agents")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--gpus", u->gpus, "virtual GPUs per node")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--data", u->data, "data directory (store, logs, checkpoints, tokens)")
      ->capture_default_str();
  cmd->add_option("--port", u->port, "server port (0: any free one)")->capture_default_str();
  cmd->add_option("--run", u->run, "submit this job, show its progress, stop when it ends");
  cmd->add_option("--lease", u->lease, "node lease: how fast a lost agent is noticed")
      ->capture_default_str();
  cmd->add_option("--min-runtime", u->min_runtime, "before a job may be preempted")
      ->capture_default_str();
  cmd->callback([u, &exit_code] { exit_code = RunUp(*u); });
}

}  // namespace unipool::cli
