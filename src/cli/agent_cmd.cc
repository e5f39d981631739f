// `unipool agent` (the node agent) and its watchdog.
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
#include "core/topology/topology.h"
#include "io/cluster_reader.h"
#include "io/yaml_fields.h"
#include "server/server.h"

namespace unipool::cli {
namespace {

namespace fs = std::filesystem;

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
    if (!io::ParseInt64(f.gpus, &n) || n < 1 || n > kMaxGpusPerNode) {
      std::cerr << "error: --gpus: expected auto or a number of GPUs from 1 to " << kMaxGpusPerNode
                << "\n";
      return kExitBadInput;
    }
    f.opt.gpus = static_cast<int>(n);
  }
  if (!ParsePositiveDuration("--heartbeat", f.heartbeat, &f.opt.heartbeat) ||
      !ParsePositiveDuration("--lease", f.lease, &f.opt.lease) ||
      !ParsePositiveDuration("--health-interval", f.health_interval, &f.opt.health_interval)) {
    return kExitBadInput;
  }
  if (!ParsePositiveDuration("--log-retention", f.log_retention, &f.opt.log_retention))
    return kExitBadInput;
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

}  // namespace

void AddAgentCommands(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand(
      "agent", "Run the node agent: join the server, heartbeat, run and watch job processes");
  cmd->add_option("--server", f->opt.server,
                  "server URL, or the URLs of the --ha servers (URL,URL,...)")
      ->required();
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
  cmd->add_option("--kernel-log", f->opt.kernel_log,
                  "where the GPU driver's Xid errors are read on nodes with NVIDIA GPUs; an Xid "
                  "that needs a GPU reset drains the node (\"\": not read)")
      ->capture_default_str();
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
}

}  // namespace unipool::cli
