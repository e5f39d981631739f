// The storage form of a JobRequest (the server's store): a JSON object that
// holds every field, read back as strictly as the readers check a spec.
#include <algorithm>
#include <exception>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>

#include "io/job_spec_rules.h"
#include "io/quantity.h"
#include "io/quote.h"
#include "io/text.h"

namespace unipool::io {
namespace spec_internal {
namespace {

// ---- The storage form.

using nlohmann::json;

Status Stored(const std::string& path, const std::string& cause) {
  return InvalidArgument(OneLine("stored job: " + (path.empty() ? "" : path + ": ") + cause));
}

// Typed access to one stored JSON object; errors name the member's path.
class JsonFields {
 public:
  static Result<JsonFields> Of(const json& j, std::string path,
                               std::initializer_list<const char*> allowed) {
    if (!j.is_object()) return Stored(path, "expected an object");
    // Every member is allowed when as many allowed names are found as
    // there are members (names are unique): a lookup per allowed name, not
    // a scan of them per member; only a refusal looks for the culprit.
    size_t found = 0;
    for (const char* a : allowed) found += j.contains(a) ? 1 : 0;
    if (found == j.size()) return JsonFields(j, std::move(path));
    for (const auto& item : j.items()) {
      if (std::find_if(allowed.begin(), allowed.end(),
                       [&](const char* a) { return item.key() == a; }) == allowed.end()) {
        return Stored(Join(path, item.key()), "unknown field");
      }
    }
    return JsonFields(j, std::move(path));
  }

  const json* Get(const char* key) const {
    auto it = j_->find(key);
    return it == j_->end() ? nullptr : &*it;
  }
  std::string PathOf(const char* key) const { return Join(path_, key); }

  Status String(const char* key, std::string* out, bool required = false) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Stored(PathOf(key), "missing") : Status::Ok();
    return ReadString(*v, [&] { return PathOf(key); }, out);
  }

  Status Int(const char* key, int64_t* out, int64_t min, int64_t max, bool required = false) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Stored(PathOf(key), "missing") : Status::Ok();
    auto refuse = [&] {
      return Stored(PathOf(key), "expected a whole number from " + std::to_string(min) + " to " +
                                     std::to_string(max));
    };
    if (!v->is_number_integer()) return refuse();
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) return refuse();
      x = static_cast<int64_t>(u);
    } else {
      x = v->get<int64_t>();
    }
    if (x < min || x > max) return refuse();
    *out = x;
    return Status::Ok();
  }

  Status Int32(const char* key, int32_t* out, int32_t min, int32_t max) const {
    int64_t v = *out;
    UNIPOOL_RETURN_IF_ERROR(Int(key, &v, min, max));
    *out = static_cast<int32_t>(v);
    return Status::Ok();
  }

  Status Nanos(const char* key, Duration* out) const {
    int64_t v = out->value();
    UNIPOOL_RETURN_IF_ERROR(Int(key, &v, 0, INT64_MAX));
    *out = Nanoseconds(v);
    return Status::Ok();
  }

  Status Bool(const char* key, bool* out) const {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return Stored(PathOf(key), "expected true or false");
    *out = v->get<bool>();
    return Status::Ok();
  }

  Status List(const char* key, Strings* out, bool required = false) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Stored(PathOf(key), "missing") : Status::Ok();
    if (!v->is_array() || v->size() > kMaxListEntries) {
      return Stored(PathOf(key),
                    "expected a list of at most " + std::to_string(kMaxListEntries) + " strings");
    }
    out->assign(v->size(), "");
    for (size_t i = 0; i < v->size(); ++i) {
      UNIPOOL_RETURN_IF_ERROR(
          ReadString((*v)[i], [&] { return Index(PathOf(key), i); }, &(*out)[i]));
    }
    return Status::Ok();
  }

  // A list of {first: string, second: string}.
  Status PairList(const char* key, const char* first, const char* second, size_t max,
                  Pairs* out) const {
    const json* v = Get(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_array() || v->size() > max) {
      return Stored(PathOf(key), "expected a list of at most " + std::to_string(max) + " entries");
    }
    out->assign(v->size(), {});
    for (size_t i = 0; i < v->size(); ++i) {
      Result<JsonFields> e = Of((*v)[i], Index(PathOf(key), i), {first, second});
      if (!e.ok()) return e.status();
      UNIPOOL_RETURN_IF_ERROR(e->String(first, &(*out)[i].first, true));
      UNIPOOL_RETURN_IF_ERROR(e->String(second, &(*out)[i].second, true));
    }
    return Status::Ok();
  }

 private:
  JsonFields(const json& j, std::string path) : j_(&j), path_(std::move(path)) {}

  // `path` names the value, built only for an error.
  template <class PathFn>
  static Status ReadString(const json& v, const PathFn& path, std::string* out) {
    if (!v.is_string()) return Stored(path(), "expected a string");
    *out = v.get<std::string>();
    const std::string problem = StringProblem(*out);
    return problem.empty() ? Status::Ok() : Stored(path(), problem);
  }

  const json* j_;  // not owned
  std::string path_;
};

