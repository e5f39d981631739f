// Cluster-wide handlers: /metrics, /v1/summary, /v1/queues and /v1/watch.
#include <cmath>

#include "io/quote.h"
#include "io/text.h"
#include "server/api_call.h"
#include "server/records.h"

namespace unipool::server {

// ---- Cluster ---------------------------------------------------------------

void ApiServer::Metrics_(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly}) || !c.Query({})) return;
  control_.UpdateGauges();
  metrics_.Set("unipool_api_connections", {}, http_->connections());
  UpdateProcessMetrics(metrics_);
  c.res.set_content(metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8");
}

void ApiServer::Summary(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  c.Reply(200, SummaryToJson(control_.GetSummary(c.scope)));
}

// ---- Queues ----------------------------------------------------------------

void ApiServer::ListQueues(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  Json items = Json::array();
  for (const QueueRecord& q : control_.Queues(c.scope)) items.push_back(QueueToJson(q));
  c.Reply(200, Json{{"items", items}, {"revision", control_.store().revision()}});
}

void ApiServer::GetQueue(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  for (const QueueRecord& q : control_.Queues(c.scope)) {
    if (q.spec.name == c.Path(1)) return c.Reply(200, QueueToJson(q));
  }
  c.Fail(NotFound("queue '" + c.Path(1) + "' not found"));
}

void ApiServer::PutQueue(Call& c) {
  Json body;
  if (!c.Allow({Role::kAdmin}) || !c.Query({}) || !c.AnyBody(&body)) return;
  if (!io::IsQueueName(c.Path(1))) {
    return (void)c.Bad("queue name " + io::Quote(c.Path(1)) + ": expected " + io::kQueueNameRule);
  }
  Result<sched::QueueSpec> spec = QueueSpecFromJson(body, "body");
  if (!spec.ok()) return c.Fail(spec.status());
  Result<SubmitLimits> limits = SubmitLimitsFromJson(body, "body");
  if (!limits.ok()) return c.Fail(limits.status());
  if (!spec->name.empty() && spec->name != c.Path(1)) {
    return (void)c.Bad("body.name: '" + spec->name + "' differs from the path's '" + c.Path(1) +
                       "'");
  }
  spec->name = c.Path(1);
  Result<QueueRecord> q = control_.SetQueue(*spec, *limits);
  if (!q.ok()) return c.Fail(q.status());
  c.Reply(200, QueueToJson(*q));
}

// ---- Topology ----------------------------------------------------------------

// One group of the topology and its children with their GPUs' use, for the
// dashboard's drawing: ?tier=T&group=G (default: the whole cluster), and
// &job=ID to count that job's GPUs in each.
void ApiServer::TopologyView(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"tier", "group", "job"})) {
    return;
  }
  const Topology& topo = control_.topology();
  int64_t tier = 0, group = 0, job = 0;
  if (!c.Int("tier", 0, topo.top_tier(), topo.top_tier(), &tier) ||
      !c.Int("group", 0, int64_t{1} << 30, 0, &group) ||
      !c.Int("job", 0, int64_t{1} << 62, 0, &job)) {
    return;
  }
  if (job > 0) {
    if (Result<JobRecord> j = control_.Get(job, c.scope); !j.ok()) return c.Fail(j.status());
  }
  Result<std::vector<ControlPlane::GroupUsage>> view =
      control_.GroupView(static_cast<int>(tier), static_cast<int32_t>(group), job);
  if (!view.ok()) return c.Fail(view.status());
  auto to_json = [&](const ControlPlane::GroupUsage& g) {
    Json j{{"name", g.name},   {"index", g.index},
           {"nodes", g.nodes}, {"nodesDown", g.nodes_down},
           {"gpus", g.gpus},   {"allocated", g.allocated},
           {"free", g.free},   {"unavailable", g.gpus - g.allocated - g.free}};
    if (g.tier >= 0) j["tier"] = topo.tier(g.tier).name;
    if (g.tier < 0) j["state"] = g.state;
    if (job > 0) j["jobGpus"] = g.job_gpus;
    if (g.power_gpus > 0) {
      j["powerWatts"] = std::round(g.power_w * 10) / 10;
      j["powerGpus"] = g.power_gpus;
    }
    return j;
  };
  Json children = Json::array();
  for (size_t i = 1; i < view->size(); ++i) children.push_back(to_json((*view)[i]));
  // The path from the top down to this group, for breadcrumbs.
  Json path = Json::array();
  GroupId g(static_cast<int32_t>(group));
  for (int t = static_cast<int>(tier); t <= topo.top_tier(); ++t) {
    path.insert(path.begin(), Json{{"tier", t},
                                   {"tierName", topo.tier(t).name},
                                   {"group", g.value()},
                                   {"name", topo.group_name(t, g)}});
    if (t < topo.top_tier()) g = topo.parent(t, g);
  }
  Json tiers = Json::array();
  for (int t = 0; t < topo.num_tiers(); ++t) tiers.push_back(topo.tier(t).name);
  Json out = to_json((*view)[0]);
  out["tierIndex"] = tier;
  out["tiers"] = tiers;
  out["path"] = path;
  out["children"] = children;
  out["childKind"] = tier == 0 ? "node" : topo.tier(static_cast<int>(tier) - 1).name;
  c.Reply(200, out);
}

// ---- Watch -----------------------------------------------------------------

// Long poll: the changes after `revision`, waiting up to `timeoutSeconds`
// for the first. Answers {revision, events: [{type, kind, object}]}; watch
// again from the returned revision. 409 when the revision is compacted.
void ApiServer::Watch(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"kind", "revision", "timeoutSeconds"})) {
    return;
  }
  const std::string kind = c.req.has_param("kind") ? c.req.get_param_value("kind") : "jobs";
  if (kind != "jobs" && kind != "nodes" && kind != "queues") {
    return (void)c.Bad("kind: expected jobs, nodes or queues, got " + io::Quote(kind));
  }
  int64_t since = 0, timeout = 0;
  if (!c.Int("revision", 0, int64_t{1} << 62, control_.store().revision(), &since) ||
      !c.Int("timeoutSeconds", 0, kMaxWatchSeconds, 30, &timeout)) {
    return;
  }
  Result<std::vector<store::Event>> events = control_.store().Watch(
      "/" + kind + "/", since, std::chrono::seconds(c.req.no_wait ? 0 : timeout));
  if (!events.ok()) return c.Fail(events.status());
  Json items = Json::array();
  int64_t rev = since;
  for (const store::Event& e : *events) {
    rev = std::max(rev, e.kv.mod_revision);
    Json obj = e.type == store::Event::Type::kPut ? Json::parse(e.kv.value, nullptr, false)
                                                  : Json{{"key", e.kv.key}};
    if (kind == "jobs" && obj.is_object() && !c.scope.Sees(obj.value("queue", ""))) continue;
    if (kind == "queues" && obj.is_object() && !c.scope.Sees(obj.value("name", ""))) continue;
    items.push_back(Json{{"type", e.type == store::Event::Type::kPut ? "PUT" : "DELETE"},
                         {"kind", kind},
                         {"revision", e.kv.mod_revision},
                         {"object", obj}});
  }
  c.Reply(200, Json{{"revision", rev}, {"events", items}});
}

}  // namespace unipool::server
