// Agent, its side of the control plane: the servers it knows (one leads,
// the others redirect; it moves on when one does not answer), joining and
// the node's token, heartbeats, the long poll of its assignments, and
// reports (see "Servers" in agent.h).
#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <thread>

#include "agent/agent.h"
#include "agent/agent_internal.h"
#include "agent/steady_clock.h"

namespace unipool::agent {

std::unique_ptr<httplib::Client> Agent::Client(const std::string& token, int read_timeout_s) const {
  auto c = std::make_unique<httplib::Client>(servers_.current());
  c->set_follow_location(true);  // a follower's 307 to the leader
  c->set_connection_timeout(1, 0);
  c->set_read_timeout(read_timeout_s, 0);
  c->set_tcp_nodelay(true);
  if (!options_.ca_cert.empty()) c->set_ca_cert_path(options_.ca_cert.c_str());
  c->set_default_headers({{"Authorization", "Bearer " + token}});
  return c;
}

bool Agent::ServerFailed(const std::string& url) const {
  if (servers_.size() < 2) return false;
  const bool round_done = servers_.Failed(url);
  if (servers_.current() == url) return false;
  ++server_gen_;
  log_.Warn("agent", "the server at " + url + " does not answer; trying " + servers_.current(),
            {{"node", options_.node}});
  return !round_done;
}

// ---- Joining and the node's token --------------------------------------------

std::string Agent::TokenPath() const { return options_.work_dir + "/node.token"; }

Result<std::string> Agent::Join(const std::string& token) const {
  httplib::Result r{nullptr, httplib::Error::Unknown};
  for (size_t k = 0; k < servers_.size() && !r; ++k) {
    const std::string url = servers_.current();
    r = Client(token, 10)->Post("/v1/nodes/" + options_.node + "/join",
                                Json{{"gpus", options_.gpus}}.dump(), "application/json");
    if (!r) ServerFailed(url);
  }
  if (!r) return Unavailable("cannot reach the server at " + options_.server);
  const Json body = Json::parse(r->body, nullptr, false);
  if (r->status == 200 && body.is_object() && body.value("token", "") != "") {
    return body["token"].get<std::string>();
  }
  std::string msg = "HTTP " + std::to_string(r->status);
  if (body.is_object() && body.contains("error")) msg = body["error"].value("message", msg);
  return Status(r->status == 401 || r->status == 403 ? StatusCode::kPermissionDenied
                : r->status == 409                   ? StatusCode::kFailedPrecondition
                : r->status >= 500                   ? StatusCode::kUnavailable
                                                     : StatusCode::kInvalidArgument,
                "join refused: " + msg);
}

// Join, again while no server answers or none leads (a server starting,
// an election): up to a minute, with jittered backoff.
Result<std::string> Agent::JoinPatiently(const std::string& token) const {
  const int64_t until = SteadyMs() + 60000;
  const uint64_t seed = std::hash<std::string>()(options_.node);
  for (int round = 1;; ++round) {
    Result<std::string> r = Join(token);
    if (r.ok() || r.status().code() != StatusCode::kUnavailable || SteadyMs() > until) return r;
    if (round == 1) {
      log_.Warn("agent", "joining: " + r.status().message() + "; trying again",
                {{"node", options_.node}});
    }
    std::this_thread::sleep_for(server::ServerList::Backoff(round, seed));
  }
}

// Keeps the node's token (memory, and its file: owner-only) for every
// later call; loops that hold a client make a new one.
Status Agent::UseToken(const std::string& token) {
  const std::string path = TokenPath(), tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  const bool written =
      fd >= 0 && write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  if (fd >= 0) close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot write the node's token to " + path);
  }
  std::lock_guard lock(token_mu_);
  token_ = token;
  ++token_gen_;
  return Status::Ok();
}

std::string Agent::Token() const {
  std::lock_guard lock(token_mu_);
  return token_;
}

// The server no longer takes this node's token: another agent joined as
// this node, or an admin re-joined or revoked it. Joins again with the join
// token where the server allows it (no live agent holds the node).
void Agent::Rejoin() {
  Result<std::string> token = Join(options_.join_token);
  if (token.ok()) token = UseToken(*token).ok() ? token : Result<std::string>(token.status());
  if (token.ok()) {
    log_.Warn("agent", "this node's token had been replaced; joined again",
              {{"node", options_.node}});
    return;
  }
  log_.Error("agent",
             "the server refuses this node's token (another agent joined as this node, or an "
             "admin re-joined or revoked it), and joining again failed: " +
                 token.status().message(),
             {{"node", options_.node}});
}

