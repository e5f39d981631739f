// The /v1/nodes handlers: list, get, cordon/drain/uncordon, and the
// agents' join, heartbeat and assignments (long poll).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "server/api_call.h"
#include "server/records.h"

namespace unipool::server {

// ---- Nodes -----------------------------------------------------------------

// A node as the API shows it: its record, its GPUs held by jobs and free
// (ControlPlane::NodeUsage), and the jobs running there that `scope` sees.
static Json NodeToJson(const NodeRecord& n,
                       const std::map<std::string, ControlPlane::NodeUsage>& usage,
                       const Scope& scope) {
  Json out = NodeToJson(n);
  auto it = usage.find(n.name);
  const ControlPlane::NodeUsage u = it == usage.end() ? ControlPlane::NodeUsage{} : it->second;
  out["clockOffsetSeconds"] = std::isnan(n.clock_offset_s) ? Json() : Json(n.clock_offset_s);
  out["clockSkewed"] = n.clock_skewed;
  out["gpusAllocated"] = u.allocated;
  out["gpusFree"] = u.free;
  Json jobs = Json::array();
  for (const auto& [id, queue] : u.jobs) {
    if (scope.Sees(queue)) jobs.push_back(id);
  }
  out["jobs"] = jobs;
  return out;
}

void ApiServer::ListNodes(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"state", "partition"})) {
    return;
  }
  std::string state = c.req.get_param_value("state");
  for (char& ch : state) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string partition = c.req.get_param_value("partition");
  if (!state.empty() && !ParseNodeState(state)) {
    c.Bad("state: expected up, cordoned, drained, flaky or down");
    return;
  }
  const auto usage = control_.Usage();
  Json items = Json::array();
  for (const NodeRecord& n : control_.Nodes()) {
    if (!state.empty() && NodeStateName(n.state) != state) continue;
    if (!partition.empty() && n.partition != partition) continue;
    items.push_back(NodeToJson(n, usage, c.scope));
  }
  c.Reply(200, Json{{"items", items}, {"revision", control_.store().revision()}});
}

void ApiServer::GetNode(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant, Role::kAgent}) || !c.Query({}) ||
      !c.OwnNode(c.Path(1))) {
    return;
  }
  Result<NodeRecord> n = control_.Node(c.Path(1));
  if (!n.ok()) return c.Fail(n.status());
  Json out = NodeToJson(*n, control_.Usage(), c.scope);
  out["jobs"] = control_.JobsOn(n->name, c.scope);  // those still clearing from it, too
  c.Reply(200, out);
}

void ApiServer::NodeAction(Call& c) {
  Json body;
  if (!c.Allow({Role::kAdmin}) || !c.Query({}) || !c.Body({"reason"}, &body, false)) return;
  std::string reason;
  if (!c.String(body, "reason", 1024, &reason)) return;
  Result<NodeRecord> n =
      control_.SetNodeAdmin(c.Path(1), c.req.path.substr(c.req.path.rfind('/') + 1), reason);
  if (!n.ok()) return c.Fail(n.status());
  c.Reply(200, NodeToJson(*n));
}