Status ReadStoredMounts(const JsonFields& f, std::vector<Mount>* out);

Status ReadStoredProcess(const JsonFields& f, JobRequest* r) {
  UNIPOOL_RETURN_IF_ERROR(f.String("name", &r->name, true));
  UNIPOOL_RETURN_IF_ERROR(f.PairList("labels", "key", "value", kMaxLabels, &r->labels));
  UNIPOOL_RETURN_IF_ERROR(f.List("command", &r->command, true));
  UNIPOOL_RETURN_IF_ERROR(f.List("args", &r->args));
  UNIPOOL_RETURN_IF_ERROR(f.PairList("env", "name", "value", kMaxListEntries, &r->env));
  UNIPOOL_RETURN_IF_ERROR(
      f.PairList("secretRefs", "name", "ref", kMaxListEntries, &r->secret_refs));
  Strings secret_names;
  UNIPOOL_RETURN_IF_ERROR(f.List("secretEnv", &secret_names));
  for (std::string& n : secret_names) r->secret_env.emplace_back(std::move(n), "");
  UNIPOOL_RETURN_IF_ERROR(f.String("workingDir", &r->working_dir));
  UNIPOOL_RETURN_IF_ERROR(f.String("image", &r->image));
  UNIPOOL_RETURN_IF_ERROR(f.List("volumes", &r->volumes));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredMounts(f, &r->mounts));
  return f.String("sourceKind", &r->source_kind);
}

Status ReadStoredMounts(const JsonFields& f, std::vector<Mount>* out) {
  const json* v = f.Get("mounts");
  if (v == nullptr) return Status::Ok();
  if (!v->is_array() || v->size() > kMaxListEntries) {
    return Stored("mounts", "expected a list of at most " + std::to_string(kMaxListEntries));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    Result<JsonFields> m =
        JsonFields::Of((*v)[i], Index("mounts", i), {"source", "path", "readOnly"});
    if (!m.ok()) return m.status();
    Mount mount;
    UNIPOOL_RETURN_IF_ERROR(m->String("source", &mount.source, true));
    UNIPOOL_RETURN_IF_ERROR(m->String("path", &mount.path, true));
    UNIPOOL_RETURN_IF_ERROR(m->Bool("readOnly", &mount.read_only));
    if (Status st = CheckMount(mount, {}, Index("mounts", i)); !st.ok()) {
      return Stored("", st.message());
    }
    out->push_back(std::move(mount));
  }
  return Status::Ok();
}

Status ReadStoredLaunch(const JsonFields& f, LaunchMode* out) {
  std::string s = LaunchModeName(*out);
  UNIPOOL_RETURN_IF_ERROR(f.String("launch", &s));
  std::optional<LaunchMode> m = ParseLaunchMode(s);
  if (!m) return Stored("launch", "expected per-gpu, per-node or per-task, got " + Quote(s));
  *out = *m;
  return Status::Ok();
}

// The shape. Records without shapeVersion 2 predate gpusPerTask: their
// gpusPerNode was GPUs per task.
Status ReadStoredShape(const JsonFields& f, JobRequest* r) {
  int64_t version = 1;
  UNIPOOL_RETURN_IF_ERROR(f.Int("shapeVersion", &version, 1, 2));
  int32_t* per_node = version == 1 ? &r->gpus_per_task : &r->gpus_per_node;
  UNIPOOL_RETURN_IF_ERROR(f.Int32("gpusPerNode", per_node, 0, kMaxGpusPerNode));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("gpusPerTask", &r->gpus_per_task, 0, kMaxGpusPerNode));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("nodes", &r->nodes, 0, static_cast<int32_t>(kMaxJobGpus)));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("exclusive", &r->exclusive));
  std::string spread = r->spread == Spread::kSpread ? "spread" : "pack";
  UNIPOOL_RETURN_IF_ERROR(f.String("placement", &spread));
  if (spread != "pack" && spread != "spread") {
    return Stored("placement", "expected pack or spread, got " + Quote(spread));
  }
  r->spread = spread == "spread" ? Spread::kSpread : Spread::kPack;
  return Status::Ok();
}

