// Agent, fencing: containment and the watchdog at start, the fence
// deadline, the fence loop, and the outage evidence gathered from peers
// (see "Fencing" and "Outages" in agent.h).
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <thread>

#include "agent/agent.h"
#include "agent/steady_clock.h"

namespace unipool::agent {

int64_t Agent::FenceMs() const { return options_.lease.value() / 1000000 * 2 / 3; }

int64_t Agent::FenceCount() const {
  return own_fences_.load() + (watchdog_ ? watchdog_->fences() : 0);
}

// What a previous agent of this node left running dies now (its runs are
// reported lost when the server assigns them again); then the watchdog
// starts, before any thread or task.
void Agent::StartContainment() {
  contain_ = std::make_unique<Containment>(options_.work_dir, options_.node, options_.cgroup);
  const int left = contain_->KillAll();
  log_.Info("agent", "containment: " + contain_->mode(),
            {{"node", options_.node}, {"leftoverProcessesKilled", int64_t{left}}});
  if (const std::string note = contain_->limits_note(); !note.empty()) {
    log_.Warn("agent", note, {{"node", options_.node}});
  }
  if (options_.watchdog_exe.empty()) return;
  Result<std::unique_ptr<Watchdog>> w = Watchdog::Start(options_.watchdog_exe, *contain_);
  if (w.ok()) {
    watchdog_ = std::move(*w);
  } else {
    log_.Warn("agent", "no watchdog: a frozen agent cannot fence: " + w.status().message(),
              {{"node", options_.node}});
  }
}

int64_t Agent::FenceDeadline() const {
  return std::max(last_ok_ms_.load() + FenceMs(), outage_until_ms_.load());
}

void Agent::RenewDeadline() {
  if (watchdog_ && !quit_) watchdog_->SetDeadline(FenceDeadline());
}

// Fencing on a thread of its own, so that nothing else the agent waits for
// (a report, a slow disk) can delay it: past the deadline the server may
// give our work away, so every process of every run dies now. The watchdog
// does the same from outside; this loop also restarts it if it died.
void Agent::FenceLoop() {
  int64_t checked_ms = 0;
  while (!quit_) {
    const bool cut_off = SteadyMs() > FenceDeadline();
    if (cut_off && !fenced_) {
      log_.Warn("agent", "lost the server past the fence deadline: killing every task (fencing)",
                {{"node", options_.node}});
      ++own_fences_;
      {
        std::lock_guard lock(pids_mu_);
        for (pid_t pg : pgids_) kill(-pg, SIGKILL);
      }
      contain_->KillAll();
    }
    fenced_ = cut_off;
    if (watchdog_ && SteadyMs() - checked_ms > 1000) {
      checked_ms = SteadyMs();
      if (!watchdog_->EnsureRunning()) {
        log_.Error("agent", "the watchdog died and cannot be restarted", {{"node", options_.node}});
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// ---- Outage evidence -----------------------------------------------------------

// GET /peer/server (bearer: the peer secret): how long this agent has been
// without the server.
void Agent::ServePeers() {
  http_->Get("/peer/server", [this](const httplib::Request& req, httplib::Response& res) {
    std::string secret, old;
    {
      std::lock_guard lock(peers_mu_);
      secret = peer_secret_;
      old = old_peer_secret_;
    }
    const std::string auth = req.get_header_value("Authorization");
    if (secret.empty() ||
        (auth != "Bearer " + secret && (old.empty() || auth != "Bearer " + old))) {
      res.status = 401;
      res.set_content("unauthorized", "text/plain");
      return;
    }
    res.set_content(
        Json{{"node", options_.node}, {"silentMs", SteadyMs() - last_ok_ms_.load()}}.dump(),
        "application/json");
  });
}

bool Agent::TakePeers(const std::string& heartbeat_answer) {
  const Json j = Json::parse(heartbeat_answer, nullptr, false);
  if (!j.is_object() || !j.contains("peers") || !j["peers"].is_array() ||
      !j.value("liveNodes", Json()).is_number_integer() ||
      !j.value("peerSecret", Json()).is_string()) {
    return false;
  }
  std::vector<std::string> urls;
  for (const Json& p : j["peers"]) {
    if (p.is_object() && p.value("url", Json()).is_string()) urls.push_back(p["url"]);
  }
  std::lock_guard lock(peers_mu_);
  peer_urls_ = std::move(urls);
  live_nodes_ = j["liveNodes"].get<int64_t>();
  const std::string secret = j["peerSecret"];
  if (secret != peer_secret_) {
    old_peer_secret_ = peer_secret_;
    peer_secret_ = secret;
  }
  return true;
}

bool Agent::LiveNodesChanged(const std::string& heartbeat_answer) {
  const Json j = Json::parse(heartbeat_answer, nullptr, false);
  if (!j.is_object() || !j.value("liveNodes", Json()).is_number_integer()) return false;
  std::lock_guard lock(peers_mu_);
  return j["liveNodes"].get<int64_t>() != live_nodes_;
}

int64_t Agent::CountSilentPeers() {
  std::vector<std::string> urls;
  std::string secret;
  {
    std::lock_guard lock(peers_mu_);
    urls = peer_urls_;
    secret = peer_secret_;
  }
  const int64_t half_lease = options_.lease.value() / 1000000 / 2;
  std::atomic<int64_t> silent{1};  // this node
  // Asked in parallel, 64 at a time, each with a short timeout: the answer
  // is needed before the fence deadline.
  for (size_t from = 0; from < urls.size(); from += 64) {
    std::vector<std::thread> askers;
    for (size_t i = from; i < std::min(urls.size(), from + 64); ++i) {
      askers.emplace_back([&, url = urls[i]] {
        httplib::Client c(url);
        c.set_connection_timeout(0, 300000);
        c.set_read_timeout(0, 500000);
        auto r = c.Get("/peer/server", {{"Authorization", "Bearer " + secret}});
        if (!r || r->status != 200) return;
        const Json j = Json::parse(r->body, nullptr, false);
        if (j.is_object() && j.value("silentMs", Json()).is_number_integer() &&
            j["silentMs"].get<int64_t>() >= half_lease) {
          ++silent;
        }
      });
    }
    for (std::thread& t : askers) t.join();
  }
  return silent.load();
}

// Cut off for a third of the lease: asks the peers, often enough to decide
// before the fence deadline, and extends the deadline while a majority of
// the live nodes is without the server too.
void Agent::EvidenceLoop() {
  const int64_t lease = options_.lease.value() / 1000000;
  const int64_t grace = options_.outage_grace.value() / 1000000;
  const int64_t period = std::max<int64_t>(50, lease / 15);
  int said = -1;  // what was logged last: 1 outage, 0 not, -1 nothing
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(period));
    const int64_t last_ok = last_ok_ms_.load();
    if (SteadyMs() - last_ok <= lease / 3) {
      said = -1;
      continue;
    }
    const int64_t silent = CountSilentPeers();
    int64_t live = 0;
    {
      std::lock_guard lock(peers_mu_);
      live = live_nodes_;
    }
    const bool outage = live > 0 && silent * 2 > live;
    if (outage) {
      outage_until_ms_ = std::min(SteadyMs() + lease / 3, last_ok + grace);
      RenewDeadline();
    }
    if (said != outage) {
      said = outage;
      log_.Warn("agent",
                outage ? "the server is unreachable for a majority of the nodes: tasks keep "
                         "running up to the outage grace"
                       : "the server is unreachable from this node only (as far as its peers "
                         "tell): fencing at the lease as always",
                {{"node", options_.node}, {"silentNodes", silent}, {"liveNodes", live}});
    }
  }
}

}  // namespace unipool::agent
