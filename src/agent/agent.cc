#include "agent/agent.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "agent/agent_internal.h"
#include "agent/checkpoint_size.h"
#include "agent/gpu_metrics.h"
#include "agent/steady_clock.h"
#include "io/report_line.h"
#include "io/yaml_fields.h"

namespace unipool::agent {
namespace fs = std::filesystem;

namespace {

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> b(bytes);
  RAND_bytes(b.data(), static_cast<int>(b.size()));
  std::string out;
  for (unsigned char c : b) {
    static const char* d = "0123456789abcdef";
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// Runs a shell command; returns its exit status and (the start of) its output.
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  // coreutils' timeout: a hung check (nvidia-smi on a GPU that fell off the
  // bus) must not hang the agent; exit 124 then says it timed out.
  FILE* p = popen(("timeout -k 5 60 " + cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "cannot run " + cmd};
  char buf[512];
  while (out.size() < 4096 && std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 124) out = "timed out after 60 s: " + cmd;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

std::string ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string GpuHealthFrom(int exit_code, const std::string& csv) {
  if (exit_code != 0) return "nvidia-smi failed: " + csv.substr(0, 200);
  std::stringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    // index, uncorrected ECC errors (volatile), retired pages pending
    std::stringstream fields(line);
    std::string index, ecc, pending;
    std::getline(fields, index, ',');
    std::getline(fields, ecc, ',');
    std::getline(fields, pending, ',');
    auto trim = [](std::string v) {
      v.erase(0, v.find_first_not_of(' '));
      return v;
    };
    ecc = trim(ecc);
    pending = trim(pending);
    if (!ecc.empty() && ecc != "0" && ecc != "[N/A]" && ecc != "N/A") {
      return "GPU " + trim(index) + ": " + ecc + " uncorrected ECC errors";
    }
    if (pending == "Yes") return "GPU " + trim(index) + ": page retirement pending (reset the GPU)";
  }
  return "ok";
}

// Asks nvidia-smi about every GPU: uncorrected ECC errors or pending page
// retirements make the node unhealthy (it is drained).
std::string Agent::GpuHealth() const {
  auto [code, out] = Shell(
      "nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending "
      "--format=csv,noheader");
  return GpuHealthFrom(code, out);
}

int DiscoverGpus() {
  auto [code, out] = Shell("nvidia-smi --query-gpu=index --format=csv,noheader");
  if (code != 0) return -1;
  int n = 0;
  for (char c : out) n += c == '\n';
  return out.empty() ? 0 : n + 1;
}

Agent::Agent(AgentOptions options, server::Logger& log) : options_(std::move(options)), log_(log) {
  if (options_.checkpoint_root.empty())
    options_.checkpoint_root = options_.work_dir + "/checkpoints";
  if (options_.job_dirs.empty()) {
    options_.job_dirs = {options_.checkpoint_root, "/home", "/scratch", "/tmp"};
  }
  for (std::string& d : options_.job_dirs) {  // absolute and normalized, as jobs' paths are
    Result<std::string> abs = ResolveJobPath(d, fs::current_path().string(), "--job-dirs");
    if (abs.ok()) d = *abs;
  }
}

Agent::~Agent() {
  Stop();
  quit_ = true;
  for (std::thread* t : {&http_thread_, &heartbeat_thread_, &watch_thread_, &health_thread_,
                         &fence_thread_, &evidence_thread_}) {
    if (t->joinable()) t->join();
  }
}

// ---- Start: join and the log endpoint ---------------------------------------

Status Agent::Start() {
  Result<server::ServerList> servers = server::ServerList::Parse(options_.server);
  if (!servers.ok()) return InvalidArgument("--server: " + servers.status().message());
  servers_ = *servers;
  if (options_.gpus < 0) {
    options_.gpus = DiscoverGpus();
    gpus_discovered_ = options_.gpus > 0;
    if (options_.gpus < 0) {
      return InvalidArgument(
          "--gpus auto: nvidia-smi is missing or failed; give --gpus N "
          "(virtual GPUs) on a machine without NVIDIA GPUs");
    }
  }
  if (gpus_discovered_) OpenKernelLog();
  std::error_code ec;
  fs::create_directories(options_.work_dir, ec);
  if (ec) return InvalidArgument("--work-dir " + options_.work_dir + ": " + ec.message());
  StartContainment();
  if (geteuid() != 0) {
    log_.Info("agent",
              "not running as root: every job runs as this agent's user; jobs whose runAs "
              "names another user do not start here",
              {{"uid", static_cast<int64_t>(geteuid())}});
  }
  // The node's own token first (a restarted agent: it rotates), else the
  // join token (a first join, or the own token was revoked).
  Result<std::string> token = PermissionDenied("no node token");
  if (const std::string own = ReadTokenFile(TokenPath()); !own.empty()) {
    token = JoinPatiently(own);
  }
  if (!token.ok() && token.status().code() == StatusCode::kPermissionDenied) {
    token = JoinPatiently(options_.join_token);
  }
  if (!token.ok()) return token.status();
  UNIPOOL_RETURN_IF_ERROR(UseToken(*token));
  secret_ = RandomHex(24);

  http_ = std::make_unique<httplib::Server>();
  ServeLogs();
  ServePeers();
  const int port = http_->bind_to_any_port(options_.address);
  if (port < 0) return Unavailable("cannot listen on " + options_.address);
  agent_url_ = "http://" + options_.address + ":" + std::to_string(port);
  http_thread_ = std::thread([this] { http_->listen_after_bind(); });
  last_ok_ms_ = SteadyMs();
  RenewDeadline();
  log_.Info("agent", "joined",
            {{"node", options_.node}, {"gpus", int64_t{options_.gpus}}, {"url", agent_url_}});
  return Status::Ok();
}

// GET /logs/JOB/RANK?generation=G&offset=N&limitBytes=L (bearer: the secret).
void Agent::ServeLogs() {
  http_->Get("/logs/([0-9]+)/([0-9]+)",
             [this](const httplib::Request& req, httplib::Response& res) {
               if (req.get_header_value("Authorization") != "Bearer " + secret_) {
                 res.status = 401;
                 res.set_content("unauthorized", "text/plain");
                 return;
               }
               int64_t generation = 0;
               if (!io::ParseInt64(req.get_param_value("generation"), &generation) ||
                   generation < 0) {
                 res.status = 400;
                 res.set_content("generation: expected a run number", "text/plain");
                 return;
               }
               const std::string dir = options_.work_dir + "/jobs/" + std::string(req.matches[1]) +
                                       "/run-" + std::to_string(generation);
               const int rank = std::stoi(req.matches[2]);
               // The log of the process that runs `rank`: rank-R.log, else the
               // per-node process's log with the highest first rank below it.
               std::string path;
               for (int r = rank; r >= 0 && path.empty(); --r) {
                 if (fs::exists(dir + "/rank-" + std::to_string(r) + ".log")) {
                   path = dir + "/rank-" + std::to_string(r) + ".log";
                 }
               }
               if (path.empty()) {
                 res.status = 404;
                 res.set_content("no log for rank " + std::to_string(rank) + " here", "text/plain");
                 return;
               }
               int64_t offset = 0, limit = 1 << 20;
               if (req.has_param("offset")) io::ParseInt64(req.get_param_value("offset"), &offset);
               if (req.has_param("limitBytes"))
                 io::ParseInt64(req.get_param_value("limitBytes"), &limit);
               limit = std::clamp<int64_t>(limit, 1, 16 << 20);
               // Across rotations: the offset is the stream's (log_file.h); the answer
               // says where to continue.
               int64_t next = 0;
               const std::string text = ReadLog(path, offset, limit, &next);
               res.set_header("X-Unipool-Offset", std::to_string(next));
               res.set_content(text, "text/plain; charset=utf-8");
             });
}

// ---- Loops ---------------------------------------------------------------------

std::string Agent::Health() {
  std::lock_guard lock(mu_);
  return health_;
}

nlohmann::json Agent::GpuReadings() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const GpuSample& g : gpu_samples_) {
    out.push_back({g.index, g.utilization, g.memory_used_mib, g.memory_total_mib, g.temperature_c,
                   g.power_w, g.ecc_uncorrected});
  }
  return out;
}

nlohmann::json Agent::XidCounts() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const GpuXidCount& x : xids_.counts()) out.push_back({x.gpu, x.xid, x.count});
  return out;
}

