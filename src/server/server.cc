#include "server/server.h"

#include <chrono>

#include "io/cluster_reader.h"
#include "io/time_format.h"
#include "server/job_prefetch.h"
#include "store/etcd_mirror.h"

namespace unipool::server {

namespace {

void DeclareStartMetrics(Metrics& m) {
  using T = Metrics::Type;
  m.Declare("unipool_server_start_seconds", T::kGauge,
            "How long this server's start (or takeover) took, by phase: opening the store, "
            "rebuilding the state from it");
  m.Declare("unipool_store_opened_from_mirror", T::kGauge,
            "1 when this leader's store started from its follower's mirror of etcd, 0 when it "
            "read the store whole");
  m.Declare("unipool_server_start_prefetched_jobs", T::kGauge,
            "Job records this leader's rebuild took already parsed from its time as a follower");
}

void DeclareMaintenanceMetrics(Metrics& m) {
  using T = Metrics::Type;
  m.Declare("unipool_etcd_db_size_bytes", T::kGauge,
            "Size of each etcd member's database file, at the last maintenance round");
  m.Declare("unipool_etcd_db_size_in_use_bytes", T::kGauge,
            "Bytes of each etcd member's database file that hold data (the rest is free "
            "until a defragmentation)");
  m.Declare("unipool_etcd_compactions_total", T::kCounter,
            "Compactions of etcd's history by the leader's maintenance");
  m.Declare("unipool_etcd_defragmentations_total", T::kCounter,
            "Defragmentations of an etcd member by the leader's maintenance");
  m.Declare("unipool_etcd_maintenance_failures_total", T::kCounter,
            "Maintenance rounds in which a compaction, a status read or a defragmentation "
            "failed");
}

}  // namespace

Result<std::unique_ptr<Server>> Server::Open(const ServerOptions& options, Logger& log) {
  std::unique_ptr<Server> s(new Server(options, log));
  Result<Topology> topo = io::LoadTopology(options.cluster_path);
  if (!topo.ok()) return topo.status();
  s->topo_ = std::make_unique<Topology>(std::move(topo).value());

  const auto t0 = std::chrono::steady_clock::now();
  auto ms_since = [](auto t) {
    return static_cast<int64_t>(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
  };
  if (options.store == "memory") {
    s->store_ = store::NewMemoryStore();
  } else {
    Result<std::unique_ptr<store::Store>> st =
        options.store == "etcd"
            ? store::OpenEtcdStore(options.etcd, options.init, 100000, options.etcd_mirror)
            : store::OpenSqliteStore(options.data_dir, options.init);
    if (!st.ok()) return st.status();
    s->store_ = std::move(st).value();
  }

  const bool warm = options.etcd_mirror != nullptr && options.etcd_mirror->stats().taken;
  const int64_t store_ms = ms_since(t0);
  log.Info("store", warm ? "opened from the follower's mirror" : "opened",
           {{"ms", store_ms}, {"revision", s->store_->revision()}});
  const auto t1 = std::chrono::steady_clock::now();
  ControlPlane::DeclareMetrics(s->metrics_);
  ApiServer::DeclareMetrics(s->metrics_);
  DeclareProcessMetrics(s->metrics_);
  DeclareBuildInfo(s->metrics_);
  if (options.store == "etcd") DeclareMaintenanceMetrics(s->metrics_);
  ControlOptions copt;
  copt.node_lease = options.node_lease;
  copt.outage_grace = options.outage_grace;
  copt.assume_nodes_up = options.assume_nodes_up;
  if (!options.history_path.empty()) {
    Result<std::unique_ptr<store::History>> h = store::History::Open(options.history_path);
    if (!h.ok()) return h.status();
    s->history_ = std::move(h).value();
    copt.history = s->history_.get();
    copt.history_retention = options.history_retention;
  }
  copt.node_metrics_max = options.node_metrics_max;
  copt.max_clock_offset = options.max_clock_offset;
  copt.usage_half_life = options.usage_half_life;
  copt.sched.min_runtime = options.min_runtime;
  copt.sched.format_time = [](Time t) { return io::FormatTime(t); };
  copt.sched.max_attempts_per_cycle = options.max_attempts_per_cycle;
  // Jobs whose shape already failed in a pass cost no attempt: look at ten
  // times the depth at most, so a deep queue on a full cluster is not
  // walked whole in every pass (which holds the state).
  copt.sched.max_jobs_examined_per_cycle = 10 * options.max_attempts_per_cycle;
  copt.prefetch = options.prefetch;
  const size_t prefetched = options.prefetch ? options.prefetch->size() : 0;
  Result<std::unique_ptr<ControlPlane>> cp =
      ControlPlane::Open(*s->topo_, *s->store_, copt, s->metrics_, log);
  if (!cp.ok()) return cp.status();
  s->control_ = std::move(cp).value();
  const int64_t used =
      options.prefetch ? static_cast<int64_t>(prefetched - options.prefetch->size()) : 0;
  log.Info("control", "state rebuilt", {{"ms", ms_since(t1)}, {"prefetched_jobs", used}});
  DeclareStartMetrics(s->metrics_);
  s->metrics_.Set("unipool_server_start_seconds", {{"phase", "store"}}, store_ms / 1000.0);
  s->metrics_.Set("unipool_server_start_seconds", {{"phase", "state"}}, ms_since(t1) / 1000.0);
  s->metrics_.Set("unipool_store_opened_from_mirror", {}, warm ? 1 : 0);
  s->metrics_.Set("unipool_server_start_prefetched_jobs", {}, static_cast<double>(used));

  ApiOptions aopt;
  aopt.tokens_path = options.tokens_path;
  aopt.tls_cert = options.tls_cert;
  aopt.tls_key = options.tls_key;
  aopt.limits = options.http;
  aopt.peer_evidence = options.outage_grace.value() > 0;
  s->api_ = std::make_unique<ApiServer>(*s->control_, s->metrics_, log, aopt);
  UNIPOOL_RETURN_IF_ERROR(s->api_->Init());
  return s;
}

Server::~Server() {
  Stop();
  if (reconciler_.joinable()) reconciler_.join();
  if (maintainer_.joinable()) maintainer_.join();
}

Result<int> Server::Bind() {
  Result<int> port = options_.listen_fd >= 0 ? api_->Adopt(options_.listen_fd)
                                             : api_->Bind(options_.host, options_.port);
  if (port.ok()) port_ = *port;
  return port;
}

std::string Server::url() const {
  const bool tls = !options_.tls_cert.empty();
  return std::string(tls ? "https://" : "http://") + options_.host + ":" + std::to_string(port_);
}

void Server::ReconcileLoop() {
  const auto cycle = std::chrono::milliseconds(options_.cycle.value() / 1000000);
  while (!stop_) {
    Status st = control_->Reconcile();
    if (!st.ok()) {
      log_.Error("control", "reconcile failed, stopping: " + st.message());
      {
        std::lock_guard lock(fatal_mu_);
        fatal_ = Status(StatusCode::kInternal, "reconcile failed: " + st.message());
      }
      api_->Stop();
      return;
    }
    control_->ArchiveEnded();
    control_->WaitForWork(cycle);
    // Let a burst of submissions gather into one pass: under a steady
    // stream a pass runs at most every 50 ms, so passes (which hold the
    // state) leave most of the time to the API.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (Status st = control_->FlushUsage(); !st.ok()) {
    log_.Warn("control", "fair-share usage not written at the stop: " + st.message());
  }
}

void Server::Report(const store::MaintenanceRound& round) {
  for (const store::MemberStatus& m : round.members) {
    if (!m.ok) continue;
    metrics_.Set("unipool_etcd_db_size_bytes", {{"endpoint", m.endpoint}},
                 static_cast<double>(m.db_size));
    metrics_.Set("unipool_etcd_db_size_in_use_bytes", {{"endpoint", m.endpoint}},
                 static_cast<double>(m.db_size_in_use));
  }
  if (round.compacted_to > 0) {
    metrics_.Add("unipool_etcd_compactions_total", {});
    log_.Info("store", "etcd compacted", {{"revision", round.compacted_to}});
  }
  if (!round.defragmented.empty()) {
    metrics_.Add("unipool_etcd_defragmentations_total", {{"endpoint", round.defragmented}});
    log_.Info("store", "etcd member defragmented", {{"endpoint", round.defragmented}});
  }
  if (!round.status.ok()) {
    metrics_.Add("unipool_etcd_maintenance_failures_total", {});
    log_.Warn("store", "etcd maintenance: " + round.status.message());
  }
}

void Server::MaintenanceLoop() {
  store::EtcdMaintenance maintenance(options_.etcd, options_.maintenance);
  const auto every = std::chrono::nanoseconds(options_.etcd_maintenance.value());
  std::unique_lock lock(stop_mu_);
  while (!stop_) {
    lock.unlock();
    Report(maintenance.RunOnce());
    lock.lock();
    stopped_.wait_for(lock, every, [this] { return stop_.load(); });
  }
}

Status Server::Run() {
  reconciler_ = std::thread([this] { ReconcileLoop(); });
  if (options_.store == "etcd" && options_.etcd_maintenance.value() > 0) {
    maintainer_ = std::thread([this] { MaintenanceLoop(); });
  }
  log_.Info("server", "serving",
            {{"url", url()},
             {"nodes", int64_t{topo_->num_nodes()}},
             {"gpus", topo_->num_gpus().value()}});
  api_->Serve();
  {
    std::lock_guard lock(stop_mu_);
    stop_ = true;
  }
  stopped_.notify_all();
  if (reconciler_.joinable()) reconciler_.join();
  if (maintainer_.joinable()) maintainer_.join();
  std::lock_guard lock(fatal_mu_);
  return fatal_;
}

void Server::Stop() {
  {
    std::lock_guard lock(stop_mu_);
    stop_ = true;
  }
  stopped_.notify_all();
  if (api_) api_->Stop();
}

}  // namespace unipool::server