// limits: {milliCpu, memoryBytes, pids}, 0 for none.
Status ReadStoredLimits(const JsonFields& f, TaskLimits* out) {
  const json* v = f.Get("limits");
  if (v == nullptr) return Status::Ok();
  Result<JsonFields> l = JsonFields::Of(*v, "limits", {"milliCpu", "memoryBytes", "pids"});
  if (!l.ok()) return l.status();
  UNIPOOL_RETURN_IF_ERROR(l->Int("milliCpu", &out->milli_cpu, 0, kMaxMilliCpu));
  UNIPOOL_RETURN_IF_ERROR(l->Int("memoryBytes", &out->memory, 0, kMaxQuantityBytes));
  return l->Int("pids", &out->pids, 0, kMaxPids);
}

Status ReadStoredScheduling(const JsonFields& f, JobRequest* r) {
  UNIPOOL_RETURN_IF_ERROR(f.Int("gpus", &r->gpus, 1, kMaxJobGpus, true));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredShape(f, r));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredLimits(f, &r->limits));
  UNIPOOL_RETURN_IF_ERROR(f.Int("minGpus", &r->min_gpus, 0, r->gpus));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("elasticContinue", &r->elastic_continue));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredLaunch(f, &r->launch));
  UNIPOOL_RETURN_IF_ERROR(f.String("queue", &r->queue));
  UNIPOOL_RETURN_IF_ERROR(f.String("priorityClass", &r->priority_class));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("priority", &r->priority, -kMaxPriority, kMaxPriority));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("preemptible", &r->preemptible));
  UNIPOOL_RETURN_IF_ERROR(f.String("within", &r->within));
  UNIPOOL_RETURN_IF_ERROR(f.String("prefer", &r->prefer));
  if (f.Get("maxWaitNs")) UNIPOOL_RETURN_IF_ERROR(f.Nanos("maxWaitNs", &r->max_wait));
  UNIPOOL_RETURN_IF_ERROR(f.String("partition", &r->partition));
  UNIPOOL_RETURN_IF_ERROR(f.String("dataLocality", &r->data_locality));
  UNIPOOL_RETURN_IF_ERROR(f.Nanos("progressTimeoutNs", &r->progress_timeout));
  if (f.Get("onStraggler")) UNIPOOL_RETURN_IF_ERROR(f.String("onStraggler", &r->on_straggler));
  if (r->on_straggler != "warn" && r->on_straggler != "replace") {
    return Stored("onStraggler", "expected warn or replace, got " + Quote(r->on_straggler));
  }
  return f.Nanos("timeLimitNs", &r->time_limit);
}

Status ReadStoredRecovery(const JsonFields& f, JobRequest* r) {
  if (const json* restart = f.Get("restart")) {
    Result<JsonFields> rf = JsonFields::Of(*restart, "restart", {"maxRestarts", "backoffNs"});
    if (!rf.ok()) return rf.status();
    UNIPOOL_RETURN_IF_ERROR(rf->Int32("maxRestarts", &r->restart.max_restarts, 0, kMaxRestarts));
    UNIPOOL_RETURN_IF_ERROR(rf->Nanos("backoffNs", &r->restart.backoff));
  }
  UNIPOOL_RETURN_IF_ERROR(f.String("checkpointDir", &r->checkpoint_dir));
  return f.Nanos("checkpointIntervalNs", &r->checkpoint_interval);
}

// The rules that cross fields, as the readers enforce them.
Status CheckStored(const JobRequest& r) {
  if (!IsDnsLabel(r.name)) return Stored("name", std::string("expected ") + kNameRule);
  if (r.command.empty() || r.command[0].empty()) {
    return Stored("command", "expected a non-empty list starting with a program");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < r.env.size(); ++i) {
    if (!IsEnvName(r.env[i].first) || !names.insert(r.env[i].first).second) {
      return Stored(Index("env", i) + ".name", std::string("expected a unique ") + kEnvNameRule);
    }
  }
  for (size_t i = 0; i < r.labels.size(); ++i) {
    if (r.labels[i].first.empty() || (i > 0 && r.labels[i - 1].first >= r.labels[i].first)) {
      return Stored(Index("labels", i) + ".key", "expected non-empty keys, sorted and unique");
    }
  }
  for (auto [key, share] :
       {std::pair{"gpusPerNode", r.gpus_per_node}, {"gpusPerTask", r.gpus_per_task}}) {
    if (share > 0 && r.gpus % share != 0) return Stored(key, "does not divide gpus");
  }
  if (!IsPriorityClass(r.priority_class)) {
    return Stored("priorityClass", "expected \"\", low, normal or high");
  }
  if (r.queue.empty()) return Stored("queue", "expected a non-empty string");
  return Status::Ok();
}