// The kernel log from now on, and which GPU each PCI address is.
void Agent::OpenKernelLog() {
  if (options_.kernel_log.empty()) return;
  if (Status st = kernel_log_.Open(options_.kernel_log); !st.ok()) {
    log_.Warn("agent", "GPU Xid errors are not read: " + st.message(),
              {{"kernel_log", options_.kernel_log}});
    return;
  }
  auto [code, out] = Shell(kGpuBusQuery);
  xids_ = XidLedger(code == 0 ? ParseGpuBusIds(out) : std::map<std::string, int>{});
}

void Agent::ReadXids() {
  if (!kernel_log_.is_open()) return;
  const std::vector<XidEvent> events = ParseXidEvents(kernel_log_.ReadNew());
  if (events.empty()) return;
  std::lock_guard lock(mu_);
  const bool was_faulty = !xids_.fault().empty();
  xids_.Add(events);
  if (!was_faulty && !xids_.fault().empty()) {
    log_.Warn("agent", "GPU Xid error: the node fails its health check", {{"why", xids_.fault()}});
  }
}

void Agent::HealthLoop() {
  while (!stop_) {
    std::string health = "ok";
    struct statvfs st;
    if (statvfs(options_.work_dir.c_str(), &st) == 0) {
      const int64_t free_mb = static_cast<int64_t>(st.f_bavail) * st.f_frsize / (1 << 20);
      if (free_mb < options_.min_free_disk_mb) {
        health = "disk: " + std::to_string(free_mb) + " MiB free in " + options_.work_dir;
      }
    }
    ReadXids();
    {
      std::lock_guard lock(mu_);
      if (health == "ok" && !xids_.fault().empty()) health = xids_.fault();
    }
    if (health == "ok" && gpus_discovered_) health = GpuHealth();
    if (health == "ok" && !options_.health_check.empty()) {
      auto [code, out] = Shell(options_.health_check);
      if (code != 0)
        health = "health check failed: " +
                 (out.empty() ? "exit " + std::to_string(code) : out.substr(0, 200));
    }
    // The GPUs' own readings, for the server's metrics (none from virtual GPUs).
    std::vector<GpuSample> samples;
    if (gpus_discovered_) {
      auto [code, out] = Shell(kGpuQuery);
      if (code == 0) samples = ParseGpuSamples(out);
    }
    {
      std::lock_guard lock(mu_);
      health_ = health;
      gpu_samples_ = std::move(samples);
    }
    for (int64_t end = SteadyMs() + options_.health_interval.value() / 1000000;
         SteadyMs() < end && !stop_;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

void Agent::Run() {
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
  health_thread_ = std::thread([this] { HealthLoop(); });
  fence_thread_ = std::thread([this] { FenceLoop(); });
  if (options_.outage_grace.value() > 0) evidence_thread_ = std::thread([this] { EvidenceLoop(); });
  Json current;
  while (!stop_) {
    {
      std::unique_lock lock(mu_);
      changed_.wait_for(lock, std::chrono::milliseconds(100),
                        [&] { return fresh_ || stop_.load(); });
      if (fresh_) {
        current = assignments_;
        fresh_ = false;
      }
    }
    try {
      if (!fenced_ && current.is_object()) Reconcile(current);
      for (auto& [id, run] : runs_) ForwardReports(id, *run);
    } catch (const Json::exception& e) {  // a malformed answer: skip it, keep running
      log_.Error("agent", std::string("bad assignments from the server: ") + e.what());
      current = Json();
    }
    RetryReports();
    CleanLogs();
    for (auto it = runs_.begin(); it != runs_.end();) {
      LocalRun& run = *it->second;
      CheckHung(it->first, run);
      bool ended = run.run.Poll();
      const bool failed =
          std::any_of(run.run.exits().begin(), run.run.exits().end(),
                      [](const ExitInfo& e) { return !e.ok() && !e.stopped_by_us; });
      if (!ended && failed && !run.run.stopping()) {  // one failed: the gang fails whole
        run.gang_failed = true;
        run.run.Kill();
        ended = true;
      }
      if (!ended) {
        ++it;
        continue;
      }
      {
        std::lock_guard lock(pids_mu_);
        for (pid_t p : run.pgids) pgids_.erase(p);
      }
      run.oom_kills = contain_->OomKills(it->first, run.generation);
      contain_->KillRun(it->first, run.generation);  // what its processes left behind
      // Past the deadline the watchdog may be killing the tasks this very
      // moment, its count not yet seen: that is the fence too.
      if (fenced_ || FenceCount() > run.fences_at_start || SteadyMs() > FenceDeadline()) {
        // Killed by the fence: tell the server once it is back (it may have
        // moved the job already; then the report is refused and dropped).
        // A disruption, not the job's failure.
        done_[it->first] = run.generation;
        unacked_[it->first] =
            Pending{run.generation, "disrupted",
                    "lost the server; the run was killed (fencing) on " + options_.node, Json()};
      } else {
        Finish(it->first, run);
      }
      done_membership_[it->first] = run.membership;
      it = runs_.erase(it);
    }
  }
  // Stopping on purpose: the agent stops its runs itself, with a grace.
  // Heartbeats and the fence deadline go on meanwhile: the server keeps the
  // node's lease while the runs live, and when it cannot (cut off), the
  // fence ends them before the lease does, grace or not.
  for (auto& [id, run] : runs_) run->run.Stop(5);
  for (auto& [id, run] : runs_) {
    while (!run->run.Poll()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    contain_->KillRun(id, run->generation);
  }
  runs_.clear();
  quit_ = true;  // nothing runs: heartbeats and fencing may end
}

void Agent::Stop() {
  stop_ = true;
  {
    std::lock_guard lock(mu_);
    if (watch_client_) watch_client_->stop();  // ends a long poll now
  }
  changed_.notify_all();
  if (http_) http_->stop();
}

// ---- Reconcile -----------------------------------------------------------------

void Agent::Reconcile(const Json& assignments) {
  static const Json kNone = Json::array();
  const Json& items = assignments.contains("items") ? assignments.at("items") : kNone;
  std::map<int64_t, const Json*> want;
  for (const Json& a : items) want[a.at("id").get<int64_t>()] = &a;
  {
    std::lock_guard lock(mu_);
    known_jobs_.clear();
    for (const auto& [id, a] : want) known_jobs_.insert(id);
    for (const auto& [id, run] : runs_) known_jobs_.insert(id);
  }
  // Runs the server no longer wants here (cancelled, ended, moved, or
  // one whose next run waits for this node: ClearingOf).
  for (auto& [id, run] : runs_) {
    auto w = want.find(id);
    const bool gone = w == want.end() ||
                      (*w->second)["generation"].get<int64_t>() != run->generation ||
                      run->generation <= ClearingOf(*w->second);
    if (gone && !run->run.stopping()) {
      // A newer run exists: this one lost a peer (a node failed, a task
      // failed), so its collectives hang and no checkpoint will come; a
      // short grace. Cancelled or ended: the queue's grace, to checkpoint.
      const bool superseded = w != want.end();
      const int grace = superseded ? std::min(run->grace_s, 2) : run->grace_s;
      log_.Info(
          "agent",
          superseded ? "stopping a run a newer one replaces" : "stopping a run the server ended",
          {{"job", id}, {"node", options_.node}, {"grace", int64_t{grace}}});
      run->run.Stop(grace);
    }
  }
  for (const auto& [id, a] : want) {
    const int64_t gen = (*a)["generation"].get<int64_t>();
    const std::string state = (*a)["state"];
    auto it = runs_.find(id);
    if (it != runs_.end()) {
      LocalRun& live = *it->second;
      const int64_t membership = (*a)["world"].value("membership", int64_t{0});
      if (live.generation == gen && live.membership != membership && !live.run.stopping() &&
          !TellMembership(id, *a, live)) {
        log_.Warn("agent", "this node's part of the job changed shape: stopping its processes",
                  {{"job", id}, {"node", options_.node}});
        live.gang_failed = true;
        live.run.Stop(2);
      }
      if (state == "Preempting" && it->second->generation == gen && !it->second->run.stopping()) {
        log_.Info("agent", "preempted: SIGTERM, then SIGKILL after the grace period",
                  {{"job", id}, {"grace", int64_t{it->second->grace_s}}});
        it->second->preempted = true;
        it->second->run.Stop(it->second->grace_s);
      }
      continue;
    }
    ConfirmGone(id, ClearingOf(*a));
    // Held while a node of an earlier run has not confirmed its end.
    const bool held = !a->value("clearing", Json::object()).empty();
    auto d = done_.find(id);
    // An elastic continue run may come back here with a newer membership.
    const auto left = done_membership_.find(id);
    const bool back = (*a)["world"].value("membership", int64_t{0}) >
                      (left == done_membership_.end() ? 0 : left->second);
    if (state == "Running" && !held && (d == done_.end() || d->second != gen || back)) StartRun(*a);
  }
  std::erase_if(gone_sent_, [&](const auto& e) { return !want.contains(e.first); });
}

// Tells the processes of an elastic continue run their new membership:
// each one's rendezvous file gets its new rank, world and master (they
// poll it, re-form their process group and go on). False when this node's
// processes are not the ones the membership lists here.
bool Agent::TellMembership(int64_t job, const Json& a, LocalRun& run) {
  const std::vector<Member> members = MembersHere(a);
  if (members.size() != run.rendezvous.size() || members.size() != run.reports.size()) {
    return false;
  }
  run.rank0 = false;
  for (size_t i = 0; i < members.size(); ++i) {
    if (Status st = WriteRendezvous(run.rendezvous[i], RendezvousOf(a, members[i])); !st.ok()) {
      log_.Warn("agent", st.message(), {{"job", job}, {"node", options_.node}});
      return false;
    }
    run.reports[i].rank = static_cast<int32_t>(members[i].rank);  // its signals' rank
    if (members[i].rank == 0) {
      run.rank0 = true;
      run.report0 = run.reports[i].path;
    }
  }
  run.membership = a["world"].value("membership", int64_t{0});
  log_.Info("agent", "new membership: the processes re-form their group",
            {{"job", job},
             {"membership", run.membership},
             {"worldSize", a["world"]["worldSize"].get<int64_t>()},
             {"node", options_.node}});
  return true;
}

// A run directory of an elastic continue job that this node left (it was
// lost, or its part was given back) and now rejoins with a newer
// membership: the old one is kept beside (run-G.left-M) and true returned.
// False: the same membership, so this agent restarted under its run.
bool Agent::SetAsideForRejoin(int64_t job, const Json& a, const std::string& dir) {
  const int64_t membership = a["world"].value("membership", int64_t{0});
  if (!a["spec"].value("elasticContinue", false) || membership == 0) return false;
  std::error_code ec;
  const std::string aside = dir + ".left-" + std::to_string(membership);
  fs::rename(dir, aside, ec);
  if (ec) return false;
  log_.Info("agent", "rejoining a run this node left", {{"job", job}, {"node", options_.node}});
  return true;
}

// The run of the job up to which the server waits for this node to confirm
// that its processes are gone; 0 when none.
int64_t Agent::ClearingOf(const Json& assignment) const {
  const Json c = assignment.value("clearing", Json::object());
  return c.is_object() ? c.value(options_.node, int64_t{0}) : 0;
}

// Tells the server (once a second at most, until it stops asking) that
// this node runs nothing of the job's runs up to `generation`. The job has
// no run here: none was started, or it ended and was erased.
void Agent::ConfirmGone(int64_t job, int64_t generation) {
  if (generation <= 0) {
    gone_sent_.erase(job);
    return;
  }
  if (runs_.contains(job)) return;
  auto [it, fresh] = gone_sent_.try_emplace(job, 0);
  if (!fresh && SteadyMs() - it->second < 1000) return;
  it->second = SteadyMs();
  Report(job, generation, "gone",
         "no process of run " + std::to_string(generation) + " or earlier is alive on " +
             options_.node);
}

void Agent::StartRun(const Json& a) {
  const int64_t id = a["id"];
  auto run = std::make_unique<LocalRun>();
  run->generation = a["generation"];
  run->grace_s = static_cast<int>(a.value("graceSeconds", int64_t{30}));
  const Json& spec = a["spec"];
  if (spec.contains("progressTimeoutNs") && spec["progressTimeoutNs"].is_number_integer()) {
    run->progress_timeout_ms = spec["progressTimeoutNs"].get<int64_t>() / 1000000;
  }
  run->dir =
      options_.work_dir + "/jobs/" + std::to_string(id) + "/run-" + std::to_string(run->generation);
  if (fs::exists(run->dir) && !SetAsideForRejoin(id, a, run->dir)) {
    // This agent ran it before it restarted: its processes died with it.
    done_[id] = run->generation;
    Report(id, run->generation, "disrupted",
           "the agent of " + options_.node + " restarted; this run's processes were lost");
    return;
  }
  Result<std::vector<ProcessSpec>> listed = Processes(a, *run);
  Status st = listed.ok() ? Status::Ok() : listed.status();
  if (st.ok() && listed->empty()) return;  // nothing of it runs here
  if (st.ok()) st = PrepareRunDir(*run);
  const std::vector<Member> members = MembersHere(a);
  for (size_t i = 0; st.ok() && i < run->rendezvous.size() && i < members.size(); ++i) {
    st = WriteRendezvous(run->rendezvous[i], RendezvousOf(a, members[i]));
  }
  if (!st.ok()) {
    log_.Warn("agent", "run refused: " + st.message(), {{"job", id}, {"node", options_.node}});
    Report(id, run->generation, "failed", "cannot start on " + options_.node + ": " + st.message());
    done_[id] = run->generation;
    return;
  }
  std::vector<ProcessSpec> procs = std::move(listed).value();
  const io::TaskLimits limits = LimitsOf(a["spec"]);
  const int64_t tasks = TasksOn(a, options_.node);
  std::string not_enforced;
  const std::string cgroup =
      contain_->PrepareRun(id, run->generation, limits, tasks, &not_enforced);
  if (!not_enforced.empty()) {
    log_.Warn("agent", "the job's limits are not all enforced here: " + not_enforced,
              {{"job", id}, {"node", options_.node}});
  }
  for (ProcessSpec& p : procs) {
    p.cgroup_procs = cgroup;
    p.env.emplace_back("UNIPOOL_FENCE", contain_->RunTag(id, run->generation));
  }
  run->fences_at_start = FenceCount();
  st = run->run.Start(procs);
  log_.Info("agent", st.ok() ? "started" : "start failed: " + st.message(),
            {{"job", id},
             {"generation", run->generation},
             {"processes", static_cast<int64_t>(procs.size())},
             {"node", options_.node}});
  if (!st.ok()) {
    Report(id, run->generation, "failed", "cannot start on " + options_.node + ": " + st.message());
    done_[id] = run->generation;
    return;
  }
  run->pgids = run->run.pids();
  for (size_t i = 0; i < run->reports.size() && i < run->pgids.size(); ++i) {
    run->reports[i].pid = run->pgids[i];  // both in launch order
  }
  {
    std::lock_guard lock(pids_mu_);
    pgids_.insert(run->pgids.begin(), run->pgids.end());
  }
  runs_[id] = std::move(run);
}

// Every process of the run ended (or one failed and the rest were killed).
void Agent::Finish(int64_t job, LocalRun& run) {
  done_[job] = run.generation;
  try {
    ForwardReports(job, run);  // its last words (a final checkpoint)
  } catch (const Json::exception&) {
  }
  if (run.preempted) {
    Report(job, run.generation, "stopped", "stopped on " + options_.node);
    return;
  }
  if (!run.hung_why.empty()) {
    Report(job, run.generation, "hung", run.hung_why + " (node " + options_.node + ")");
    return;
  }
  // Cancelled or moved: the server knows. A gang this agent killed because
  // one of its processes failed is reported, with that process's cause.
  if (run.run.stopping() && !run.gang_failed) return;
  if (run.run.all_ok()) {
    if (run.rank0) {
      Report(job, run.generation, "succeeded", "rank 0 exited 0 on " + options_.node,
             run.last_progress.is_object() ? Json{{"progress", run.last_progress}} : Json());
    }
    return;
  }
  const ExitInfo* bad = nullptr;
  for (const ExitInfo& e : run.run.exits()) {
    if (!e.ok() && !e.stopped_by_us) {
      bad = &e;
      break;
    }
  }
  std::string why = bad ? bad->Describe() : "a process failed";
  if (run.oom_kills > 0) {
    why += "; the kernel's OOM killer killed " + std::to_string(run.oom_kills) +
           " process(es) at the job's memory limit (raise spec.resources.memory, per task)";
  }
  const LogHint hint = DiagnoseLog(run.run.LogTails(16384));
  if (!hint.text.empty()) why += "; likely " + hint.text;
  log_.Warn("agent", "run failed: " + why, {{"job", job}, {"node", options_.node}});
  // A process that failed because a peer went away says so: the server
  // waits to learn whether the peer's node was lost (a disruption).
  const bool peer_lost = bad && PeerLost(TailLog(bad->log_path, 8192));
  Json data = Json::object();
  if (peer_lost) data["peerLost"] = true;
  if (!hint.cause.empty()) data["logCause"] = hint.cause;
  if (bad && bad->exit_code >= 0) data["exitCode"] = bad->exit_code;
  if (bad && bad->exit_code < 0) data["signal"] = bad->signal;
  Report(job, run.generation, "failed", why + " (node " + options_.node + ")",
         data.empty() ? Json() : data);
}

// Where rank 0 runs: a run that reported a step and then did not advance for
// its progressTimeout is hung. The operator's hook (--hang-hook, e.g. a
// py-spy dump) runs first, while the processes still live; then the gang is
// killed and reported "hung" with the last step and each local rank's last
// log line (the server restarts it like a failure).
void Agent::CheckHung(int64_t job, LocalRun& run) {
  if (run.progress_timeout_ms <= 0 || !run.rank0 || run.last_step < 0 || run.run.stopping() ||
      !run.hung_why.empty() || SteadyMs() - run.advanced_ms <= run.progress_timeout_ms) {
    return;
  }
  std::string why = "hung: no progress since step " + std::to_string(run.last_step) + " for " +
                    std::to_string(run.progress_timeout_ms / 1000) + "s";
  for (const auto& [rank, line] : run.run.LastLines()) {
    why += "; rank " + std::to_string(rank) + ": " + line.substr(0, 200);
  }
  if (!options_.hang_hook.empty()) {
    std::string pids;
    for (pid_t p : run.run.pids()) pids += (pids.empty() ? "" : " ") + std::to_string(p);
    std::string quoted = "'";  // the hook, as one shell word
    for (char c : options_.hang_hook)
      quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    auto [code, out] = Shell("env UNIPOOL_JOB_ID=" + std::to_string(job) + " UNIPOOL_PIDS='" +
                             pids + "' sh -c " + quoted);
    const std::string file = run.dir + "/hang-hook.txt";
    const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      const std::string text = out + "\n";
      [[maybe_unused]] const ssize_t n = write(fd, text.data(), text.size());
      close(fd);
    }
    why += "; hang hook exit " + std::to_string(code) + " (output in the run's hang-hook.txt)";
  }
  log_.Warn("agent", why, {{"job", job}, {"node", options_.node}});
  run.hung_why = why;
  run.run.Kill();
}

// Every 10 s: finished runs' files past the retention or the node's budget
// go (log_file.h CleanRuns); running runs' are capped per process.
void Agent::CleanLogs() {
  if (SteadyMs() - cleaned_ms_ < 10000) return;
  cleaned_ms_ = SteadyMs();
  std::set<std::string> running;
  for (const auto& [id, run] : runs_) running.insert(run->dir);
  const int removed = CleanRuns(options_.work_dir + "/jobs", running, options_.log_budget_bytes,
                                std::chrono::seconds(options_.log_retention.value() / 1000000000));
  if (removed > 0) {
    log_.Info("agent", "removed finished runs' logs (retention or node budget)",
              {{"node", options_.node}, {"runs", int64_t{removed}}});
  }
}

}  // namespace unipool::agent
