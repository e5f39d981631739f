#include "server/records.h"

#include <cstdio>
#include <ctime>
#include <tuple>

#include "io/quote.h"
#include "io/text.h"
#include "server/auth.h"

namespace unipool::server {
namespace {

Json TimeJson(Time t) { return t.value() == 0 ? Json(nullptr) : Json(FormatTime(t)); }

Result<Time> TimeField(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return Time(0);
  if (!j[key].is_string()) return InvalidArgument(std::string(key) + ": expected a time");
  return ParseTime(j[key].get<std::string>());
}

std::string Pad(int64_t v, int width) {
  std::string s = std::to_string(v);
  return std::string(width > static_cast<int>(s.size()) ? width - s.size() : 0, '0') + s;
}

const char* kPolicies[] = {"best-effort", "fifo"};

}  // namespace

std::string JobKey(int64_t id) { return "/jobs/" + Pad(id, 12); }
std::string SecretKey(int64_t id) { return "/secrets/" + Pad(id, 12); }

Json SecretsToJson(const io::JobRequest& r) {
  Json out = Json::object();
  for (const auto& [name, value] : r.secret_env) out[name] = value;
  return out;
}

Status FillSecrets(const Json& j, io::JobRequest& r) {
  for (auto& [name, value] : r.secret_env) {
    if (!j.is_object() || !j.contains(name) || !j[name].is_string()) {
      return InvalidArgument("secret value " + name + " is missing");
    }
    value = j[name].get<std::string>();
  }
  return Status::Ok();
}
std::string EventKey(int64_t job, int64_t seq) {
  return "/events/" + Pad(job, 12) + "/" + Pad(seq, 6);
}
std::string NodeKey(const std::string& name) { return "/nodes/" + name; }
std::string QueueKey(const std::string& name) { return "/queues/" + name; }
std::string AgentKey(const std::string& name) { return "/agents/" + name; }
std::string UsageKey() { return "/usage"; }

Json JobToJson(const JobRecord& job) {
  Json tasks = Json::array();
  for (const TaskView& t : job.tasks) tasks.push_back({{"node", t.node}, {"gpus", t.gpus}});
  Json previous = Json::array();
  for (const TaskView& t : job.previous_tasks) {
    previous.push_back({{"node", t.node}, {"gpus", t.gpus}});
  }
  return Json{
      {"id", job.id},
      {"name", job.request.name},
      {"queue", job.request.queue},
      {"owner", job.owner},
      {"identity",
       {{"runAs", job.identity.run_as},
        {"tenant", job.identity.tenant},
        {"allowRoot", job.identity.allow_root}}},
      {"state", JobStateName(job.state)},
      {"message", job.message},
      {"submitted", TimeJson(job.submitted)},
      {"started", TimeJson(job.started)},
      {"finished", TimeJson(job.finished)},
      {"lastCheckpoint", TimeJson(job.last_checkpoint)},
      {"preemptDeadline", TimeJson(job.preempt_deadline)},
      {"retryAt", TimeJson(job.retry_at)},
      {"progress",
       job.progress.empty() ? Json(nullptr) : Json::parse(job.progress, nullptr, false)},
      {"restarts", job.restarts},
      {"disruptions", job.disruptions},
      {"preemptions", job.preemptions},
      {"generation", job.generation},
      {"membership", job.membership},
      {"masterPort", job.master_port},
      {"lostGpuSeconds", job.lost_gpu_seconds},
      {"gpuSeconds", job.gpu_seconds},
      {"accountedTo", TimeJson(job.accounted_to)},
      {"energyJoules", job.energy_joules},
      {"energyTo", TimeJson(job.energy_to)},
      {"checkpoints", job.checkpoints},
      {"checkpointNote", job.checkpoint_note},
      {"checkpointSeconds", job.checkpoint_seconds},
      {"checkpointBytes", job.checkpoint_bytes},
      {"startupSeconds", job.startup_seconds},
      {"savesOnStop", job.saves_on_stop},
      {"exitCode", job.exit_code < 0 ? Json() : Json(job.exit_code)},
      {"exitSignal", job.exit_signal == 0 ? Json() : Json(job.exit_signal)},
      {"events", job.events},
      {"tasks", tasks},
      {"previousRun", job.previous_generation == 0
                          ? Json()
                          : Json{{"generation", job.previous_generation}, {"tasks", previous}}},
      {"stoppedNodes", job.stopped_nodes},
      {"clearing", job.clearing},
      {"peerFailure",
       job.peer_failure_generation == 0 || job.peer_failure_generation != job.generation
           ? Json(nullptr)
           : Json{{"generation", job.peer_failure_generation},
                  {"node", job.peer_failure_node},
                  {"message", job.peer_failure_why}}},
      {"spec", io::JobRequestToJson(job.request)}};
}

// A whole number in [lo, hi] at `key` of `j` (a stored record: errors name
// the field; nothing out of range is converted).
static Status StoredInt(const Json& j, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  if (!j.contains(key) || !j[key].is_number_integer()) {
    return InvalidArgument(std::string("job.") + key + ": expected a whole number");
  }
  const Json& v = j[key];
  const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                                     static_cast<int64_t>(v.get<uint64_t>()) >= lo
                                               : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!in_range) {
    return InvalidArgument(std::string("job.") + key + ": " + v.dump() + " is out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  *out = v.get<int64_t>();
  return Status::Ok();
}

// A run's tasks ([{node, gpus}]) at `where`. Throws Json::exception on a
// missing field or a wrong type (the caller names the record).
static Status TasksFromJson(const Json& tasks, const std::string& where,
                            std::vector<TaskView>& out) {
  for (const Json& t : tasks) {
    TaskView view{t.at("node").get<std::string>(), {}};
    for (const Json& g : t.at("gpus")) {
      // GPU indexes are small: a node has at most kMaxGpuIndex GPUs.
      if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > kMaxGpuIndex) {
        return InvalidArgument(where + ".gpus: " + g.dump() + " is not a GPU index (0 to " +
                               std::to_string(kMaxGpuIndex) + ")");
      }
      view.gpus.push_back(static_cast<int>(g.get<int64_t>()));
    }
    out.push_back(std::move(view));
  }
  return Status::Ok();
}

Result<JobRecord> JobFromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("job: expected an object");
  JobRecord job;
  constexpr int64_t kMax = int64_t{1} << 62;
  int64_t restarts = 0, preemptions = 0;
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "id", 1, kMax, &job.id));
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "restarts", 0, 1 << 30, &restarts));
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "preemptions", 0, 1 << 30, &preemptions));
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "generation", 0, kMax, &job.generation));
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "lostGpuSeconds", 0, kMax, &job.lost_gpu_seconds));
  UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "events", 0, kMax, &job.events));
  job.restarts = static_cast<int32_t>(restarts);
  if (j.contains("membership")) {  // absent in records written before it existed
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "membership", 0, kMax, &job.membership));
  }
  if (j.contains("disruptions")) {  // absent in records written before it existed
    int64_t disruptions = 0;
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "disruptions", 0, 1 << 30, &disruptions));
    job.disruptions = static_cast<int32_t>(disruptions);
  }
  job.preemptions = static_cast<int32_t>(preemptions);
  for (auto [key, out, hi] : {std::tuple{"exitCode", &job.exit_code, 255},
                              {"exitSignal", &job.exit_signal, 64}}) {
    if (!j.contains(key) || j[key].is_null()) continue;  // unknown, or written before it existed
    int64_t v = 0;
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, key, 0, hi, &v));
    *out = static_cast<int32_t>(v);
  }
  if (j.contains("gpuSeconds")) {  // absent in records written before it existed
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "gpuSeconds", 0, kMax, &job.gpu_seconds));
  }
  if (j.contains("energyJoules")) {  // absent in records written before it existed
    if (!j["energyJoules"].is_number() || !(j["energyJoules"].get<double>() >= 0)) {
      return InvalidArgument("energyJoules: expected a number of at least 0");
    }
    job.energy_joules = j["energyJoules"].get<double>();
  }
  if (j.contains("checkpoints")) {  // absent in records written before it existed
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "checkpoints", 0, kMax, &job.checkpoints));
  }
  // The measured costs: absent in records written before they existed.
  for (auto [key, out] : {std::pair{"checkpointSeconds", &job.checkpoint_seconds},
                          {"startupSeconds", &job.startup_seconds}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number() || !(j[key].get<double>() >= 0)) {
      return InvalidArgument(std::string(key) + ": expected a number of at least 0");
    }
    *out = j[key].get<double>();
  }
  if (j.contains("checkpointBytes")) {
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "checkpointBytes", 0, kMax, &job.checkpoint_bytes));
  }
  if (j.contains("savesOnStop")) {
    if (!j["savesOnStop"].is_boolean())
      return InvalidArgument("savesOnStop: expected true or false");
    job.saves_on_stop = j["savesOnStop"].get<bool>();
  }
  if (j.contains("masterPort")) {  // absent in records written before it existed
    int64_t port = 0;
    UNIPOOL_RETURN_IF_ERROR(StoredInt(j, "masterPort", 0, kLastMasterPort, &port));
    job.master_port = static_cast<int32_t>(port);
  }
  try {
    job.owner = j.at("owner").get<std::string>();
    // Absent in records written before it existed: such a job is taken as a
    // tenant's with no runAs (fail closed: a root agent starts it only
    // where its queue allows root).
    job.identity.tenant = true;
    if (j.contains("identity")) {
      const Json& id = j["identity"];
      job.identity.run_as = id.at("runAs").get<std::string>();
      job.identity.tenant = id.at("tenant").get<bool>();
      job.identity.allow_root = id.at("allowRoot").get<bool>();
    }
    auto state = ParseJobState(j.at("state").get<std::string>());
    if (!state) return InvalidArgument("job.state: unknown state");
    job.state = *state;
    job.message = j.value("message", "");
    job.checkpoint_note = j.value("checkpointNote", "");
    if (j.contains("progress") && j["progress"].is_object()) job.progress = j["progress"].dump();
    if (j.contains("stoppedNodes")) {
      for (const Json& n : j.at("stoppedNodes")) job.stopped_nodes.insert(n.get<std::string>());
    }
    if (j.contains("clearing")) {  // absent in records written before it existed
      if (!j["clearing"].is_object()) return InvalidArgument("job.clearing: expected an object");
      for (const auto& [node, g] : j.at("clearing").items()) {
        if (!g.is_number_integer() || g.get<int64_t>() < 1 || g.get<int64_t>() > job.generation) {
          return InvalidArgument("job.clearing." + node + ": " + g.dump() +
                                 " is not a run of the job (1 to its generation)");
        }
        job.clearing[node] = g.get<int64_t>();
      }
    }
    if (j.contains("peerFailure") && !j["peerFailure"].is_null()) {
      const Json& p = j["peerFailure"];
      if (!p.is_object() || !p.value("generation", Json()).is_number_integer() ||
          p["generation"].get<int64_t>() < 1 || p["generation"].get<int64_t>() > job.generation) {
        return InvalidArgument("job.peerFailure: expected {generation, node, message} of a run");
      }
      job.peer_failure_generation = p["generation"].get<int64_t>();
      job.peer_failure_node = p.at("node").get<std::string>();
      job.peer_failure_why = p.at("message").get<std::string>();
    }
    UNIPOOL_RETURN_IF_ERROR(TasksFromJson(j.at("tasks"), "job.tasks", job.tasks));
    if (j.contains("previousRun") && !j["previousRun"].is_null()) {  // absent: written before
      const Json& p = j["previousRun"];
      if (!p.is_object() || !p.value("generation", Json()).is_number_integer() ||
          p["generation"].get<int64_t>() < 1 || p["generation"].get<int64_t>() > job.generation) {
        return InvalidArgument("job.previousRun: expected {generation, tasks} of a run");
      }
      job.previous_generation = p["generation"].get<int64_t>();
      UNIPOOL_RETURN_IF_ERROR(
          TasksFromJson(p.at("tasks"), "job.previousRun.tasks", job.previous_tasks));
    }
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("job: ") + e.what());
  }
  for (auto [key, out] : {std::pair{"submitted", &job.submitted},
                          {"started", &job.started},
                          {"finished", &job.finished},
                          {"lastCheckpoint", &job.last_checkpoint},
                          {"preemptDeadline", &job.preempt_deadline},
                          {"retryAt", &job.retry_at},
                          {"accountedTo", &job.accounted_to},
                          {"energyTo", &job.energy_to}}) {
    Result<Time> t = TimeField(j, key);
    if (!t.ok()) return t.status();
    *out = *t;
  }
  if (!j.contains("spec")) return InvalidArgument("job: no spec");
  Result<io::JobRequest> r = io::JobRequestFromJson(j["spec"]);
  if (!r.ok()) return r.status();
  job.request = std::move(r).value();
  return job;
}

