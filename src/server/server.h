// Server: the whole control plane in one object - cluster model, store,
// ControlPlane, ApiServer and the reconcile loop - as `unipool server` and
// `unipool up` run it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "server/api.h"
#include "server/control.h"
#include "store/etcd_maintenance.h"

namespace unipool::server {

class JobPrefetch;

struct ServerOptions {
  std::string cluster_path;  // the cluster file (nodes and tiers)
  std::string data_dir = "unipool-data";
  // sqlite (the embedded default, in data_dir), etcd (etcd below), or
  // memory (nothing survives the process).
  std::string store = "sqlite";
  store::EtcdOptions etcd;
  // --ha: the follower's mirror of the etcd store (not owned; may be null):
  // the takeover starts from it instead of reading etcd whole.
  store::EtcdMirror* etcd_mirror = nullptr;
  // --ha: the job records the follower parsed from its mirror (not owned).
  JobPrefetch* prefetch = nullptr;
  bool init = false;  // create the store when the data directory has none
  std::string tokens_path;
  std::string host = "127.0.0.1";
  int port = 8460;     // 0: any free port
  int listen_fd = -1;  // a listening socket to serve on instead (--ha: the follower's)
  std::string tls_cert, tls_key;
  bool assume_nodes_up = false;
  Duration node_lease = Seconds(30);
  Duration outage_grace = Duration(0);  // ControlOptions::outage_grace
  Duration min_runtime = Seconds(300);  // before a job may be preempted
  Duration cycle = Milliseconds(200);   // reconcile at least this often
  // Placement attempts per reconcile pass (like Slurm's default_queue_depth):
  // bounds how long a pass holds the state with a deep queue; the rest of
  // the queue waits for the next pass.
  int64_t max_attempts_per_cycle = 1000;
  int32_t node_metrics_max = 10000;  // ControlOptions::node_metrics_max
  Duration max_clock_offset = Seconds(1);             // ControlOptions::max_clock_offset
  Duration usage_half_life = Seconds(7 * 24 * 3600);  // ControlOptions::usage_half_life
  HttpLimits http;  // connections, workers per lane, timeouts, per-client caps
  // etcd only: a maintenance round this often (store/etcd_maintenance.h:
  // compaction to the previous round's revision, defragmentation of a
  // member that is mostly free space); 0: none (an operator does it).
  Duration etcd_maintenance = Seconds(300);
  // Jobs that ended this long ago move from the store to the history file
  // (store/history.h); "" for none (they stay in the store for good).
  std::string history_path;
  Duration history_retention = Seconds(3600);
  store::MaintenanceOptions maintenance;
};

class Server {
 public:
  // Loads the cluster and tokens, opens the store and recovers. Errors
  // name the file or directory at fault.
  static Result<std::unique_ptr<Server>> Open(const ServerOptions& options, Logger& log);
  ~Server();

  // Binds the listening socket; returns the port.
  Result<int> Bind();
  // Serves and reconciles until Stop(). Not OK when it stopped on a fatal
  // error (the caller exits non-zero, so a supervisor restarts it).
  Status Run();
  // May be called from any thread.
  void Stop();

  std::string url() const;
  ControlPlane& control() { return *control_; }

 private:
  Server(const ServerOptions& options, Logger& log) : options_(options), log_(log) {}
  void ReconcileLoop();
  void MaintenanceLoop();  // etcd: a round every options_.etcd_maintenance
  void Report(const store::MaintenanceRound& round);

  ServerOptions options_;
  Logger& log_;
  Metrics metrics_;
  std::unique_ptr<Topology> topo_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::History> history_;  // before control_, which uses it
  std::unique_ptr<ControlPlane> control_;
  std::unique_ptr<ApiServer> api_;
  std::thread reconciler_, maintainer_;
  std::atomic<bool> stop_{false};
  std::mutex stop_mu_;
  std::condition_variable stopped_;  // wakes the maintenance loop
  std::mutex fatal_mu_;
  Status fatal_;
  int port_ = 0;
};

}  // namespace unipool::server