Result<JobRequest> FromJson(const json& j) {
  Result<JsonFields> f = JsonFields::Of(j, "", {"name",          "labels",
                                                "command",       "args",
                                                "env",           "secretEnv",
                                                "secretRefs",    "workingDir",
                                                "gpus",          "gpusPerNode",
                                                "gpusPerTask",   "nodes",
                                                "exclusive",     "placement",
                                                "shapeVersion",  "limits",
                                                "queue",         "priorityClass",
                                                "priority",      "preemptible",
                                                "minGpus",       "restart",
                                                "checkpointDir", "checkpointIntervalNs",
                                                "within",        "partition",
                                                "dataLocality",  "volumes",
                                                "mounts",        "timeLimitNs",
                                                "launch",        "image",
                                                "sourceKind",    "progressTimeoutNs",
                                                "prefer",        "maxWaitNs",
                                                "onStraggler",   "elasticContinue"});
  if (!f.ok()) return f.status();
  JobRequest r;
  UNIPOOL_RETURN_IF_ERROR(ReadStoredProcess(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredScheduling(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredRecovery(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(CheckStored(r));
  return r;
}

// The names of the secret values only: the values are stored apart.
json SecretNames(const JobRequest& r) {
  json out = json::array();
  for (const auto& [name, value] : r.secret_env) out.push_back(name);
  return out;
}

json MountsToJson(const std::vector<Mount>& mounts) {
  json out = json::array();
  for (const Mount& m : mounts) {
    out.push_back({{"source", m.source}, {"path", m.path}, {"readOnly", m.read_only}});
  }
  return out;
}

json PairsToJson(const Pairs& pairs, const char* first, const char* second) {
  json out = json::array();
  for (const auto& [a, b] : pairs) out.push_back({{first, a}, {second, b}});
  return out;
}

}  // namespace
}  // namespace spec_internal

nlohmann::json JobRequestToJson(const JobRequest& r) {
  using nlohmann::json;
  using spec_internal::PairsToJson;
  json out{
      {"name", r.name},
      {"labels", PairsToJson(r.labels, "key", "value")},
      {"command", r.command},
      {"args", r.args},
      {"env", PairsToJson(r.env, "name", "value")},
      {"secretEnv", spec_internal::SecretNames(r)},
      {"secretRefs", PairsToJson(r.secret_refs, "name", "ref")},
      {"workingDir", r.working_dir},
      {"gpus", r.gpus},
      {"gpusPerNode", r.gpus_per_node},
      {"gpusPerTask", r.gpus_per_task},
      {"nodes", r.nodes},
      {"exclusive", r.exclusive},
      {"placement", r.spread == Spread::kSpread ? "spread" : "pack"},
      {"shapeVersion", 2},
      {"limits",
       {{"milliCpu", r.limits.milli_cpu},
        {"memoryBytes", r.limits.memory},
        {"pids", r.limits.pids}}},
      {"queue", r.queue},
      {"priorityClass", r.priority_class},
      {"priority", r.priority},
      {"preemptible", r.preemptible},
      {"minGpus", r.min_gpus},
      {"elasticContinue", r.elastic_continue},
      {"restart",
       {{"maxRestarts", r.restart.max_restarts}, {"backoffNs", r.restart.backoff.value()}}},
      {"checkpointDir", r.checkpoint_dir},
      {"checkpointIntervalNs", r.checkpoint_interval.value()},
      {"within", r.within},
      {"partition", r.partition},
      {"dataLocality", r.data_locality},
      {"volumes", r.volumes},
      {"mounts", spec_internal::MountsToJson(r.mounts)},
      {"timeLimitNs", r.time_limit.value()},
      {"progressTimeoutNs", r.progress_timeout.value()},
      {"onStraggler", r.on_straggler},
      {"launch", LaunchModeName(r.launch)},
      {"image", r.image},
      {"sourceKind", r.source_kind},
  };
  if (!r.prefer.empty()) out["prefer"] = r.prefer;
  if (r.max_wait.value() >= 0) out["maxWaitNs"] = r.max_wait.value();
  return out;
}

Result<JobRequest> JobRequestFromJson(const nlohmann::json& j) {
  try {
    return spec_internal::FromJson(j);
  } catch (const std::exception& e) {  // defensive: the checks above should prevent any
    return InvalidArgument(OneLine(std::string("stored job: cannot read: ") + e.what()));
  }
}

}  // namespace unipool::io
