// `unipool server`: the control plane. `unipool token create`: tokens.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "cli/daemon.h"
#include "io/yaml_fields.h"
#include "server/follower.h"
#include "server/job_prefetch.h"
#include "server/server.h"
#include "store/election.h"
#include "store/etcd_mirror.h"

namespace unipool::cli {
namespace {

struct ServerFlags {
  server::ServerOptions opt;
  std::string listen = "127.0.0.1:8460";
  std::vector<std::string> etcd_endpoints;
  std::string store = "sqlite";
  std::string node_lease = "30s";
  std::string outage_grace = "0s";
  std::string min_runtime = "5m";
  std::string usage_half_life = "7d";
  std::string max_clock_offset = "1s";
  std::string log_level = "info";
  std::string address_file;
  bool ha = false;
  std::string advertise;
  std::string leader_ttl = "3s";
  std::chrono::seconds ttl{3};
  std::string etcd_maintenance = "5m";
  std::string history;  // "": DATA/history.db (none with --store memory)
  std::string history_retention = "1h";
};

Status ParseListen(const std::string& listen, server::ServerOptions* opt) {
  const size_t colon = listen.rfind(':');
  int64_t port = -1;
  if (colon == std::string::npos || !io::ParseInt64(listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return InvalidArgument("--listen: expected HOST:PORT (port 0 picks a free one), got '" +
                           listen + "'");
  }
  opt->host = listen.substr(0, colon);
  opt->port = static_cast<int>(port);
  return Status::Ok();
}

// The flags into f.opt; an exit code on bad input, else -1.
int ParseServerFlags(ServerFlags& f, server::Logger& log) {
  if (!SetLogLevel(log, f.log_level)) return kExitBadInput;
  Duration lease;
  if (!io::ParseDuration(f.node_lease, &lease) || lease.value() <= 0) {
    std::cerr << "error: --node-lease: expected a duration like 30s, got '" << f.node_lease
              << "'\n";
    return kExitBadInput;
  }
  f.opt.node_lease = lease;
  if (!io::ParseDuration(f.outage_grace, &f.opt.outage_grace) || f.opt.outage_grace.value() < 0) {
    std::cerr << "error: --outage-grace: expected a duration like 5m (0s: off), got '"
              << f.outage_grace << "'\n";
    return kExitBadInput;
  }
  Duration min_runtime;
  if (!io::ParseDuration(f.min_runtime, &min_runtime) || min_runtime.value() < 0) {
    std::cerr << "error: --min-runtime: expected a duration like 5m, got '" << f.min_runtime
              << "'\n";
    return kExitBadInput;
  }
  f.opt.min_runtime = min_runtime;
  if (!io::ParseDuration(f.usage_half_life, &f.opt.usage_half_life) ||
      f.opt.usage_half_life.value() <= 0) {
    std::cerr << "error: --fair-share-half-life: expected a duration like 7d, got '"
              << f.usage_half_life << "'\n";
    return kExitBadInput;
  }
  if (!io::ParseDuration(f.max_clock_offset, &f.opt.max_clock_offset) ||
      f.opt.max_clock_offset.value() <= 0) {
    std::cerr << "error: --max-clock-offset: expected a duration like 1s, got '"
              << f.max_clock_offset << "'\n";
    return kExitBadInput;
  }
  f.opt.store = f.store;
  if (f.store == "etcd") {
    if (f.etcd_endpoints.empty()) {
      std::cerr << "error: --store etcd needs --etcd-endpoints URL,URL,...\n";
      return kExitBadInput;
    }
    f.opt.etcd.endpoints = f.etcd_endpoints;
  }
  if (f.ha && f.store != "etcd") {
    std::cerr << "error: --ha needs --store etcd (the servers share etcd and elect a leader)\n";
    return kExitBadInput;
  }
  if (!io::ParseDuration(f.history_retention, &f.opt.history_retention) ||
      f.opt.history_retention.value() < 0) {
    std::cerr << "error: --history-retention: expected a duration like 1h or 7d (0s: jobs stay "
                 "in the store), got '"
              << f.history_retention << "'\n";
    return kExitBadInput;
  }
  if (!f.history.empty()) {
    f.opt.history_path = f.history;
  } else if (f.store != "memory" && f.opt.history_retention.value() > 0) {
    std::error_code ec;  // (SQLite's store makes its own directory, with --init)
    if (f.store == "etcd") std::filesystem::create_directories(f.opt.data_dir, ec);
    if (ec) {
      std::cerr << "error: --data " << f.opt.data_dir << ": " << ec.message() << "\n";
      return kExitBadInput;
    }
    f.opt.history_path = f.opt.data_dir + "/history.db";
  }
  if (!io::ParseDuration(f.etcd_maintenance, &f.opt.etcd_maintenance) ||
      f.opt.etcd_maintenance.value() < 0) {
    std::cerr << "error: --etcd-maintenance: expected a duration like 5m (0s: off), got '"
              << f.etcd_maintenance << "'\n";
    return kExitBadInput;
  }
  Duration ttl;
  if (!io::ParseDuration(f.leader_ttl, &ttl) || ttl < Seconds(2) || ttl.value() % 1000000000) {
    std::cerr << "error: --leader-ttl: expected whole seconds, at least 2s, got '" << f.leader_ttl
              << "'\n";
    return kExitBadInput;
  }
  f.ttl = std::chrono::seconds(ttl.value() / 1000000000);
  // Agents fence 2/3 of a lease after their last acknowledged heartbeat; a
  // failover takes the leader's TTL plus the takeover (seconds more under
  // load). Below 6 TTLs the margin is a loaded machine's hiccup.
  if (f.ha && lease < ttl * 6) {
    std::cerr << "warning: --node-lease " << f.node_lease << " leaves agents "
              << ToSeconds(lease * 2 / 3)
              << " s without a leader before they fence every task; a failover takes "
                 "--leader-ttl "
              << f.leader_ttl << " and the takeover: give a node lease of at least "
              << ToSeconds(ttl * 6) << "s\n";
  }
  if (Status st = ParseListen(f.listen, &f.opt); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  return -1;
}

void WriteAddress(const ServerFlags& f, const std::string& url) {
  if (f.address_file.empty()) return;
  const std::string tmp = f.address_file + ".tmp";
  std::ofstream(tmp) << url << "\n";
  std::rename(tmp.c_str(), f.address_file.c_str());
}

// What a stop signal stops: whatever runs now (the follower's campaign,
// then the leader's server).
struct Stopper {
  std::mutex mu;
  bool stopping = false;
  std::function<void()> stop;
  void Set(std::function<void()> fn) {
    std::lock_guard lock(mu);
    stop = std::move(fn);
    if (stopping && stop) stop();
  }
  void Fire() {
    std::lock_guard lock(mu);
    stopping = true;
    if (stop) stop();
  }
};

// The leader's hold on its term: renews the election's lease from the
// moment the term began (opening the store and rebuilding the state take
// seconds with a big state: longer than a lease can go unrenewed), and
// stops the server once it runs, or keeps it from running, when the term
// is lost.
class TermHolder {
 public:
  TermHolder(store::Election* election, server::Logger& log) : election_(election) {
    if (election_ == nullptr) return;
    thread_ = std::thread([this, &log] {
      const std::string why = election_->HoldUntilLost();
      if (why == "stopped") return;
      log.Error("server", "lost the leadership: " + why + "; stopping (restart it to follow)");
      std::lock_guard lock(mu_);
      lost_ = true;
      if (server_ != nullptr) server_->Stop();
    });
  }
  ~TermHolder() {
    if (election_ == nullptr) return;
    election_->Stop();
    thread_.join();
  }
  // The server to stop from now on; false when the term was lost already.
  bool Hold(server::Server* s) {
    std::lock_guard lock(mu_);
    server_ = s;
    return !lost_;
  }
  bool lost() {
    std::lock_guard lock(mu_);
    return lost_;
  }

 private:
  store::Election* const election_;
  std::mutex mu_;
  server::Server* server_ = nullptr;
  bool lost_ = false;
  std::thread thread_;
};

// The control plane on this process: opens the store (as leader under
// `election`, when there is one) and serves until stopped or, as leader,
// until the term is lost (then it exits non-zero: a supervisor starts it
// again, as a follower).
int ServeControlPlane(ServerFlags& f, server::Logger& log, Stopper& stopper,
                      store::Election* election) {
  TermHolder term(election, log);
  Result<std::unique_ptr<server::Server>> s = server::Server::Open(f.opt, log);
  if (!s.ok()) {
    std::cerr << "error: " << s.status().ToString() << "\n";
    return store::IsFailure(s.status()) ? kExitFailed : kExitBadInput;
  }
  Result<int> port = (*s)->Bind();
  if (!port.ok()) {
    std::cerr << "error: " << port.status().message() << "\n";
    return kExitFailed;
  }
  server::Server& srv = **s;
  if (!term.Hold(&srv)) return kExitFailed;
  stopper.Set([&srv, election] {
    if (election) election->Stop();
    srv.Stop();
  });
  std::cout << "unipool server listening on " << srv.url() << std::endl;
  WriteAddress(f, srv.url());
  Status st = srv.Run();
  stopper.Set(nullptr);
  term.Hold(nullptr);
  if (!st.ok()) {
    log.Error("server", "stopped on a fatal error: " + st.message());
    return kExitFailed;
  }
  if (term.lost()) return kExitFailed;
  log.Info("server", "stopped");
  return kExitOk;
}

// --ha: follows (redirecting clients to the leader) until elected, then
// serves as leader on the same address.
int RunHighlyAvailable(ServerFlags& f, server::Logger& log, Stopper& stopper) {
  std::unique_ptr<store::Election> election;
  std::string url, me;  // this server's URL once bound; what it advertises
  // While this server is taking over, it is not the leader yet: "" (503,
  // retry), never a redirect to itself.
  server::FollowerFront front(
      [&election, &me] {
        const std::string leader = election ? election->leader() : "";
        return leader == me ? "" : leader;
      },
      f.opt.http);
  if (!f.opt.tls_cert.empty()) {
    if (Status st = front.SetTls(f.opt.tls_cert, f.opt.tls_key); !st.ok()) {
      std::cerr << "error: " << st.message() << "\n";
      return kExitBadInput;
    }
  }
  Result<int> port = front.Bind(f.opt.host, f.opt.port);
  if (!port.ok()) {
    std::cerr << "error: " << port.status().message() << "\n";
    return kExitFailed;
  }
  f.opt.port = *port;  // the leader serves where the follower answered
  url = std::string(f.opt.tls_cert.empty() ? "http://" : "https://") + f.opt.host + ":" +
        std::to_string(*port);
  me = f.advertise.empty() ? url : f.advertise;
  election = std::make_unique<store::Election>(f.opt.etcd, me, f.ttl);
  if (Status st = front.Start(); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitFailed;
  }
  stopper.Set([&election] { election->Stop(); });
  std::cout << "unipool server following on " << url << std::endl;
  WriteAddress(f, url);
  log.Info("server", "following: campaigning for the leadership", {{"url", url}});
  // A copy of the store, kept current while following: the takeover
  // starts from it (etcd_mirror.h).
  server::JobPrefetch prefetch;
  store::EtcdMirror mirror(f.opt.etcd);
  prefetch.Follow(mirror);
  f.opt.etcd_mirror = &mirror;
  f.opt.prefetch = &prefetch;
  const int64_t term = election->Campaign();
  if (term == 0) return kExitOk;  // stopped
  // The address passes to the leader's API without ever closing: clients
  // that connect during the takeover wait in the backlog.
  f.opt.listen_fd = front.StopAndRelease();
  log.Info("server", "elected leader", {{"term", term}, {"url", url}});
  f.opt.etcd.guard_key = election->key();
  f.opt.etcd.guard_term = term;
  return ServeControlPlane(f, log, stopper, election.get());
}

int RunServer(ServerFlags& f) {
  BlockStopSignals();  // before the store starts its thread
  // Past a file size limit (RLIMIT_FSIZE) a write fails with EFBIG like a
  // full disk, instead of killing the server: it goes read-only.
  signal(SIGXFSZ, SIG_IGN);
  server::Logger log;
  if (int code = ParseServerFlags(f, log); code >= 0) return code;
  Stopper stopper;
  OnStopSignal([&stopper] { stopper.Fire(); });
  return f.ha ? RunHighlyAvailable(f, log, stopper) : ServeControlPlane(f, log, stopper, nullptr);
}

struct TokenFlags {
  std::string file, name, role, run_as;
  std::vector<std::string> queues, nodes;
};

int RunTokenCreate(const TokenFlags& f) {
  auto role = server::ParseRole(f.role);
  if (!role) {
    std::cerr << "error: --role: expected admin, tenant, read-only or join\n";
    return kExitBadInput;
  }
  server::Principal who{.name = f.name, .role = *role, .run_as = f.run_as, .nodes = f.nodes};
  who.queues.insert(f.queues.begin(), f.queues.end());
  Result<std::string> token = server::TokenFile::Create(f.file, who);
  if (!token.ok()) {
    std::cerr << "error: " << token.status().message() << "\n";
    return kExitBadInput;
  }
  std::cout << *token << "\n";
  std::cerr << "token '" << f.name << "' (" << f.role << ") added to " << f.file
            << "; only its hash is stored: keep this token now\n";
  return kExitOk;
}

}  // namespace

void AddServerCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<ServerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "server", "Run the control plane: REST API, scheduler, embedded store, /metrics");
  cmd->add_option("--cluster", f->opt.cluster_path, "cluster file (YAML, kind: Cluster)")
      ->required();
  cmd->add_option("--tokens", f->opt.tokens_path,
                  "token file (see 'unipool token create'); re-read when it changes")
      ->required();
  cmd->add_option("--history", f->history,
                  "SQLite file of the jobs that left the store (default: DATA/history.db; "
                  "none with --store memory)");
  cmd->add_option("--history-retention", f->history_retention,
                  "an ended job moves from the store to the history this long after it ended "
                  "(0s: never)")
      ->capture_default_str();
  cmd->add_option("--data", f->opt.data_dir, "data directory of the embedded SQLite store")
      ->capture_default_str();
  cmd->add_flag("--init", f->opt.init,
                "create a new, empty store when --data has none (the first start); without it, "
                "a missing or empty store is an error")
      ->capture_default_str();
  cmd->add_option("--store", f->store,
                  "sqlite (durable, in --data), etcd (durable and shared: --etcd-endpoints) or "
                  "memory (for trials)")
      ->check(CLI::IsMember({"sqlite", "etcd", "memory"}))
      ->capture_default_str();
  cmd->add_option("--etcd-endpoints", f->etcd_endpoints,
                  "etcd client URLs (http:// or https://), comma-separated; the next is tried "
                  "when one does not answer")
      ->delimiter(',');
  cmd->add_option("--etcd-prefix", f->opt.etcd.prefix,
                  "every key of this cluster lives under it: clusters sharing an etcd use "
                  "different prefixes")
      ->capture_default_str();
  cmd->add_option("--etcd-cacert", f->opt.etcd.ca_file, "PEM CA of etcd's server certificates");
  cmd->add_option("--etcd-cert", f->opt.etcd.cert_file,
                  "PEM client certificate for etcd (with --etcd-key; etcd --client-cert-auth)");
  cmd->add_option("--etcd-key", f->opt.etcd.key_file, "PEM private key of --etcd-cert");
  cmd->add_flag("--ha", f->ha,
                "high availability: servers sharing --store etcd elect one leader; the others "
                "redirect clients to it and take over when it is lost");
  cmd->add_option("--advertise", f->advertise,
                  "--ha: the URL other servers send clients to (default: the --listen address)");
  cmd->add_option("--leader-ttl", f->leader_ttl,
                  "--ha: the leader's etcd lease; a lost leader is replaced about this long "
                  "after it stopped renewing it")
      ->capture_default_str();
  cmd->add_option("--etcd-max-txn-ops", f->opt.etcd.max_txn_ops,
                  "etcd's --max-txn-ops: the most operations the server puts in one etcd "
                  "transaction")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--etcd-maintenance", f->etcd_maintenance,
                  "--store etcd: the leader compacts etcd's history to what it was this long "
                  "ago, and defragments a member that is mostly free space, this often (0s: off)")
      ->capture_default_str();
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--tls-cert", f->opt.tls_cert, "PEM certificate: serve HTTPS");
  cmd->add_option("--tls-key", f->opt.tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--node-lease", f->node_lease, "a node whose agent is silent this long is down")
      ->capture_default_str();
  cmd->add_option("--outage-grace", f->outage_grace,
                  "while most nodes are silent (the server is the likelier fault), wait this much "
                  "longer than the lease; agents with the same --outage-grace keep their tasks "
                  "through an outage this long (0s: off)")
      ->capture_default_str();
  cmd->add_option("--min-runtime", f->min_runtime,
                  "a job runs at least this long before it may be preempted")
      ->capture_default_str();
  cmd->add_option("--queue-depth", f->opt.max_attempts_per_cycle,
                  "placement attempts per scheduling pass; ten times as many pending jobs are "
                  "looked at at most (deeper jobs wait for later passes)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--fair-share-half-life", f->usage_half_life,
                  "queues' fair-share usage halves this often (get queues -o wide; Slurm's "
                  "PriorityDecayHalfLife)")
      ->capture_default_str();
  cmd->add_option("--max-clock-offset", f->max_clock_offset,
                  "a node whose clock is further than this from the server's is skewed: an event "
                  "on its jobs, a training anomaly, a cause in `unipool diagnose`")
      ->capture_default_str();
  cmd->add_option("--node-metrics-max", f->opt.node_metrics_max,
                  "per-node metrics (unipool_node_gpus, unipool_node_state) on clusters of at "
                  "most this many nodes; 0: none")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_flag("--assume-nodes-up", f->opt.assume_nodes_up,
                "treat every node as up without an agent (try the API without agents)");
  cmd->add_option("--log-level", f->log_level, "debug, info, warn or error")->capture_default_str();
  cmd->add_option("--address-file", f->address_file,
                  "write the server's URL to this file once it listens");
  cmd->callback([f, &exit_code] { exit_code = RunServer(*f); });

  auto t = std::make_shared<TokenFlags>();
  CLI::App* token = app.add_subcommand("token", "Manage API tokens");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand(
      "create", "Add a token to a token file (stored hashed) and print it once");
  create->add_option("--file", t->file, "token file (created if missing)")->required();
  create->add_option("--name", t->name, "who the token is for")->required();
  create->add_option("--role", t->role, "admin, tenant, read-only or join")->required();
  create->add_option("--queues", t->queues, "a tenant's queues")->delimiter(',');
  create->add_option("--run-as", t->run_as,
                     "user[:group] a tenant's (or admin's) jobs run as on the nodes");
  create
      ->add_option("--nodes", t->nodes,
                   "a join token's nodes: names or patterns with '*' (default: any)")
      ->delimiter(',');
  create->callback([t, &exit_code] { exit_code = RunTokenCreate(*t); });
}

}  // namespace unipool::cli
