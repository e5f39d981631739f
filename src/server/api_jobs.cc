// The /v1/jobs handlers: submit, list, get, cancel, events, explain,
// report (agents) and logs (read through the job's agent).
#include <httplib.h>

#include <cmath>

#include "io/job_policy.h"
#include "io/quote.h"
#include "io/yaml_fields.h"
#include "server/api_call.h"
#include "server/diagnosis.h"
#include "server/records.h"

namespace unipool::server {

// ---- Jobs ------------------------------------------------------------------

// A job as the API shows it: its record, with the GPU-seconds of its current
// run so far counted in, and for a pending job its reason in one word and
// its estimated start (when the scheduler has one).
static Json JobToJson(const JobRecord& job,
                      const std::map<int64_t, ControlPlane::PendingView>& pending, Time now) {
  Json out = JobToJson(job);
  if (job.state == JobState::kRunning || job.state == JobState::kPreempting) {
    out["gpuSeconds"] = GpuSecondsAt(job, now);
    out["energyJoules"] = job.energy_joules;
    if (!job.power_source.empty()) {
      out["powerWatts"] = std::round(job.power_watts * 10) / 10;
      out["powerSource"] = job.power_source;
    }
  }
  if (auto it = pending.find(job.id); it != pending.end()) {
    out["reason"] = it->second.reason;
    if (it->second.start.value() >= 0) out["estimatedStart"] = FormatTime(it->second.start);
  }
  return out;
}

void ApiServer::SubmitJob(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kTenant}) || !c.Query({"dryRun"})) return;
  if (c.req.has_param("dryRun") && c.req.get_param_value("dryRun") != "true" &&
      c.req.get_param_value("dryRun") != "false") {
    c.Bad("dryRun: expected true or false");
    return;
  }
  Result<io::ParsedJob> parsed = io::ReadJobSpec(c.req.body, "body");
  if (!parsed.ok()) {
    c.Fail(parsed.status());
    return;
  }
  const io::JobRequest& r = parsed->job;
  if (!c.scope.Sees(r.queue)) {
    c.Fail(PermissionDenied("spec.queue: " + c.who.name + " may not submit to queue '" + r.queue +
                            "'"));
    return;
  }
  const bool tenant = c.who.role == Role::kTenant;
  if (Status st = io::CheckJobPolicy(r, tenant); !st.ok()) return c.Fail(st);
  if (c.req.get_param_value("dryRun") == "true") {
    if (Status st = control_.Validate(r); !st.ok()) return c.Fail(st);
    c.Reply(200, Json{{"dryRun", true},
                      {"spec", io::JobRequestToJson(r)},
                      {"ignored", parsed->ignored},
                      {"warnings", parsed->warnings}});
    return;
  }
  // Tenants are held to their queue's limits; admins are not.
  const ControlPlane::Submitter by{c.who.name, tenant, c.req.body.size(), c.who.run_as};
  Result<JobRecord> job = control_.Submit(r, by);
  if (!job.ok()) {
    c.Fail(job.status());
    return;
  }
  Json out = JobToJson(*job);
  out["ignored"] = parsed->ignored;
  out["warnings"] = parsed->warnings;
  c.res.set_header("Location", "/v1/jobs/" + std::to_string(job->id));
  c.Reply(201, out);
}