Json EventToJson(const JobEvent& e) {
  return Json{{"time", FormatTime(e.time)}, {"type", e.type}, {"message", e.message}};
}

Result<JobEvent> EventFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("time") || !j["time"].is_string() || !j.contains("type") ||
      !j["type"].is_string() || !j.contains("message") || !j["message"].is_string()) {
    return InvalidArgument("event: expected {time, type, message}");
  }
  Result<Time> t = ParseTime(j["time"].get<std::string>());
  if (!t.ok()) return t.status();
  return JobEvent{*t, j["type"].get<std::string>(), j["message"].get<std::string>()};
}

Json NodeToJson(const NodeRecord& n) {
  return Json{{"name", n.name},
              {"gpus", n.gpus},
              {"gpuModel", n.gpu_model},
              {"partition", n.partition},
              {"state", NodeStateName(n.state)},
              {"admin", n.admin},
              {"why", n.why},
              {"registered", n.registered},
              {"alive", n.alive},
              {"notResponding", n.not_responding},
              {"health", n.health},
              {"address", n.address},
              {"agentUrl", n.agent_url},
              {"lastHeartbeat", TimeJson(n.last_heartbeat)}};
}

Json QueueToJson(const QueueRecord& q) {
  return Json{{"name", q.spec.name},
              {"parent", q.spec.parent},
              {"guarantee", q.spec.guarantee.value()},
              {"limit", q.spec.limit.value()},
              {"weight", q.spec.weight},
              {"policy", kPolicies[static_cast<int>(q.spec.policy)]},
              {"order", sched::QueueOrderName(q.spec.order)},
              {"graceSeconds", q.spec.grace.value() / 1000000000},
              {"maxJobs", q.limits.max_jobs},
              {"maxSpecBytes", q.limits.max_spec_bytes},
              {"maxSubmitsPerMinute", q.limits.submits_per_minute},
              {"runAs", q.limits.run_as},
              {"allowRoot", q.limits.allow_root},
              {"rejectInfeasible", q.limits.reject_infeasible},
              {"usedGpus", q.used.value()},
              {"pendingJobs", q.pending},
              {"runningJobs", q.running},
              {"pendingGpus", q.pending_gpus.value()},
              {"usageGpuHours", q.usage_gpu_hours},
              {"usageShare", q.usage_share},
              {"weightShare", q.weight_share},
              {"fairShare", q.fair_share}};
}