namespace {
int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

std::optional<double> ClockOffsetMs(int64_t sent_ms, int64_t received_ms, int64_t server_ms,
                                    int64_t max_rtt_ms) {
  if (received_ms < sent_ms || received_ms - sent_ms > max_rtt_ms) return std::nullopt;
  return static_cast<double>(sent_ms + received_ms) / 2 - static_cast<double>(server_ms);
}

void Agent::HeartbeatLoop() {
  int64_t gen = token_gen_, sgen = server_gen_;
  auto c = Client(Token(), 5);
  std::string url = servers_.current();
  const int64_t period = options_.heartbeat.value() / 1000000;
  int64_t peers_ms = -1000000;
  while (!quit_) {
    const int64_t t0 = SteadyMs();
    if (gen != token_gen_ || sgen != server_gen_) {
      gen = token_gen_;
      sgen = server_gen_;
      c = Client(Token(), 5);
      url = servers_.current();
    }
    // With an outage grace, the peers to ask are refreshed every 10 s.
    const bool peers = options_.outage_grace.value() > 0 && t0 - peers_ms >= 10000;
    Json beat{{"health", Health()},
              {"address", options_.address},
              {"agentUrl", agent_url_},
              {"agentSecret", secret_}};
    if (Json gpus = GpuReadings(); !gpus.empty()) beat["gpus"] = std::move(gpus);
    if (Json xids = XidCounts(); !xids.empty()) beat["xids"] = std::move(xids);
    if (clock_offset_ms_) beat["clockOffsetMs"] = std::round(*clock_offset_ms_ * 10) / 10;
    const int64_t sent = WallMs();
    auto r = c->Post("/v1/nodes/" + options_.node + "/heartbeat" + (peers ? "?peers=1" : ""),
                     beat.dump(), "application/json");
    if (r && r->status == 200) {
      // From when it was sent: the server's lease began at or after t0.
      last_ok_ms_ = t0;
      RenewDeadline();
      const Json reply = Json::parse(r->body, nullptr, false);
      if (reply.is_object() && reply.value("serverTimeMs", Json()).is_number_integer()) {
        if (auto o = ClockOffsetMs(sent, WallMs(), reply["serverTimeMs"].get<int64_t>())) {
          clock_offset_ms_ = o;
        }
      }
      if (peers && TakePeers(r->body)) peers_ms = t0;
      if (!peers && options_.outage_grace.value() > 0 && LiveNodesChanged(r->body)) {
        peers_ms = -1000000;  // ask for the peers with the next beat
      }
    } else if (r && r->status == 401) {
      Rejoin();
    } else {
      log_.Warn(
          "agent", "heartbeat failed",
          {{"node", options_.node},
           {"error", r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error())}});
      if (!r && ServerFailed(url)) continue;  // the next server, at once
    }
    while (!quit_ && SteadyMs() < t0 + period)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Long-polls this node's assignments and hands each answer to Run().
void Agent::WatchLoop() {
  int64_t gen = token_gen_, sgen = server_gen_;
  auto c = Client(Token(), 40);
  std::string url = servers_.current();
  {
    std::lock_guard lock(mu_);
    watch_client_ = c.get();
  }
  int64_t revision = 0;
  while (!stop_) {
    if (gen != token_gen_ || sgen != server_gen_) {
      gen = token_gen_;
      sgen = server_gen_;
      std::lock_guard lock(mu_);
      c = Client(Token(), 40);
      url = servers_.current();
      watch_client_ = c.get();
      revision = 0;  // another server's revisions: list again
    }
    std::string jobs;
    {
      std::lock_guard lock(mu_);
      for (int64_t id : known_jobs_) jobs += (jobs.empty() ? "" : ",") + std::to_string(id);
    }
    std::string path = "/v1/nodes/" + options_.node + "/assignments?timeoutSeconds=10";
    if (revision > 0) path += "&revision=" + std::to_string(revision);
    if (!jobs.empty()) path += "&jobs=" + jobs;
    auto r = c->Get(path);
    if (!r) ServerFailed(url);
    if (!r || r->status != 200) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    Json body = Json::parse(r->body, nullptr, false);
    if (!body.is_object()) continue;
    if (body.contains("revision") && body["revision"].is_number_integer()) {
      revision = body["revision"].get<int64_t>();
    }
    {
      std::lock_guard lock(mu_);
      assignments_ = std::move(body);
      fresh_ = true;
    }
    changed_.notify_all();
  }
  std::lock_guard lock(mu_);
  watch_client_ = nullptr;
}

// ---- Reports ---------------------------------------------------------------------

// Final reports (succeeded, failed, stopped) must reach the server, or the
// job would stay Running with nothing running: kept and retried each second
// until the server answers (OK, or a 4xx that says it no longer matters).
void Agent::RetryReports() {
  if (unacked_.empty() || SteadyMs() - last_retry_ms_ < 1000) return;
  last_retry_ms_ = SteadyMs();
  const auto pending = unacked_;  // Report edits unacked_
  for (const auto& [job, p] : pending) Report(job, p.generation, p.kind, p.message, p.data);
}

bool Agent::Report(int64_t job, int64_t generation, const std::string& kind, const std::string& msg,
                   const Json& data) {
  const bool final = kind == "succeeded" || kind == "failed" || kind == "stopped" ||
                     kind == "disrupted" || kind == "hung";
  if (final) unacked_[job] = Pending{generation, kind, msg, data};
  auto c = Client(Token(), 3);
  Json body{{"generation", generation}, {"kind", kind}, {"message", msg}};
  if (data.is_object()) body["data"] = data;
  for (int attempt = 0; attempt < (final ? 2 : 1); ++attempt) {
    auto r =
        c->Post("/v1/jobs/" + std::to_string(job) + "/report", body.dump(), "application/json");
    if (r && r->status < 500 && r->status != 401) {  // (401: kept until a new token)
      if (r->status != 200 && kind != "progress") {
        log_.Info("agent", "report not taken: " + r->body.substr(0, 200),
                  {{"job", job}, {"kind", kind}});
      }
      if (final) unacked_.erase(job);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace unipool::agent
