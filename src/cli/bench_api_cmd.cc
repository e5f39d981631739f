// `unipool bench api`: a load generator for a running server, from a second
// process on loopback. Three phases, with `--heartbeat-nodes` nodes
// heartbeating every `--heartbeat-every` throughout (as their agents would):
//   1. submit `--submits` jobs from `--concurrency` connections: the
//      sustained rate of durably acknowledged submissions and latencies;
//   2. GET one job `--gets` times from `--get-concurrency` connections:
//      read latencies while the heartbeats and the scheduler run;
//   3. `--hold` longer with the heartbeats alone (`--submits 0 --gets 0
//      --hold 120s` measures what the server sustains in heartbeats).
// Heartbeats go over `--heartbeat-connections` keep-alive connections,
// many nodes on each, as a relay or a test harness would send them; their
// latencies and how late they left against their schedule are reported.
// Heartbeats use the given token, so it must be an admin's.
//
// With --hostile, attackers run beside the load the whole time: slow
// connections that send a header line every few seconds and never finish,
// idle keep-alive connections (reopened when the server closes them), and
// clients listing the largest pages in a loop. Missed leases and heartbeats
// are read from the server's /metrics before and after.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/client.h"
#include "cli/commands.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ApiBenchFlags {
  ClientConfig config;
  int submits = 20000;
  int concurrency = 32;
  int gets = 20000;
  int get_concurrency = 4;
  int heartbeat_nodes = 10000;
  std::string heartbeat_every = "5s";
  int heartbeat_connections = 0;  // 0: one per 500 nodes, at most 8
  std::string hold = "0s";
  int gpus = 8;
  std::string queue = "default";
  std::string output = "text";
  bool hostile = false;
  int slow_connections = 300;
  int idle_connections = 2000;
  int listers = 2;
};

struct Latencies {
  std::mutex mu;
  std::vector<double> ms;
  int64_t errors = 0;
  std::string first_error;
  void Add(double v) {
    std::lock_guard lock(mu);
    ms.push_back(v);
  }
  void Error(const std::string& e) {
    std::lock_guard lock(mu);
    if (errors++ == 0) first_error = e;
  }
  nlohmann::json Summary(double seconds) {
    std::sort(ms.begin(), ms.end());
    auto q = [&](double p) {
      return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, size_t(p * ms.size()))];
    };
    return {{"count", ms.size()},
            {"errors", errors},
            {"perSecond", ms.size() / seconds},
            {"p50Ms", q(0.50)},
            {"p90Ms", q(0.90)},
            {"p99Ms", q(0.99)},
            {"maxMs", ms.empty() ? 0.0 : ms.back()},
            {"seconds", seconds}};
  }
};

std::unique_ptr<httplib::Client> Connect(const ClientConfig& c) {
  auto http = std::make_unique<httplib::Client>(c.server);
  http->set_keep_alive(true);
  http->set_tcp_nodelay(true);
  http->set_connection_timeout(5, 0);
  http->set_read_timeout(60, 0);
  if (!c.ca_cert.empty()) http->set_ca_cert_path(c.ca_cert.c_str());
  http->set_default_headers({{"Authorization", "Bearer " + c.token}});
  return http;
}