// Reads a queue object (the API's PUT body and the store's form). Unknown
// fields and bad values are errors naming `where`.field.
Result<sched::QueueSpec> QueueSpecFromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": expected a JSON object");
  static const std::set<std::string> kKnown = {
      "name",        "parent",      "guarantee",        "limit",         "weight",
      "policy",      "order",       "graceSeconds",     "usedGpus",      "pendingJobs",
      "runningJobs", "pendingGpus", "maxJobs",          "maxSpecBytes",  "maxSubmitsPerMinute",
      "runAs",       "allowRoot",   "rejectInfeasible", "usageGpuHours", "usageShare",
      "weightShare", "fairShare"};
  for (const auto& [key, v] : j.items()) {
    if (!kKnown.contains(key)) {
      return InvalidArgument(where + "." + io::OneLine(io::Truncate(key, 64)) + ": unknown field");
    }
  }
  sched::QueueSpec q;
  auto str = [&](const char* key, std::string* out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_string()) return InvalidArgument(where + "." + key + ": expected a string");
    *out = j[key].get<std::string>();
    return Status::Ok();
  };
  auto num = [&](const char* key, int64_t lo, int64_t hi, int64_t* out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < lo || j[key].get<int64_t>() > hi) {
      return InvalidArgument(where + "." + key + ": expected an integer in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
    }
    *out = j[key].get<int64_t>();
    return Status::Ok();
  };
  UNIPOOL_RETURN_IF_ERROR(str("name", &q.name));
  UNIPOOL_RETURN_IF_ERROR(str("parent", &q.parent));
  for (const char* key : {"name", "parent"}) {
    const std::string& v = key[0] == 'n' ? q.name : q.parent;
    if (!v.empty() && !io::IsQueueName(v)) {
      return InvalidArgument(where + "." + key + ": expected a queue name: " + io::kQueueNameRule);
    }
  }
  int64_t guarantee = 0, limit = 0, grace = 120;
  UNIPOOL_RETURN_IF_ERROR(num("guarantee", 0, int64_t{1} << 40, &guarantee));
  UNIPOOL_RETURN_IF_ERROR(num("limit", 0, int64_t{1} << 40, &limit));
  UNIPOOL_RETURN_IF_ERROR(num("weight", 1, 1000000, &q.weight));
  UNIPOOL_RETURN_IF_ERROR(num("graceSeconds", 0, 7 * 24 * 3600, &grace));
  std::string policy = kPolicies[0];
  UNIPOOL_RETURN_IF_ERROR(str("policy", &policy));
  if (policy == "fifo") {
    q.policy = sched::QueuePolicy::kFifo;
  } else if (policy != "best-effort") {
    return InvalidArgument(where + ".policy: expected best-effort or fifo, got " +
                           io::Quote(policy));
  }
  std::string order = sched::QueueOrderName(q.order);
  UNIPOOL_RETURN_IF_ERROR(str("order", &order));
  if (!sched::ParseQueueOrder(order, &q.order)) {
    return InvalidArgument(where + ".order: expected submission, sjf or las, got '" +
                           io::OneLine(io::Truncate(order, 64)) + "'");
  }
  q.guarantee = Gpus(guarantee);
  q.limit = Gpus(limit);
  q.grace = Seconds(grace);
  return q;
}