void ApiServer::ListJobs(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"state", "queue", "label", "limit", "continue", "since"})) {
    return;
  }
  JobFilter f;
  if (c.req.has_param("since")) {
    // An RFC 3339 time, or a duration before now (like sacct -S).
    const std::string since = c.req.get_param_value("since");
    Duration ago;
    Result<Time> at = ParseTime(since);
    if (at.ok()) {
      f.since = *at;
    } else if (io::ParseDuration(since, &ago)) {
      f.since = control_.Now() - ago;
    } else {
      c.Bad("since: expected a time like 2026-12-01T00:00:00.000Z or a duration like 7d, got " +
            io::Quote(since));
      return;
    }
    if (f.since.value() <= 0) f.since = Time(1);
  }
  int64_t limit = 0, before = 0;
  if (!c.Int("limit", 1, kMaxPage, 100, &limit) ||
      !c.Int("continue", 1, int64_t{1} << 62, 0, &before)) {
    return;
  }
  f.limit = static_cast<int32_t>(limit);
  f.before = before;
  f.max_bytes = kMaxPageBytes;
  if (c.req.has_param("state")) {
    f.state = ParseJobState(c.req.get_param_value("state"));
    if (!f.state) {
      c.Bad("state: expected Pending, Running, Preempting, Succeeded, Failed or Cancelled");
      return;
    }
  }
  f.queue = c.req.get_param_value("queue");
  for (size_t i = 0; i < c.req.get_param_value_count("label"); ++i) {
    const std::string sel = c.req.get_param_value("label", i);
    const size_t eq = sel.find('=');
    if (eq == std::string::npos || eq == 0) {
      c.Bad("label: expected key=value, got " + io::Quote(sel));
      return;
    }
    f.labels.emplace_back(sel.substr(0, eq), sel.substr(eq + 1));
  }
  bool more = false;
  std::vector<JobRecord> jobs = control_.List(f, c.scope, &more);
  std::vector<int64_t> ids;
  for (const JobRecord& j : jobs) ids.push_back(j.id);
  const auto pending = control_.Pending(ids);
  Json items = Json::array();
  for (const JobRecord& j : jobs) items.push_back(JobToJson(j, pending, control_.Now()));
  Json out{{"items", items}, {"revision", control_.store().revision()}};
  if (more && !jobs.empty()) out["continue"] = std::to_string(jobs.back().id);
  c.Reply(200, out);
}

void ApiServer::GetJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<JobRecord> job = control_.Get(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  Json out = JobToJson(*job, control_.Pending({id}), control_.Now());
  if (Result<std::string> why = control_.Explain(id, c.scope); why.ok()) out["explain"] = *why;
  c.Reply(200, out);
}

void ApiServer::CancelJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) return;
  Result<JobRecord> job = control_.Cancel(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  c.Reply(200, JobToJson(*job));
}

void ApiServer::JobEvents(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<std::vector<JobEvent>> events = control_.Events(id, c.scope);
  if (!events.ok()) return c.Fail(events.status());
  Json items = Json::array();
  for (const JobEvent& e : *events) items.push_back(EventToJson(e));
  c.Reply(200, Json{{"items", items}});
}

// The job's progress reports over time: {items: [{time, step, loss,
// throughput, gradNorm}]}, a field absent where its report had none.
void ApiServer::JobProgress(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<std::vector<ControlPlane::ProgressPoint>> points = control_.Progress(id, c.scope);
  if (!points.ok()) return c.Fail(points.status());
  Json items = Json::array();
  for (const ControlPlane::ProgressPoint& p : *points) {
    Json j{{"time", FormatTime(p.time)}};
    for (auto [key, v] : {std::pair{"step", p.step}, {"loss", p.loss},
                          {"throughput", p.throughput}, {"gradNorm", p.grad_norm}}) {
      if (std::isfinite(v)) j[key] = v;
    }
    items.push_back(std::move(j));
  }
  c.Reply(200, Json{{"items", items}});
}

void ApiServer::ExplainJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<std::string> why = control_.Explain(id, c.scope);
  if (!why.ok()) return c.Fail(why.status());
  c.Reply(200, Json{{"id", id}, {"explain", *why}});
}

// The likely causes of the job's trouble (server/diagnosis.h): {id, state,
// causes: [{kind, summary, evidence: [...], fix}], text}.
void ApiServer::DiagnoseJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<DiagnosisInput> in = GatherDiagnosis(control_, id, c.scope);
  if (!in.ok()) return c.Fail(in.status());
  const std::vector<Cause> causes = Diagnose(*in);
  Json items = Json::array();
  for (const Cause& k : causes) {
    items.push_back(
        Json{{"kind", k.kind}, {"summary", k.summary}, {"evidence", k.evidence}, {"fix", k.fix}});
  }
  c.Reply(200, Json{{"id", id},
                    {"state", JobStateName(in->job.state)},
                    {"causes", items},
                    {"text", DiagnosisText(in->job, causes)}});
}