// Runs `total` calls of `call(client, i)` over `threads` connections.
template <class Fn>
double RunLoad(const ClientConfig& c, int total, int threads, Latencies& lat, Fn call) {
  std::atomic<int> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto http = Connect(c);
      for (int i = next++; i < total; i = next++) {
        const auto s = Clock::now();
        std::string err = call(*http, i);
        if (err.empty()) {
          lat.Add(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        } else {
          lat.Error(err);
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string Check(const httplib::Result& r, int want) {
  if (!r) return "no connection: " + httplib::to_string(r.error());
  if (r->status != want) return "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200);
  return "";
}

// Sends one heartbeat per node per period, spread evenly, until `stop`.
// Latencies and lateness are counted from Steady() on.
class Heartbeats {
 public:
  Heartbeats(const ClientConfig& c, std::vector<std::string> nodes, Duration every, int threads)
      : nodes_(std::move(nodes)), every_(every) {
    if (threads <= 0) threads = std::max<int>(1, std::min<int>(8, nodes_.size() / 500 + 1));
    late_now_ = std::vector<std::atomic<int64_t>>(threads);
    for (int t = 0; t < threads; ++t)
      pool_.emplace_back([this, &c, t, threads] { Run(c, t, threads); });
  }
  ~Heartbeats() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : pool_)
      if (t.joinable()) t.join();
  }
  // Every connection sends its beats less than a second after their time.
  bool OnSchedule() const {
    for (const auto& ms : late_now_)
      if (ms.load() >= 1000) return false;
    return true;
  }
  void Steady() { steady_ = true; }
  // Read without a lock: call after Stop() only.
  int64_t sent() const { return latency_.ms.size(); }
  int64_t failed() const { return latency_.errors; }
  int connections() const { return pool_.size(); }
  // Call after Stop().
  Json Summary(double seconds) {
    Json out = latency_.Summary(seconds);
    std::sort(late_ms_.begin(), late_ms_.end());
    out["lateP99Ms"] = late_ms_.empty() ? 0.0 : late_ms_[size_t(0.99 * (late_ms_.size() - 1))];
    out["lateMaxMs"] = late_ms_.empty() ? 0.0 : late_ms_.back();
    return out;
  }

 private:
  void Run(const ClientConfig& c, int t, int threads) {
    auto http = Connect(c);
    const auto period = std::chrono::nanoseconds(every_.value());
    auto next = Clock::now();
    const auto gap = period / std::max<size_t>(1, (nodes_.size() + threads - 1) / threads);
    std::vector<double> late;
    while (!stop_) {
      for (size_t i = t; i < nodes_.size() && !stop_; i += threads) {
        next += gap;
        std::this_thread::sleep_until(next);
        const auto s = Clock::now();
        const double late_ms = std::chrono::duration<double, std::milli>(s - next).count();
        late_now_[t] = static_cast<int64_t>(late_ms);
        auto r = http->Post("/v1/nodes/" + nodes_[i] + "/heartbeat", "{\"health\":\"ok\"}",
                            "application/json");
        if (!steady_) continue;
        late.push_back(late_ms);
        if (std::string err = Check(r, 200); err.empty()) {
          latency_.Add(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        } else {
          latency_.Error(err);
        }
      }
    }
    std::lock_guard lock(latency_.mu);
    late_ms_.insert(late_ms_.end(), late.begin(), late.end());
  }
  std::vector<std::string> nodes_;
  Duration every_;
  std::atomic<bool> stop_{false}, steady_{false};
  std::vector<std::atomic<int64_t>> late_now_;  // per connection, ms
  Latencies latency_;
  std::vector<double> late_ms_;  // guarded by latency_.mu
  std::vector<std::thread> pool_;
};

// The attackers of --hostile, on raw sockets to the server's address.
class Hostile {
 public:
  Hostile(const ClientConfig& c, const ApiBenchFlags& f) {
    const std::string hostport = c.server.substr(c.server.find("://") + 3);
    const size_t colon = hostport.rfind(':');
    addr_.sin_family = AF_INET;
    addr_.sin_port = htons(static_cast<uint16_t>(std::atoi(hostport.substr(colon + 1).c_str())));
    inet_pton(AF_INET, hostport.substr(0, colon).c_str(), &addr_.sin_addr);
    rlimit nofile{};
    getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
    threads_.emplace_back([this, n = f.slow_connections] { Slow(n); });
    threads_.emplace_back([this, n = f.idle_connections] { Idle(n); });
    for (int i = 0; i < f.listers; ++i) {
      threads_.emplace_back([this, c] {
        auto http = Connect(c);
        while (!stop_) {
          auto r = http->Get("/v1/jobs?limit=1000");
          if (r && r->status == 200) lists_ += 1;
        }
      });
    }
  }
  ~Hostile() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  int64_t lists() const { return lists_; }

 private:
  int Open() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&addr_), sizeof addr_) != 0) {
      close(fd);
      return -1;
    }
    return fd;
  }
  void Send(int fd, const std::string& s) { (void)send(fd, s.data(), s.size(), MSG_NOSIGNAL); }
  // Headers that never end: a line every 3 s; reopened when cut.
  void Slow(int n) {
    std::vector<int> fds(n, -1);
    for (int round = 0; !stop_; ++round) {
      for (int& fd : fds) {
        if (fd < 0 || send(fd, "X-A: b\r\n", 8, MSG_NOSIGNAL) < 0) {
          if (fd >= 0) close(fd);
          fd = Open();
          if (fd >= 0) Send(fd, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n");
        }
      }
      for (int i = 0; i < 30 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  // Keep-alive connections that went quiet after one request; reopened
  // when the server closes them (its idle timeout).
  void Idle(int n) {
    std::vector<int> fds(n, -1);
    char buf[4096];
    while (!stop_) {
      for (int& fd : fds) {
        if (fd >= 0 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) == 0) {
          close(fd);
          fd = -1;
        }
        if (fd < 0) {
          fd = Open();
          if (fd >= 0) Send(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        }
      }
      for (int i = 0; i < 10 && !stop_; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }

  sockaddr_in addr_{};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> lists_{0};
  std::vector<std::thread> threads_;
};

// The sum of a counter's samples in the server's /metrics.
double CounterSum(Client& client, const std::string& name) {
  Result<Json> text = client.Call("GET", "/metrics");
  if (!text.ok() || !text->is_string()) return -1;
  double sum = 0;
  std::istringstream in(text->get<std::string>());
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(name + "{") || line.starts_with(name + " ")) {
      sum += std::atof(line.substr(line.rfind(' ') + 1).c_str());
    }
  }
  return sum;
}

int RunApiBench(ApiBenchFlags& f) {
  if (Status st = ResolveClientConfig(&f.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  Duration every;
  if (!io::ParseDuration(f.heartbeat_every, &every) || every.value() <= 0) {
    std::cerr << "error: --heartbeat-every: expected a duration like 5s\n";
    return kExitBadInput;
  }
  Duration hold;
  if (!io::ParseDuration(f.hold, &hold) || hold.value() < 0) {
    std::cerr << "error: --hold: expected a duration like 120s\n";
    return kExitBadInput;
  }
  Client client(f.config);
  Result<Json> nodes = client.Call("GET", "/v1/nodes");
  if (!nodes.ok()) {
    std::cerr << "error: " << nodes.status().message() << "\n";
    return ExitCodeFor(nodes.status());
  }
  std::vector<std::string> names;
  for (const Json& n : (*nodes)["items"]) {
    if (static_cast<int>(names.size()) < f.heartbeat_nodes) names.push_back(n["name"]);
  }
  if (static_cast<int>(names.size()) < f.heartbeat_nodes) {
    std::cerr << "warning: the cluster has " << names.size() << " nodes; heartbeating all\n";
  }
  // Start-up: every node beats once (a node coming up is a durable write),
  // then the load counts once every connection keeps its schedule.
  const auto start = Clock::now();
  Heartbeats beats(f.config, names, every, f.heartbeat_connections);
  std::this_thread::sleep_for(std::chrono::nanoseconds(every.value()));
  while (!beats.OnSchedule() && Clock::now() - start < std::chrono::minutes(5)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double startup_s = std::chrono::duration<double>(Clock::now() - start).count();
  beats.Steady();
  const auto beats0 = Clock::now();
  const double missed0 = CounterSum(client, "unipool_heartbeats_missed_total");
  const double lost0 = CounterSum(client, "unipool_node_failures_total");
  const double cpu0 = CounterSum(client, "process_cpu_seconds_total");
  std::unique_ptr<Hostile> hostile;
  if (f.hostile) hostile = std::make_unique<Hostile>(f.config, f);

  Latencies submit_lat;
  const std::string spec =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: bench}\n"
      "spec: {command: [sleep, '3600'], gpus: " +
      std::to_string(f.gpus) + ", queue: " + f.queue + "}\n";
  int64_t first_id = 0;
  std::mutex id_mu;
  const double submit_s =
      RunLoad(f.config, f.submits, f.concurrency, submit_lat, [&](httplib::Client& http, int) {
        auto r = http.Post("/v1/jobs", spec, "application/yaml");
        std::string err = Check(r, 201);
        if (err.empty() && first_id == 0) {
          std::lock_guard lock(id_mu);
          if (first_id == 0) first_id = Json::parse(r->body)["id"].get<int64_t>();
        }
        return err;
      });

  Latencies get_lat;
  const std::string path = "/v1/jobs/" + std::to_string(first_id);
  const double get_s =
      RunLoad(f.config, f.gets, f.get_concurrency, get_lat,
              [&](httplib::Client& http, int) { return Check(http.Get(path), 200); });
  std::this_thread::sleep_for(std::chrono::nanoseconds(hold.value()));
  if (hostile) hostile->Stop();
  beats.Stop();
  const Json beat_summary =
      beats.Summary(std::chrono::duration<double>(Clock::now() - beats0).count());
  const double missed = CounterSum(client, "unipool_heartbeats_missed_total") - missed0;
  const double lost = CounterSum(client, "unipool_node_failures_total") - lost0;
  const double cpu = CounterSum(client, "process_cpu_seconds_total") - cpu0;
  const double seconds = std::chrono::duration<double>(Clock::now() - beats0).count();

  Json out{{"server", f.config.server},
           {"hostile", f.hostile},
           {"missedHeartbeats", missed},
           {"missedLeases", lost},
           {"serverCpuSeconds", cpu},
           {"serverCpuShare", seconds > 0 ? cpu / seconds : 0.0},
           {"submit", submit_lat.Summary(submit_s)},
           {"get", get_lat.Summary(get_s)},
           {"heartbeats",
            {{"nodes", names.size()},
             {"every", f.heartbeat_every},
             {"connections", beats.connections()},
             {"startupSeconds", startup_s},
             {"sent", beats.sent()},
             {"failed", beats.failed()},
             {"p50Ms", beat_summary["p50Ms"]},
             {"p99Ms", beat_summary["p99Ms"]},
             {"maxMs", beat_summary["maxMs"]},
             {"lateP99Ms", beat_summary["lateP99Ms"]},
             {"lateMaxMs", beat_summary["lateMaxMs"]}}}};
  if (!submit_lat.first_error.empty()) out["submit"]["firstError"] = submit_lat.first_error;
  if (!get_lat.first_error.empty()) out["get"]["firstError"] = get_lat.first_error;
  if (f.output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    auto line = [](const char* what, const Json& s) {
      std::printf(
          "%-8s %7lld ok %5lld errors  %8.0f/s  p50 %6.2f ms  p90 %6.2f ms  p99 %6.2f ms  max "
          "%7.2f ms\n",
          what, static_cast<long long>(s["count"].get<int64_t>()),
          static_cast<long long>(s["errors"].get<int64_t>()), s["perSecond"].get<double>(),
          s["p50Ms"].get<double>(), s["p90Ms"].get<double>(), s["p99Ms"].get<double>(),
          s["maxMs"].get<double>());
    };
    line("submit", out["submit"]);
    line("get", out["get"]);
    const Json& b = out["heartbeats"];
    std::printf(
        "heartbeats: %zu nodes every %s on %d connections, on schedule after %.1f s; then %lld "
        "sent, %lld failed, p50 %.2f ms p99 %.2f ms max %.2f ms, left late p99 %.2f ms max "
        "%.2f ms; server: %.0f missed, %.0f leases expired\n",
        names.size(), f.heartbeat_every.c_str(), beats.connections(), startup_s,
        static_cast<long long>(beats.sent()), static_cast<long long>(beats.failed()),
        b["p50Ms"].get<double>(), b["p99Ms"].get<double>(), b["maxMs"].get<double>(),
        b["lateP99Ms"].get<double>(), b["lateMaxMs"].get<double>(), missed, lost);
    std::printf("server CPU: %.1f s in %.1f s since on schedule (%.0f%% of one core)\n", cpu,
                seconds, seconds > 0 ? 100 * cpu / seconds : 0.0);
    if (hostile) {
      std::printf("hostile: %d slow + %d idle connections, %lld pages of 1,000 jobs listed\n",
                  f.slow_connections, f.idle_connections, static_cast<long long>(hostile->lists()));
    }
    if (!submit_lat.first_error.empty())
      std::cout << "first submit error: " << submit_lat.first_error << "\n";
    if (!get_lat.first_error.empty())
      std::cout << "first get error: " << get_lat.first_error << "\n";
  }
  return submit_lat.errors + get_lat.errors > 0 ? kExitFailed : kExitOk;
}

}  // namespace

void AddBenchApiCommand(CLI::App& bench, int& exit_code) {
  auto f = std::make_shared<ApiBenchFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "api", "Load a running server: sustained submissions, then GET latency, with heartbeats");
  cmd->add_option("--server", f->config.server, "server URL (else $UNIPOOL_SERVER)");
  cmd->add_option("--token", f->config.token, "an admin token (else $UNIPOOL_TOKEN)");
  cmd->add_option("--submits", f->submits, "jobs to submit")->capture_default_str();
  cmd->add_option("--concurrency", f->concurrency, "connections submitting")->capture_default_str();
  cmd->add_option("--gets", f->gets, "GETs of one job")->capture_default_str();
  cmd->add_option("--get-concurrency", f->get_concurrency, "connections reading")
      ->capture_default_str();
  cmd->add_option("--heartbeat-nodes", f->heartbeat_nodes, "nodes that heartbeat")
      ->capture_default_str();
  cmd->add_option("--heartbeat-every", f->heartbeat_every, "each node's heartbeat period")
      ->capture_default_str();
  cmd->add_option("--heartbeat-connections", f->heartbeat_connections,
                  "connections the heartbeats share (0: one per 500 nodes, at most 8)")
      ->capture_default_str();
  cmd->add_option("--hold", f->hold, "after the GETs, heartbeats alone this long")
      ->capture_default_str();
  cmd->add_option("--gpus", f->gpus, "GPUs per submitted job")->capture_default_str();
  cmd->add_option("--queue", f->queue, "queue of the submitted jobs")->capture_default_str();
  cmd->add_flag("--hostile", f->hostile,
                "attack while loading: slow and idle connections, clients listing big pages");
  cmd->add_option("--slow-connections", f->slow_connections, "with --hostile")
      ->capture_default_str();
  cmd->add_option("--idle-connections", f->idle_connections, "with --hostile")
      ->capture_default_str();
  cmd->add_option("--listers", f->listers, "with --hostile: clients listing 1,000 jobs a page")
      ->capture_default_str();
  cmd->add_option("-o,--output", f->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([f, &exit_code] { exit_code = RunApiBench(*f); });
}

}  // namespace unipool::cli