static std::string NodePatterns(const Principal& p) {
  std::string out;
  for (const std::string& n : p.nodes) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Join: a join token (for a node without a live agent, within the token's
// nodes), the node's own agent token (rotates it) or an admin.
void ApiServer::JoinNode(Call& c) {
  Json body;
  if (!c.Allow({Role::kAdmin, Role::kJoin, Role::kAgent}) || !c.Query({}) ||
      !c.OwnNode(c.Path(1)) || !c.Body({"gpus"}, &body, false)) {
    return;
  }
  if (c.who.role == Role::kJoin && !c.who.MayJoin(c.Path(1))) {
    return c.Fail(PermissionDenied("join token '" + c.who.name + "' may not register node '" +
                                   c.Path(1) + "' (its nodes: " + NodePatterns(c.who) + ")"));
  }
  if (body.contains("gpus")) {
    Result<NodeRecord> n = control_.Node(c.Path(1));
    if (!n.ok()) return c.Fail(NotFound("node '" + c.Path(1) + "' is not in the cluster file"));
    if (!body["gpus"].is_number_integer() || body["gpus"].get<int64_t>() != n->gpus) {
      return (void)c.Bad("body.gpus: the agent has " + body["gpus"].dump() +
                         " GPUs; the cluster file gives node " + c.Path(1) + " " +
                         std::to_string(n->gpus));
    }
  }
  Result<std::string> token = NewToken();
  if (!token.ok()) return c.Fail(token.status());
  Status st = control_.Register(c.Path(1), Sha256Hex(*token), c.who.role != Role::kJoin);
  if (!st.ok()) return c.Fail(st);
  log_.Info("auth", "agent joined", {{"node", c.Path(1)}, {"by", c.who.name}});
  c.Reply(200, Json{{"node", c.Path(1)}, {"token", *token}});
}

bool ApiServer::ReadHeartbeat(Call& c, ControlPlane::HeartbeatInfo* info) {
  Json body;
  if (!c.Allow({Role::kAgent, Role::kAdmin}) || !c.Query({"peers"}) || !c.OwnNode(c.Path(1)) ||
      !c.Body({"health", "address", "agentUrl", "agentSecret", "gpus", "xids", "clockOffsetMs"},
              &body, false)) {
    return false;
  }
  // Its clock minus the server's, as the agent measured it (ms).
  if (body.contains("clockOffsetMs")) {
    const Json& o = body["clockOffsetMs"];
    if (!o.is_number() || !(std::abs(o.get<double>()) <= 1e12)) {
      return c.Bad(
          "body.clockOffsetMs: expected a number of milliseconds (at most 1e12 either way)");
    }
    info->clock_offset_s = o.get<double>() / 1000;
  }
  // Its GPUs' readings: [[index, utilization, memUsedMiB, memTotalMiB,
  // temperatureC, powerW, eccUncorrected], ...], -1 where a GPU gives none.
  if (body.contains("gpus")) {
    const Json& g = body["gpus"];
    if (!g.is_array() || g.size() > 64) {
      return c.Bad(
          "body.gpus: expected at most 64 readings [index, utilization, memUsedMiB, "
          "memTotalMiB, temperatureC, powerW, eccUncorrected]");
    }
    for (const Json& r : g) {
      if (!r.is_array() || r.size() != 7 ||
          !std::all_of(r.begin(), r.end(), [](const Json& v) { return v.is_number(); }) ||
          r[0].get<double>() < 0 || r[0].get<double>() > 64) {
        return c.Bad("body.gpus: each reading is 7 numbers, the first a GPU index (0 to 64)");
      }
      info->gpus.push_back(GpuSample{r[0].get<int>(), r[1].get<double>(), r[2].get<double>(),
                                     r[3].get<double>(), r[4].get<double>(), r[5].get<double>(),
                                     static_cast<int64_t>(r[6].get<double>())});
    }
  }
  // Its GPUs' Xid errors: [[gpu, xid, count], ...], gpu -1 where unknown.
  if (body.contains("xids")) {
    const Json& x = body["xids"];
    auto valid = [](const Json& r) {
      return r.is_array() && r.size() == 3 &&
             std::all_of(r.begin(), r.end(), [](const Json& v) { return v.is_number_integer(); }) &&
             r[0].get<int64_t>() >= -1 && r[0].get<int64_t>() <= 64 && r[1].get<int64_t>() >= 0 &&
             r[1].get<int64_t>() <= 9999 && r[2].get<int64_t>() >= 0;
    };
    if (!x.is_array() || x.size() > 1024 || !std::all_of(x.begin(), x.end(), valid)) {
      return c.Bad(
          "body.xids: expected at most 1024 counts [gpu (-1 to 64), xid (0 to 9999), count "
          "(0 or more)]");
    }
    for (const Json& r : x) {
      info->xids.push_back({r[0].get<int>(), r[1].get<int>(), r[2].get<int64_t>()});
    }
  }
  if (!c.String(body, "health", 1024, &info->health) ||
      !c.String(body, "address", 255, &info->address) ||
      !c.String(body, "agentUrl", 255, &info->agent_url) ||
      !c.String(body, "agentSecret", 255, &info->agent_secret)) {
    return false;
  }
  if (info->health.empty()) return c.Bad("body.health: empty; send ok or what is wrong");
  return true;
}

bool ApiServer::HeartbeatNow(Call& c) {
  if (c.req.has_param("peers")) return false;  // (a worker lists the peers)
  ControlPlane::HeartbeatInfo info;
  if (!ReadHeartbeat(c, &info)) return true;  // answered with the error
  if (!control_.RenewLease(c.Path(1), info)) return false;
  ReplyHeartbeat(c);
  return true;
}

void ApiServer::Heartbeat(Call& c) {
  ControlPlane::HeartbeatInfo info;
  if (!ReadHeartbeat(c, &info)) return;
  Status st = control_.Heartbeat(c.Path(1), info);
  if (!st.ok()) return c.Fail(st);
  ReplyHeartbeat(c);
}

void ApiServer::ReplyHeartbeat(Call& c) {
  // The server's wall clock: the agent measures its own against it.
  Json reply{{"ok", true}, {"serverTimeMs", control_.Now().value() / 1000000}};
  if (options_.peer_evidence) {
    // Every answer says how many nodes are live (an agent that sees it
    // change asks for its peers again); ?peers=1: who to ask whether the
    // server is down for everyone (agent.h).
    reply["liveNodes"] = control_.LiveNodes();
    if (c.req.get_param_value("peers") == "1") {
      int64_t live = 0;
      Json peers = Json::array();
      for (const auto& [node, url] : control_.Peers(c.Path(1), 4096, &live)) {
        peers.push_back(Json{{"node", node}, {"url", url}});
      }
      reply["peers"] = std::move(peers);
      reply["liveNodes"] = live;
      reply["peerSecret"] = peer_secret_;
    }
  }
  c.Reply(200, reply);
}

// What an agent needs to run its part of a job: the spec, every task in
// rank order with its node's address, and the rendezvous.
Json ApiServer::AssignmentJson(const JobRecord& j) {
  Json tasks = Json::array();
  int64_t rank = 0;
  std::string master;
  for (size_t k = 0; k < j.tasks.size(); ++k) {
    const TaskView& t = j.tasks[k];
    Result<NodeRecord> n = control_.Node(t.node);
    const std::string address = n.ok() && !n->address.empty() ? n->address : t.node;
    if (k == 0) master = address;
    const std::vector<int> used = UsedGpus(j, t);
    tasks.push_back({{"node", t.node},
                     {"address", address},
                     {"gpus", used},
                     {"nodeRank", k},
                     {"firstRank", rank}});
    rank += static_cast<int64_t>(used.size());
  }
  Json out = JobToJson(j);
  out["tasks"] = tasks;
  out["world"] = {{"masterAddr", master},
                  {"masterPort", MasterPort(j)},
                  {"worldSize", rank},
                  {"nnodes", j.tasks.size()},
                  {"membership", j.membership}};
  out["graceSeconds"] = control_.GraceSeconds(j.request.queue);
  out["checkpointIntervalSeconds"] = control_.CheckpointIntervalSeconds(j);
  // The secret values: only in the assignments of the job's own nodes.
  Json secrets = Json::array();
  for (const auto& [name, value] : j.request.secret_env) {
    secrets.push_back({{"name", name}, {"value", value}});
  }
  out["secretEnv"] = std::move(secrets);
  return out;
}

// Long poll when `revision` is given: answers once a job of this node, or
// one of the `jobs` the agent runs, changes after it (or at the timeout).
void ApiServer::Assignments(Call& c) {
  if (!c.Allow({Role::kAgent, Role::kAdmin}) || !c.Query({"revision", "timeoutSeconds", "jobs"}) ||
      !c.OwnNode(c.Path(1))) {
    return;
  }
  const std::string node = c.Path(1);
  if (!control_.Node(node).ok()) return c.Fail(NotFound("node '" + node + "' not found"));
  int64_t since = 0, timeout = 0;
  if (!c.Int("revision", 0, int64_t{1} << 62, 0, &since) ||
      !c.Int("timeoutSeconds", 0, kMaxWatchSeconds, 30, &timeout)) {
    return;
  }
  std::set<int64_t> known;
  std::stringstream ids(c.req.get_param_value("jobs"));
  for (std::string id; std::getline(ids, id, ',');) {
    int64_t v = 0;
    if (!ParseId(id, &v)) return (void)c.Bad("jobs: expected job ids separated by commas");
    known.insert(v);
  }
  int64_t rev = control_.store().revision();
  // A long poll holds a worker of its lane; when all of them wait already,
  // the transport sets no_wait and this answers at once.
  if (since > 0 && !c.req.no_wait) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    bool mine = false;
    while (!mine && !stopping_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      Result<std::vector<store::Event>> events = control_.store().Watch("/jobs/", since, left);
      if (!events.ok()) break;  // compacted: answer the current state
      if (events->empty()) break;
      for (const store::Event& e : *events) {
        since = std::max(since, e.kv.mod_revision);
        const Json obj = Json::parse(e.kv.value, nullptr, false);
        if (!obj.is_object()) continue;
        mine = mine || known.contains(obj.value("id", int64_t{0}));
        for (const Json& t : obj.value("tasks", Json::array())) {
          mine = mine || t.value("node", "") == node;
        }
        const Json clearing = obj.value("clearing", Json::object());
        mine = mine || (clearing.is_object() && clearing.contains(node));
      }
    }
    rev = std::max(since, rev);
  }
  Json items = Json::array();
  for (const JobRecord& j : control_.Assignments(node)) items.push_back(AssignmentJson(j));
  // Act only on durable decisions: a run the server could forget in a
  // crash must not start.
  if (Status st = control_.store().Sync(control_.store().revision()); !st.ok()) return c.Fail(st);
  c.Reply(200, Json{{"items", items}, {"revision", rev}});
}

}  // namespace unipool::server