void ApiServer::ReportJob(Call& c) {
  int64_t id = 0;
  Json body;
  if (!c.Allow({Role::kAdmin, Role::kAgent}) || !c.Query({}) || !c.JobId(&id) ||
      !c.Body({"generation", "kind", "message", "data"}, &body)) {
    return;
  }
  std::string data;
  if (body.contains("data")) {
    if (!body["data"].is_object() || body["data"].size() > 64) {
      return (void)c.Bad("body.data: expected a JSON object of at most 64 fields");
    }
    data = body["data"].dump();
  }
  if (!body.contains("generation") || !body["generation"].is_number_integer()) {
    c.Bad("body.generation: expected the job's run number (an integer)");
    return;
  }
  std::string kind, message;
  if (!c.String(body, "kind", 32, &kind, true) || !c.String(body, "message", 4096, &message)) {
    return;
  }
  if (c.who.role == Role::kAgent) {
    // An agent reports only jobs that run on its node.
    const std::vector<int64_t> mine = control_.JobsOn(c.who.node, Scope{});
    if (std::find(mine.begin(), mine.end(), id) == mine.end()) {
      c.Fail(PermissionDenied("job " + std::to_string(id) + " has no task on node " + c.who.node));
      return;
    }
  }
  Status st = control_.Report(id, body["generation"].get<int64_t>(), kind, message, data,
                              c.who.role == Role::kAgent ? c.who.node : "");
  if (!st.ok()) return c.Fail(st);
  c.Reply(200, Json{{"ok", true}});
}

// Logs live on the agents: the server finds the node of the rank and asks
// its agent (with the secret the agent gave in its heartbeats).
void ApiServer::JobLogs(Call& c) {
  int64_t id = 0, rank = 0, offset = 0, limit = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"rank", "offset", "limitBytes", "previous"}) || !c.JobId(&id) ||
      !c.Int("rank", 0, int64_t{1} << 24, 0, &rank) ||
      !c.Int("offset", 0, int64_t{1} << 50, 0, &offset) ||
      !c.Int("limitBytes", 1, 16 << 20, 1 << 20, &limit)) {
    return;
  }
  const std::string previous = c.req.get_param_value("previous");
  if (!previous.empty() && previous != "true" && previous != "false") {
    return (void)c.Bad("previous: expected true or false");
  }
  Result<JobRecord> job = control_.Get(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  // The run to read: the current one, or the last once it ended (its tasks
  // were cleared); with previous=true the one before the current.
  const bool running = !job->tasks.empty();
  int64_t generation = job->generation;
  const std::vector<TaskView>* tasks = &job->tasks;
  if (previous == "true" || (!running && job->previous_generation == job->generation)) {
    if (previous == "true" && (!running || job->previous_generation == 0)) {
      return c.Fail(NotFound("job " + std::to_string(id) +
                             " has no earlier run whose log is kept (only the run before the "
                             "current one is)"));
    }
    generation = job->previous_generation;
    tasks = &job->previous_tasks;
  }
  std::string node;
  int64_t first = 0;
  for (const TaskView& t : *tasks) {
    const int64_t n = static_cast<int64_t>(UsedGpus(*job, t).size());
    if (rank >= first && rank < first + n) node = t.node;
    first += n;
  }
  if (node.empty()) {
    return c.Fail(NotFound("job " + std::to_string(id) + " has no rank " + std::to_string(rank) +
                           (tasks->empty() ? " (it has not run yet)" : "")));
  }
  Result<NodeRecord> n = control_.Node(node);
  if (!n.ok() || n->agent_url.empty()) {
    return c.Fail(Unavailable("node " + node + " has no agent to read logs from"));
  }
  httplib::Client agent(n->agent_url);
  agent.set_connection_timeout(2, 0);
  agent.set_read_timeout(10, 0);
  httplib::Headers h = {{"Authorization", "Bearer " + n->agent_secret}};
  auto r = agent.Get("/logs/" + std::to_string(id) + "/" + std::to_string(rank) + "?generation=" +
                         std::to_string(generation) + "&offset=" + std::to_string(offset) +
                         "&limitBytes=" + std::to_string(limit),
                     h);
  if (!r) return c.Fail(Unavailable("the agent of node " + node + " did not answer"));
  if (r->status != 200) {
    return c.Fail(Status(r->status == 404 ? StatusCode::kNotFound : StatusCode::kUnavailable,
                         "agent of node " + node + ": " + r->body.substr(0, 200)));
  }
  c.res.set_header("X-Unipool-Offset", r->get_header_value("X-Unipool-Offset"));
  c.res.set_header("X-Unipool-Node", node);
  c.res.set_header("X-Unipool-Generation", std::to_string(generation));
  c.res.set_content(r->body, "text/plain; charset=utf-8");
}

}  // namespace unipool::server