Result<SubmitLimits> SubmitLimitsFromJson(const Json& j, const std::string& where) {
  SubmitLimits l;
  for (auto [key, out, hi] : {std::tuple{"maxJobs", &l.max_jobs, int64_t{1} << 40},
                              {"maxSpecBytes", &l.max_spec_bytes, int64_t{1} << 20},
                              {"maxSubmitsPerMinute", &l.submits_per_minute, int64_t{1} << 30}}) {
    if (!j.is_object() || !j.contains(key)) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 || j[key].get<int64_t>() > hi) {
      return InvalidArgument(where + "." + key + ": expected a whole number in [0, " +
                             std::to_string(hi) + "]");
    }
    *out = j[key].get<int64_t>();
  }
  if (!j.is_object()) return l;
  if (j.contains("runAs")) {
    if (!j["runAs"].is_string() ||
        (!j["runAs"].get<std::string>().empty() && !IsRunAs(j["runAs"].get<std::string>()))) {
      return InvalidArgument(where + ".runAs: expected \"\" or " + kRunAsRule);
    }
    l.run_as = j["runAs"].get<std::string>();
  }
  for (auto [key, out] : {std::pair{"allowRoot", &l.allow_root},
                          {"rejectInfeasible", &l.reject_infeasible}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean()) return InvalidArgument(where + "." + key + ": expected true or false");
    *out = j[key].get<bool>();
  }
  return l;
}

Json SummaryToJson(const Summary& s) {
  return Json{{"gpus",
               {{"total", s.total.value()},
                {"allocated", s.allocated.value()},
                {"free", s.free.value()},
                {"unavailable", s.unavailable.value()}}},
              {"nodes", {{"total", s.nodes}, {"up", s.nodes_up}}},
              {"jobs", s.jobs},
              {"revision", s.revision}};
}

}  // namespace unipool::server
