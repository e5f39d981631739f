#include "io/job_spec.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>

#include "io/cluster_reader.h"
#include "io/quote.h"
#include "io/text.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;
using Strings = std::vector<std::string>;

constexpr int32_t kMaxGpusPerNode = 1024;
constexpr int32_t kMaxRestarts = 10000;
constexpr int32_t kMaxPriority = 1000000;
constexpr int64_t kMaxDeadlineSeconds = 9000000000;  // ParseDuration's bound
constexpr const char* kQueueLabel = "unipool.io/queue";
constexpr const char* kKueueLabel = "kueue.x-k8s.io/queue-name";
constexpr const char* kGpuResource = "nvidia.com/gpu";

// ---- Rules shared by the readers and JobRequestFromJson.

constexpr const char* kNameRule =
    "a DNS-1123 label: 1 to 63 lowercase letters, digits or '-', starting and ending with a "
    "letter or digit";
constexpr const char* kEnvNameRule =
    "an environment variable name: a letter or '_', then letters, digits or '_'";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsEnvName(const std::string& s) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), word);
}

// "" is allowed: no class, the explicit priority applies.
bool IsPriorityClass(const std::string& s) {
  return s.empty() || s == "low" || s == "normal" || s == "high";
}

// Well-formed UTF-8, as nlohmann::json::dump requires.
bool IsUtf8(const std::string& s) { return FirstBadUtf8(s) == std::string::npos; }

// Empty when `s` is an acceptable string value, else the cause.
std::string StringProblem(const std::string& s) {
  if (s.size() > kMaxStringBytes) {
    return std::to_string(s.size()) + " bytes; at most " + std::to_string(kMaxStringBytes) +
           " are accepted";
  }
  if (!IsUtf8(s)) return "expected UTF-8 text";
  return "";
}

// "path.key", or "path[key]" for keys such as nvidia.com/gpu.
std::string Join(const std::string& path, const std::string& key) {
  const std::string k = OneLine(Truncate(key, 64));
  if (k.find_first_of("./ []") != std::string::npos) return path + "[" + k + "]";
  return path.empty() ? k : path + "." + k;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// ---- YAML values, for the readers of both shapes.

Status Missing(SourceLoc at, const std::string& path) {
  return InvalidArgument(path + ": required field is missing", at);
}

// A scalar string. REQUIRES: n.IsDefined().
Status ReadScalar(const YAML::Node& n, const std::string& path, std::string* out,
                  bool allow_empty) {
  if (allow_empty && n.IsNull()) {
    out->clear();
    return Status::Ok();
  }
  if (!n.IsScalar() || (!allow_empty && n.Scalar().empty())) {
    return Expected(n, path, allow_empty ? "a string" : "a non-empty string");
  }
  const std::string problem = StringProblem(n.Scalar());
  if (!problem.empty()) return InvalidArgument(path + ": " + problem, LocOf(n));
  *out = n.Scalar();
  return Status::Ok();
}

// A whole number in [min, max]. REQUIRES: n.IsDefined().
Status ReadInt(const YAML::Node& n, const std::string& path, int64_t* out, int64_t min,
               int64_t max) {
  int64_t v = 0;
  if (!n.IsScalar() || !ParseInt64(n.Scalar(), &v) || v < min || v > max) {
    return Expected(n, path,
                    "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  *out = v;
  return Status::Ok();
}

Status ReadInt32(const YAML::Node& n, const std::string& path, int32_t* out, int32_t min,
                 int32_t max) {
  int64_t v = 0;
  UNIPOOL_RETURN_IF_ERROR(ReadInt(n, path, &v, min, max));
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

// A list or mapping of at most `max` entries.
Status CheckListSize(const YAML::Node& n, const std::string& path, size_t max) {
  if (n.size() <= max) return Status::Ok();
  return InvalidArgument(path + ": " + std::to_string(n.size()) + " entries; at most " +
                             std::to_string(max) + " are accepted",
                         LocOf(n));
}

// A list of at most kMaxListEntries strings (each may be empty).
Status ReadStringList(const YAML::Node& n, const std::string& path, Strings* out) {
  if (!n.IsSequence()) return Expected(n, path, "a list of strings");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    out->emplace_back();
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(n[i], Index(path, i), &out->back(), true));
  }
  return Status::Ok();
}

// A command: a non-empty list whose first entry is non-empty.
Status ReadCommand(const YAML::Node& n, const std::string& path, Strings* out) {
  UNIPOOL_RETURN_IF_ERROR(ReadStringList(n, path, out));
  if (out->empty()) return Expected(n, path, "a non-empty list of strings");
  if (out->front().empty()) return Expected(n[0], Index(path, 0), "a program to run");
  return Status::Ok();
}

// metadata.labels of either shape: a mapping of strings, sorted by key.
Status ReadLabels(const YAML::Node& n, const std::string& path, Pairs* out) {
  if (!n.IsMap()) return Expected(n, path, "a mapping of label names to values");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxLabels));
  out->clear();
  for (const auto& kv : n) {
    std::string key, value;
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.first, path, &key, false));
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.second, Join(path, key), &value, true));
    if (!IsLabelKey(key))
      return Expected(kv.first, path, std::string("label keys: ") + kLabelKeyRule);
    if (!IsLabelValue(value)) {
      return Expected(kv.second, Join(path, key), std::string("a label value: ") + kLabelValueRule);
    }
    out->emplace_back(std::move(key), std::move(value));
  }
  std::sort(out->begin(), out->end());
  for (size_t i = 1; i < out->size(); ++i) {
    if ((*out)[i].first == (*out)[i - 1].first) {
      return InvalidArgument(Join(path, (*out)[i].first) + ": set twice", LocOf(n));
    }
  }
  return Status::Ok();
}

Status ReadName(const YAML::Node& n, const std::string& path, std::string* out) {
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(n, path, out, false));
  if (!IsDnsLabel(*out)) return Expected(n, path, kNameRule);
  return Status::Ok();
}

// Appends NAME=value to the environment; names are checked and unique.
Status AddEnv(const YAML::Node& name_node, const std::string& path, const std::string& name,
              std::string value, std::set<std::string>* seen, Pairs* env) {
  if (!IsEnvName(name)) return Expected(name_node, path, kEnvNameRule);
  if (!seen->insert(name).second) {
    return InvalidArgument(path + ": " + Quote(name) + " is set twice", LocOf(name_node));
  }
  env->emplace_back(name, std::move(value));
  return Status::Ok();
}

// Reads one field's value (at a path) into the job; used by the rule lists below.
using Reader = std::function<Status(const YAML::Node&, const std::string&)>;

Reader StringInto(std::string* out) {
  return [out](const YAML::Node& v, const std::string& p) { return ReadScalar(v, p, out, false); };
}

Reader IntInto(int64_t* out, int64_t min, int64_t max) {
  return [=](const YAML::Node& v, const std::string& p) { return ReadInt(v, p, out, min, max); };
}

Reader Int32Into(int32_t* out, int32_t min, int32_t max) {
  return [=](const YAML::Node& v, const std::string& p) { return ReadInt32(v, p, out, min, max); };
}

// Binds a reader with an output, e.g. Into(ReadName, &job.name).
template <class T>
Reader Into(Status (*read)(const YAML::Node&, const std::string&, T*), T* out) {
  return [read, out](const YAML::Node& v, const std::string& p) { return read(v, p, out); };
}

// A number of seconds (Kubernetes' activeDeadlineSeconds).
Reader SecondsInto(Duration* out) {
  return [out](const YAML::Node& v, const std::string& p) {
    int64_t s = 0;
    UNIPOOL_RETURN_IF_ERROR(ReadInt(v, p, &s, 1, kMaxDeadlineSeconds));
    *out = Seconds(s);
    return Status::Ok();
  };
}

// A volume hint: "name" or "name=source", bounded like any string.
Status AddVolume(const YAML::Node& n, const std::string& path, const std::string& name,
                 const std::string& source, Strings* out) {
  std::string hint = source.empty() ? name : name + "=" + source;
  const std::string problem = StringProblem(hint);
  if (!problem.empty()) return InvalidArgument(path + ": " + problem, LocOf(n));
  out->push_back(std::move(hint));
  return Status::Ok();
}

// True when the process is torchrun (or python -m torch.distributed.run),
// which starts one worker per GPU itself: such jobs launch per node.
bool RunsTorchrun(const Strings& command, const Strings& args) {
  Strings argv = command;
  argv.insert(argv.end(), args.begin(), args.end());
  if (argv.empty()) return false;
  const std::string prog = argv[0].substr(argv[0].rfind('/') + 1);  // npos + 1 == 0
  if (prog == "torchrun") return true;
  if (prog.rfind("python", 0) != 0 || argv.size() < 3 || argv[1] != "-m") return false;
  return argv[2] == "torch.distributed.run" || argv[2] == "torch.distributed.launch";
}

// ---- The native shape: apiVersion unipool/v1, kind Job. Strict.

Status ReadFieldString(const Fields& f, const char* key, std::string* out) {
  if (!f.Has(key)) return Status::Ok();
  return ReadScalar(f.Get(key), f.PathOf(key), out, false);
}

Status ReadNativeMetadata(const YAML::Node& n, JobRequest* job) {
  Result<Fields> f = Fields::Of(n, "metadata", {"name", "labels"});
  if (!f.ok()) return f.status();
  if (!f->Has("name")) return Missing(f->loc(), "metadata.name");
  UNIPOOL_RETURN_IF_ERROR(ReadName(f->Get("name"), "metadata.name", &job->name));
  if (!f->Has("labels")) return Status::Ok();
  return ReadLabels(f->Get("labels"), "metadata.labels", &job->labels);
}

// env as a mapping NAME: value, in the order written.
Status ReadEnvMapping(const YAML::Node& n, const std::string& path, Pairs* env) {
  std::set<std::string> seen;
  for (const auto& kv : n) {
    std::string name, value;
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.first, path, &name, false));
    const std::string at = Join(path, name);
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.second, at, &value, true));
    UNIPOOL_RETURN_IF_ERROR(AddEnv(kv.first, at, name, std::move(value), &seen, env));
  }
  return Status::Ok();
}

// env as a list of {name, value}, as in Kubernetes.
Status ReadNativeEnvList(const YAML::Node& n, const std::string& path, Pairs* env) {
  std::set<std::string> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = Index(path, i);
    Result<Fields> f = Fields::Of(n[i], at, {"name", "value"});
    if (!f.ok()) return f.status();
    if (!f->Has("name")) return Missing(f->loc(), at + ".name");
    std::string name, value;
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(f->Get("name"), at + ".name", &name, false));
    if (f->Has("value")) {
      UNIPOOL_RETURN_IF_ERROR(ReadScalar(f->Get("value"), at + ".value", &value, true));
    }
    UNIPOOL_RETURN_IF_ERROR(
        AddEnv(f->Get("name"), at + ".name", name, std::move(value), &seen, env));
  }
  return Status::Ok();
}

Status ReadNativeEnv(const YAML::Node& n, const std::string& path, Pairs* env) {
  if (!n.IsSequence() && !n.IsMap()) {
    return Expected(n, path, "a list of {name, value} or a mapping of names to values");
  }
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  return n.IsMap() ? ReadEnvMapping(n, path, env) : ReadNativeEnvList(n, path, env);
}

Status ReadNativeProcess(const Fields& f, JobRequest* job) {
  if (!f.Has("command")) return Missing(f.loc(), "spec.command");
  UNIPOOL_RETURN_IF_ERROR(ReadCommand(f.Get("command"), "spec.command", &job->command));
  if (f.Has("args")) {
    UNIPOOL_RETURN_IF_ERROR(ReadStringList(f.Get("args"), "spec.args", &job->args));
  }
  if (f.Has("env")) UNIPOOL_RETURN_IF_ERROR(ReadNativeEnv(f.Get("env"), "spec.env", &job->env));
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "workingDir", &job->working_dir));
  return ReadFieldString(f, "image", &job->image);
}

Status ReadLaunch(const Fields& f, LaunchMode* out) {
  std::string s;
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "launch", &s));
  if (s == "per-gpu") {
    *out = LaunchMode::kPerGpu;
  } else if (s == "per-node") {
    *out = LaunchMode::kPerNode;
  } else if (!s.empty()) {
    return Expected(f.Get("launch"), f.PathOf("launch"), "per-gpu or per-node");
  }
  return Status::Ok();
}

Status ReadNativeGpus(const Fields& f, JobRequest* job) {
  UNIPOOL_RETURN_IF_ERROR(f.Int("gpus", &job->gpus, 1, kMaxJobGpus, true));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("gpusPerNode", &job->gpus_per_node, 0, kMaxGpusPerNode));
  if (job->gpus_per_node > 0 && job->gpus % job->gpus_per_node != 0) {
    return InvalidArgument("spec.gpusPerNode: " + std::to_string(job->gpus_per_node) +
                               " does not divide spec.gpus (" + std::to_string(job->gpus) + ")",
                           LocOf(f.Get("gpusPerNode")));
  }
  if (f.Has("elastic")) {
    Result<Fields> e = Fields::Of(f.Get("elastic"), "spec.elastic", {"minGpus"});
    if (!e.ok()) return e.status();
    UNIPOOL_RETURN_IF_ERROR(e->Int("minGpus", &job->min_gpus, 1, job->gpus, true));
  }
  return ReadLaunch(f, &job->launch);
}

Status ReadNativePriority(const Fields& f, JobRequest* job) {
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "priorityClassName", &job->priority_class));
  if (!IsPriorityClass(job->priority_class)) {
    return Expected(f.Get("priorityClassName"), f.PathOf("priorityClassName"),
                    "low, normal or high");
  }
  UNIPOOL_RETURN_IF_ERROR(f.Int32("priority", &job->priority, -kMaxPriority, kMaxPriority));
  return f.Bool("preemptible", &job->preemptible);
}

Status ReadNativePlacement(const Fields& f, JobRequest* job) {
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "queue", &job->queue));
  if (f.Has("topology")) {
    Result<Fields> t = Fields::Of(f.Get("topology"), "spec.topology", {"within"});
    if (!t.ok()) return t.status();
    UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*t, "within", &job->within));
  }
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "partition", &job->partition));
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "dataLocality", &job->data_locality));
  UNIPOOL_RETURN_IF_ERROR(f.Dur("progressTimeout", &job->progress_timeout));
  return f.Dur("timeLimit", &job->time_limit);
}

Status ReadNativeRecovery(const Fields& f, JobRequest* job) {
  if (f.Has("restartPolicy")) {
    Result<Fields> r =
        Fields::Of(f.Get("restartPolicy"), "spec.restartPolicy", {"maxRestarts", "backoff"});
    if (!r.ok()) return r.status();
    UNIPOOL_RETURN_IF_ERROR(r->Int32("maxRestarts", &job->restart.max_restarts, 0, kMaxRestarts));
    UNIPOOL_RETURN_IF_ERROR(r->Dur("backoff", &job->restart.backoff));
  }
  if (!f.Has("checkpoint")) return Status::Ok();
  Result<Fields> c = Fields::Of(f.Get("checkpoint"), "spec.checkpoint", {"dir", "interval"});
  if (!c.ok()) return c.status();
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*c, "dir", &job->checkpoint_dir));
  return c->Dur("interval", &job->checkpoint_interval);
}

// volumes: names, or {name, source} recorded as "name=source".
Status ReadNativeVolumes(const Fields& f, Strings* out) {
  if (!f.Has("volumes")) return Status::Ok();
  const YAML::Node n = f.Get("volumes");
  const std::string path = "spec.volumes";
  if (!n.IsSequence()) return Expected(n, path, "a list of volume names or {name, source}");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = Index(path, i);
    std::string name, source;
    if (n[i].IsMap()) {
      Result<Fields> v = Fields::Of(n[i], at, {"name", "source"});
      if (!v.ok()) return v.status();
      if (!v->Has("name")) return Missing(v->loc(), at + ".name");
      UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*v, "name", &name));
      UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*v, "source", &source));
    } else {
      UNIPOOL_RETURN_IF_ERROR(ReadScalar(n[i], at, &name, false));
    }
    UNIPOOL_RETURN_IF_ERROR(AddVolume(n[i], at, name, source, out));
  }
  return Status::Ok();
}

Status ReadNativeSpec(const YAML::Node& n, JobRequest* job) {
  Result<Fields> f = Fields::Of(n, "spec",
                                {"command",
                                 "args",
                                 "env",
                                 "workingDir",
                                 "image",
                                 "gpus",
                                 "gpusPerNode",
                                 "elastic",
                                 "launch",
                                 "queue",
                                 "priorityClassName",
                                 "priority",
                                 "preemptible",
                                 "restartPolicy",
                                 "checkpoint",
                                 "topology",
                                 "partition",
                                 "dataLocality",
                                 "volumes",
                                 "timeLimit",
                                 "progressTimeout"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(ReadNativeProcess(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativeGpus(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativePriority(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativePlacement(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativeRecovery(*f, job));
  return ReadNativeVolumes(*f, &job->volumes);
}

Status ReadNative(const YAML::Node& doc, JobRequest* job) {
  Result<Fields> f = Fields::Of(doc, "job", {"apiVersion", "kind", "metadata", "spec"});
  if (!f.ok()) return f.status();
  if (!f->Has("metadata")) return Missing(f->loc(), "metadata");
  UNIPOOL_RETURN_IF_ERROR(ReadNativeMetadata(f->Get("metadata"), job));
  if (!f->Has("spec")) return Missing(f->loc(), "spec");
  return ReadNativeSpec(f->Get("spec"), job);
}

// ---- The Kubernetes shapes: v1 Pod, batch/v1 Job, kubeflow.org/v1 PyTorchJob.
// Lenient: what has a meaning is mapped, every other field is listed in
// ParsedJob::ignored, in the order written.

// How one field of a mapping is taken: `read` maps it (may be empty), `why`
// lists it as ignored (may be null). Fields with no rule are ignored.
struct Rule {
  const char* key;
  Reader read;
  const char* why = nullptr;
};

constexpr const char* kPlacementWhy = "ignored (placement follows the cluster topology)";
constexpr const char* kOnlyGpusWhy = "ignored (only nvidia.com/gpu is scheduled)";

// `res`.`which`[nvidia.com/gpu], or -1 when absent.
Status GpuQuantity(const YAML::Node& res, const char* which, const std::string& path,
                   int64_t* out) {
  *out = -1;
  const YAML::Node list = res[which];
  if (!list.IsDefined() || list.IsNull()) return Status::Ok();
  const std::string at = path + "." + which;
  if (!list.IsMap()) return Expected(list, at, "a mapping of resource names to quantities");
  const YAML::Node q = list[kGpuResource];
  if (!q.IsDefined()) return Status::Ok();
  return ReadInt(q, Join(at, kGpuResource), out, 0, kMaxGpusPerNode);
}

// A container's nvidia.com/gpu: resources.limits, else requests; 0 if none.
Status ContainerGpus(const YAML::Node& c, const std::string& path, int64_t* out) {
  *out = 0;
  if (!c.IsMap()) return Expected(c, path, "a container");
  const YAML::Node res = c["resources"];
  if (!res.IsDefined() || res.IsNull()) return Status::Ok();
  const std::string at = path + ".resources";
  if (!res.IsMap()) return Expected(res, at, "a mapping with limits and requests");
  int64_t limit = -1, request = -1;
  UNIPOOL_RETURN_IF_ERROR(GpuQuantity(res, "limits", at, &limit));
  UNIPOOL_RETURN_IF_ERROR(GpuQuantity(res, "requests", at, &request));
  if (limit >= 0 && request >= 0 && limit != request) {
    return InvalidArgument(Join(at + ".requests", kGpuResource) + ": " + std::to_string(request) +
                               " differs from limits (" + std::to_string(limit) + ")",
                           LocOf(res["requests"]));
  }
  *out = std::max<int64_t>({0, limit, request});
  return Status::Ok();
}

// Finds the one container of `n` that requests nvidia.com/gpu.
Status PickGpuContainer(const YAML::Node& n, const std::string& path, size_t* index,
                        int64_t* gpus) {
  if (!n.IsSequence() || n.size() == 0) return Expected(n, path, "a non-empty list of containers");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  *gpus = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    int64_t g = 0;
    UNIPOOL_RETURN_IF_ERROR(ContainerGpus(n[i], Index(path, i), &g));
    if (g == 0) continue;
    if (*gpus > 0) {
      return InvalidArgument(Index(path, i) +
                                 ": a second container requests nvidia.com/gpu; one GPU "
                                 "container per pod is supported",
                             LocOf(n[i]));
    }
    *index = i;
    *gpus = g;
  }
  if (*gpus > 0) return Status::Ok();
  return InvalidArgument(path +
                             ": requests no nvidia.com/gpu (set resources.limits[nvidia.com/gpu] "
                             "on the training container)",
                         LocOf(n));
}

class KubeReader {
 public:
  explicit KubeReader(ParsedJob* out) : job_(out->job), ignored_(out->ignored) {}

  Status ReadPod(const YAML::Node& doc);
  Status ReadBatchJob(const YAML::Node& doc);
  Status ReadPyTorchJob(const YAML::Node& doc);

 private:
  // What a pod spec's restartPolicy and activeDeadlineSeconds mean: null
  // for a Pod (they apply), else why they are ignored (a template).
  struct PodRules {
    const char* restart_why = nullptr;
    const char* deadline_why = nullptr;
  };
  struct Replicas {  // one entry of pytorchReplicaSpecs
    bool present = false;
    int64_t count = 0;
    int64_t pod_gpus = 0;
    SourceLoc at;
  };

  Reader Bind(Status (KubeReader::*read)(const YAML::Node&, const std::string&)) {
    return [this, read](const YAML::Node& v, const std::string& p) { return (this->*read)(v, p); };
  }
  void Ignore(const std::string& path, const std::string& why) {
    ignored_.push_back(path + ": " + why);
  }
  Status Walk(const YAML::Node& map, const std::string& path, const std::vector<Rule>& rules,
              const char* other = "ignored");
  Status ReadObject(const YAML::Node& doc, const Reader& spec);
  Status ReadMetadata(const YAML::Node& n, const std::string& path);
  Status ReadPodTemplate(const YAML::Node& n, const std::string& path, const PodRules& rules,
                         int64_t* pod_gpus);
  Status ReadPodSpec(const YAML::Node& n, const std::string& path, const PodRules& rules,
                     int64_t* pod_gpus);
  Status ReadRestartPolicy(const YAML::Node& n, const std::string& path);
  Status ReadPriorityClass(const YAML::Node& n, const std::string& path);
  Status ReadContainers(const YAML::Node& n, const std::string& path, int64_t* pod_gpus);
  Status ReadContainer(const YAML::Node& n, const std::string& path);
  Status ReadResources(const YAML::Node& n, const std::string& path);
  Status ReadEnv(const YAML::Node& n, const std::string& path);
  Status ReadEnvEntry(const YAML::Node& n, const std::string& path, std::set<std::string>* seen);
  Status ReadVolumes(const YAML::Node& n, const std::string& path);
  Status ReadVolume(const YAML::Node& n, const std::string& path);
  Reader VolumeSource(const std::string& kind, std::vector<const char*> keys, std::string* out);
  Status ReadPyTorchSpec(const YAML::Node& n, const std::string& path);
  Status ReadReplicaSpecs(const YAML::Node& n, const std::string& path, Replicas* master,
                          Replicas* worker);
  Status ReadReplicas(const YAML::Node& n, const std::string& path, bool primary, Replicas* r);
  Status ReadSecondaryTemplate(const YAML::Node& n, const std::string& path, int64_t* pod_gpus);
  Status ReadRunPolicy(const YAML::Node& n, const std::string& path);
  Status SetGang(int64_t pods, int64_t pod_gpus, SourceLoc at, const std::string& path);
  Status Finish();

  JobRequest& job_;
  std::vector<std::string>& ignored_;
  std::string scheduling_queue_;  // a PyTorchJob's runPolicy.schedulingPolicy.queue
};

Status KubeReader::Walk(const YAML::Node& map, const std::string& path,
                        const std::vector<Rule>& rules, const char* other) {
  if (!map.IsMap()) return Expected(map, path.empty() ? "job" : path, "a mapping");
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return Expected(kv.first, path, "a field name");
    const std::string at = Join(path, kv.first.Scalar());
    if (!seen.insert(kv.first.Scalar()).second) {
      return InvalidArgument(at + ": set twice", LocOf(kv.first));
    }
    auto rule = std::find_if(rules.begin(), rules.end(),
                             [&](const Rule& r) { return kv.first.Scalar() == r.key; });
    if (rule == rules.end()) {
      Ignore(at, other);
      continue;
    }
    if (rule->read) UNIPOOL_RETURN_IF_ERROR(rule->read(kv.second, at));
    if (rule->why != nullptr) Ignore(at, rule->why);
  }
  return Status::Ok();
}

Status KubeReader::ReadObject(const YAML::Node& doc, const Reader& spec) {
  UNIPOOL_RETURN_IF_ERROR(Walk(doc, "",
                               {{"apiVersion", nullptr},
                                {"kind", nullptr},
                                {"metadata", Bind(&KubeReader::ReadMetadata)},
                                {"spec", spec}}));
  if (!doc["metadata"].IsDefined()) return Missing(LocOf(doc), "metadata");
  if (!doc["spec"].IsDefined()) return Missing(LocOf(doc), "spec");
  return Finish();
}

Status KubeReader::ReadMetadata(const YAML::Node& n, const std::string& path) {
  UNIPOOL_RETURN_IF_ERROR(
      Walk(n, path,
           {{"name", Into(ReadName, &job_.name)},
            {"labels", Into(ReadLabels, &job_.labels)},
            {"namespace", nullptr, "ignored (the queue comes from the label unipool.io/queue)"}}));
  if (!n["name"].IsDefined()) return Missing(LocOf(n), path + ".name");
  return Status::Ok();
}

Status KubeReader::ReadPodTemplate(const YAML::Node& n, const std::string& path,
                                   const PodRules& rules, int64_t* pod_gpus) {
  UNIPOOL_RETURN_IF_ERROR(Walk(n, path,
                               {{"metadata", nullptr, "ignored (the job's metadata applies)"},
                                {"spec", [&](const YAML::Node& v, const std::string& p) {
                                   return ReadPodSpec(v, p, rules, pod_gpus);
                                 }}}));
  if (!n["spec"].IsDefined()) return Missing(LocOf(n), path + ".spec");
  return Status::Ok();
}

Status KubeReader::ReadPodSpec(const YAML::Node& n, const std::string& path, const PodRules& rules,
                               int64_t* pod_gpus) {
  const bool pod = rules.restart_why == nullptr;
  UNIPOOL_RETURN_IF_ERROR(Walk(
      n, path,
      {{"containers",
        [&](const YAML::Node& v, const std::string& p) { return ReadContainers(v, p, pod_gpus); }},
       {"priorityClassName", Bind(&KubeReader::ReadPriorityClass)},
       {"priority", Int32Into(&job_.priority, -kMaxPriority, kMaxPriority)},
       {"volumes", Bind(&KubeReader::ReadVolumes)},
       {"restartPolicy", pod ? Bind(&KubeReader::ReadRestartPolicy) : Reader(), rules.restart_why},
       {"activeDeadlineSeconds", pod ? SecondsInto(&job_.time_limit) : Reader(),
        rules.deadline_why},
       {"initContainers", nullptr, "ignored (init containers are not run)"},
       {"nodeSelector", nullptr, kPlacementWhy},
       {"affinity", nullptr, kPlacementWhy},
       {"tolerations", nullptr, kPlacementWhy},
       {"nodeName", nullptr, kPlacementWhy},
       {"topologySpreadConstraints", nullptr, kPlacementWhy},
       {"schedulerName", nullptr, "ignored (unipool schedules the job)"}}));
  if (!n["containers"].IsDefined()) return Missing(LocOf(n), path + ".containers");
  return Status::Ok();
}

// Never: no restarts; Always and OnFailure: the default restart policy.
Status KubeReader::ReadRestartPolicy(const YAML::Node& n, const std::string& path) {
  std::string s;
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(n, path, &s, false));
  if (s == "Never") {
    job_.restart.max_restarts = 0;
  } else if (s != "Always" && s != "OnFailure") {
    return Expected(n, path, "Always, OnFailure or Never");
  }
  return Status::Ok();
}

// Classes named low, normal or high map; any other class is ignored.
Status KubeReader::ReadPriorityClass(const YAML::Node& n, const std::string& path) {
  std::string s;
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(n, path, &s, false));
  if (IsPriorityClass(s)) {
    job_.priority_class = s;
  } else {
    Ignore(path, "ignored (" + Quote(s) + " is not low, normal or high)");
  }
  return Status::Ok();
}

Status KubeReader::ReadContainers(const YAML::Node& n, const std::string& path, int64_t* pod_gpus) {
  size_t chosen = 0;
  UNIPOOL_RETURN_IF_ERROR(PickGpuContainer(n, path, &chosen, pod_gpus));
  for (size_t i = 0; i < n.size(); ++i) {
    if (i == chosen) {
      UNIPOOL_RETURN_IF_ERROR(ReadContainer(n[i], Index(path, i)));
    } else {
      Ignore(Index(path, i), "ignored (only the container that requests nvidia.com/gpu runs)");
    }
  }
  return Status::Ok();
}

Status KubeReader::ReadContainer(const YAML::Node& n, const std::string& path) {
  UNIPOOL_RETURN_IF_ERROR(Walk(
      n, path,
      {{"command", Into(ReadCommand, &job_.command)},
       {"args", Into(ReadStringList, &job_.args)},
       {"env", Bind(&KubeReader::ReadEnv)},
       {"workingDir", StringInto(&job_.working_dir)},
       {"image", StringInto(&job_.image), "recorded, ignored (no container runtime is configured)"},
       {"resources", Bind(&KubeReader::ReadResources)},
       {"volumeMounts", nullptr, "ignored (volumes are recorded as hints; nothing is mounted)"},
       {"envFrom", nullptr, "ignored (ConfigMaps and Secrets are not read)"}}));
  if (n["command"].IsDefined()) return Status::Ok();
  return InvalidArgument(path +
                             ".command: required field is missing (without a container runtime "
                             "the image's entrypoint is unknown)",
                         LocOf(n));
}

// limits and requests: nvidia.com/gpu was read by PickGpuContainer.
Status KubeReader::ReadResources(const YAML::Node& n, const std::string& path) {
  if (n.IsNull()) return Status::Ok();
  const Reader only_gpus = [this](const YAML::Node& v, const std::string& p) {
    return v.IsNull() ? Status::Ok() : Walk(v, p, {{kGpuResource, nullptr}}, kOnlyGpusWhy);
  };
  return Walk(n, path, {{"limits", only_gpus}, {"requests", only_gpus}});
}

Status KubeReader::ReadEnv(const YAML::Node& n, const std::string& path) {
  if (!n.IsSequence()) return Expected(n, path, "a list of {name, value}");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  std::set<std::string> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    UNIPOOL_RETURN_IF_ERROR(ReadEnvEntry(n[i], Index(path, i), &seen));
  }
  return Status::Ok();
}

// {name, value} or {name, valueFrom}; the latter cannot be resolved here.
Status KubeReader::ReadEnvEntry(const YAML::Node& n, const std::string& path,
                                std::set<std::string>* seen) {
  std::string name, value;
  bool from = false;
  UNIPOOL_RETURN_IF_ERROR(Walk(
      n, path,
      {{"name", StringInto(&name)},
       {"value",
        [&](const YAML::Node& v, const std::string& p) { return ReadScalar(v, p, &value, true); }},
       {"valueFrom", [&](const YAML::Node&, const std::string&) {
          from = true;
          return Status::Ok();
        }}}));
  if (name.empty()) return Missing(LocOf(n), path + ".name");
  if (!IsEnvName(name)) return Expected(n["name"], path + ".name", kEnvNameRule);
  if (from) {
    Ignore(path + ".valueFrom", "ignored (not resolved; " + name + " is not set)");
    return Status::Ok();
  }
  return AddEnv(n["name"], path + ".name", name, std::move(value), seen, &job_.env);
}

Status KubeReader::ReadVolumes(const YAML::Node& n, const std::string& path) {
  if (!n.IsSequence()) return Expected(n, path, "a list of volumes");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  for (size_t i = 0; i < n.size(); ++i) {
    UNIPOOL_RETURN_IF_ERROR(ReadVolume(n[i], Index(path, i)));
  }
  return Status::Ok();
}

// Recorded as "name=pvc:CLAIM", "name=hostPath:PATH", "name=nfs:SERVER:PATH"
// or "name" for other sources.
Status KubeReader::ReadVolume(const YAML::Node& n, const std::string& path) {
  std::string name, source;
  UNIPOOL_RETURN_IF_ERROR(
      Walk(n, path,
           {{"name", StringInto(&name)},
            {"persistentVolumeClaim", VolumeSource("pvc", {"claimName"}, &source)},
            {"hostPath", VolumeSource("hostPath", {"path"}, &source)},
            {"nfs", VolumeSource("nfs", {"server", "path"}, &source)}},
           "ignored (the volume is recorded by name only)"));
  if (name.empty()) return Missing(LocOf(n), path + ".name");
  return AddVolume(n, path, name, source, &job_.volumes);
}

Reader KubeReader::VolumeSource(const std::string& kind, std::vector<const char*> keys,
                                std::string* out) {
  return [this, kind, keys, out](const YAML::Node& v, const std::string& p) -> Status {
    std::vector<std::string> parts(keys.size());
    std::vector<Rule> rules;
    for (size_t i = 0; i < keys.size(); ++i) rules.push_back({keys[i], StringInto(&parts[i])});
    UNIPOOL_RETURN_IF_ERROR(Walk(v, p, rules));
    *out = kind;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (parts[i].empty()) return Missing(LocOf(v), Join(p, keys[i]));
      *out += ":" + parts[i];
    }
    return Status::Ok();
  };
}

Status KubeReader::SetGang(int64_t pods, int64_t pod_gpus, SourceLoc at, const std::string& path) {
  if (pods * pod_gpus > kMaxJobGpus) {
    return InvalidArgument(path + ": " + std::to_string(pods) + " pods of " +
                               std::to_string(pod_gpus) + " GPUs exceed " +
                               std::to_string(kMaxJobGpus) + " GPUs",
                           at);
  }
  job_.gpus = pods * pod_gpus;
  job_.gpus_per_node = static_cast<int32_t>(pod_gpus);
  return Status::Ok();
}

// The queue: the label unipool.io/queue, else a PyTorchJob's
// schedulingPolicy.queue, else the label kueue.x-k8s.io/queue-name, else
// "default". The launch: per node for torchrun, else per GPU.
Status KubeReader::Finish() {
  auto label = [&](const char* key) {
    for (const auto& [k, v] : job_.labels) {
      if (k == key) return v;
    }
    return std::string();
  };
  job_.queue = label(kQueueLabel);
  if (job_.queue.empty()) job_.queue = scheduling_queue_;
  if (job_.queue.empty()) job_.queue = label(kKueueLabel);
  if (job_.queue.empty()) job_.queue = "default";
  job_.launch = RunsTorchrun(job_.command, job_.args) ? LaunchMode::kPerNode : LaunchMode::kPerGpu;
  return Status::Ok();
}

// A Pod is a gang of one node: gpus = gpusPerNode = its container's GPUs.
Status KubeReader::ReadPod(const YAML::Node& doc) {
  int64_t pod_gpus = 0;
  return ReadObject(doc, [&](const YAML::Node& v, const std::string& p) {
    UNIPOOL_RETURN_IF_ERROR(ReadPodSpec(v, p, PodRules{}, &pod_gpus));
    return SetGang(1, pod_gpus, LocOf(v), p);
  });
}

// parallelism pods of the template, as one gang.
Status KubeReader::ReadBatchJob(const YAML::Node& doc) {
  int64_t pods = 1, pod_gpus = 0;
  const PodRules rules{"ignored (restarts follow spec.backoffLimit)",
                       "ignored (the time limit is spec.activeDeadlineSeconds)"};
  return ReadObject(doc, [&](const YAML::Node& n, const std::string& path) -> Status {
    UNIPOOL_RETURN_IF_ERROR(
        Walk(n, path,
             {{"parallelism", IntInto(&pods, 1, kMaxJobGpus)},
              {"backoffLimit", Int32Into(&job_.restart.max_restarts, 0, kMaxRestarts)},
              {"activeDeadlineSeconds", SecondsInto(&job_.time_limit)},
              {"template",
               [&](const YAML::Node& v, const std::string& p) {
                 return ReadPodTemplate(v, p, rules, &pod_gpus);
               }},
              {"completions", nullptr, "ignored (the pods run once, as one gang)"}}));
    if (!n["template"].IsDefined()) return Missing(LocOf(n), path + ".template");
    const YAML::Node parallelism = n["parallelism"];
    return SetGang(pods, pod_gpus, LocOf(parallelism.IsDefined() ? parallelism : n),
                   path + ".parallelism");
  });
}

Status KubeReader::ReadPyTorchJob(const YAML::Node& doc) {
  return ReadObject(doc, [this](const YAML::Node& n, const std::string& path) {
    return ReadPyTorchSpec(n, path);
  });
}

// Master and Worker pods form one gang; the Master's container runs on
// every pod (the Worker's, when there is no Master).
Status KubeReader::ReadPyTorchSpec(const YAML::Node& n, const std::string& path) {
  Replicas master, worker;
  int64_t min_replicas = 0;
  SourceLoc min_at;
  const std::string min_path = path + ".elasticPolicy.minReplicas";
  const Reader elastic = [&](const YAML::Node& v, const std::string& p) {
    if (v.IsMap() && v["minReplicas"].IsDefined()) min_at = LocOf(v["minReplicas"]);
    return Walk(v, p,
                {{"minReplicas", IntInto(&min_replicas, 1, kMaxJobGpus)},
                 {"maxReplicas", nullptr, "ignored (replicas set the maximum)"}});
  };
  UNIPOOL_RETURN_IF_ERROR(Walk(n, path,
                               {{"pytorchReplicaSpecs",
                                 [&](const YAML::Node& v, const std::string& p) {
                                   return ReadReplicaSpecs(v, p, &master, &worker);
                                 }},
                                {"runPolicy", Bind(&KubeReader::ReadRunPolicy)},
                                {"elasticPolicy", elastic}}));
  const std::string specs = path + ".pytorchReplicaSpecs";
  if (!n["pytorchReplicaSpecs"].IsDefined()) return Missing(LocOf(n), specs);
  const int64_t pods = master.count + worker.count;
  const SourceLoc at = LocOf(n["pytorchReplicaSpecs"]);
  if (pods == 0) return InvalidArgument(specs + ": expected at least one replica", at);
  const int64_t pod_gpus = master.present ? master.pod_gpus : worker.pod_gpus;
  UNIPOOL_RETURN_IF_ERROR(SetGang(pods, pod_gpus, at, specs));
  if (min_replicas > pods) {
    return InvalidArgument(min_path + ": expected a whole number from 1 to " +
                               std::to_string(pods) + ", got '" + std::to_string(min_replicas) +
                               "'",
                           min_at);
  }
  job_.min_gpus = min_replicas * pod_gpus;
  return Status::Ok();
}

Status KubeReader::ReadReplicaSpecs(const YAML::Node& n, const std::string& path, Replicas* master,
                                    Replicas* worker) {
  if (!n.IsMap()) return Expected(n, path, "a mapping with Master and Worker");
  const bool has_master = n["Master"].IsDefined();
  UNIPOOL_RETURN_IF_ERROR(Walk(
      n, path,
      {{"Master", [&](const YAML::Node& v,
                      const std::string& p) { return ReadReplicas(v, p, true, master); }},
       {"Worker", [&](const YAML::Node& v,
                      const std::string& p) { return ReadReplicas(v, p, !has_master, worker); }}},
      "ignored (only Master and Worker replicas run)"));
  if (!master->present && !worker->present) {
    return InvalidArgument(path + ": expected a Master or a Worker replica spec", LocOf(n));
  }
  if (master->present && worker->present && master->pod_gpus != worker->pod_gpus) {
    return InvalidArgument(path + ".Worker: " + std::to_string(worker->pod_gpus) +
                               " nvidia.com/gpu per pod differs from the Master's " +
                               std::to_string(master->pod_gpus) +
                               " (every pod must request the same)",
                           worker->at);
  }
  return Status::Ok();
}

Status KubeReader::ReadReplicas(const YAML::Node& n, const std::string& path, bool primary,
                                Replicas* r) {
  *r = Replicas{true, 1, 0, LocOf(n)};
  const PodRules rules{"ignored (restarts follow runPolicy.backoffLimit)",
                       "ignored (the time limit is runPolicy.activeDeadlineSeconds)"};
  const Reader tmpl = primary ? Reader([&](const YAML::Node& v, const std::string& p) {
    return ReadPodTemplate(v, p, rules, &r->pod_gpus);
  })
                              : Reader([&](const YAML::Node& v, const std::string& p) {
                                  return ReadSecondaryTemplate(v, p, &r->pod_gpus);
                                });
  UNIPOOL_RETURN_IF_ERROR(Walk(n, path,
                               {{"replicas", IntInto(&r->count, 0, kMaxJobGpus)},
                                {"template", tmpl},
                                {"restartPolicy", nullptr, rules.restart_why}}));
  if (!n["template"].IsDefined()) return Missing(LocOf(n), path + ".template");
  return Status::Ok();
}

// Only the GPU count of the Worker's pods is read when there is a Master.
Status KubeReader::ReadSecondaryTemplate(const YAML::Node& n, const std::string& path,
                                         int64_t* pod_gpus) {
  if (!n.IsMap()) return Expected(n, path, "a pod template");
  const YAML::Node spec = n["spec"];
  if (!spec.IsDefined()) return Missing(LocOf(n), path + ".spec");
  if (!spec.IsMap()) return Expected(spec, path + ".spec", "a pod spec");
  const YAML::Node containers = spec["containers"];
  if (!containers.IsDefined()) return Missing(LocOf(spec), path + ".spec.containers");
  size_t index = 0;
  UNIPOOL_RETURN_IF_ERROR(
      PickGpuContainer(containers, path + ".spec.containers", &index, pod_gpus));
  Ignore(path, "ignored except nvidia.com/gpu (the Master's pod spec runs on every pod)");
  return Status::Ok();
}

Status KubeReader::ReadRunPolicy(const YAML::Node& n, const std::string& path) {
  const Reader scheduling = [this](const YAML::Node& v, const std::string& p) {
    return Walk(v, p,
                {{"queue", StringInto(&scheduling_queue_)},
                 {"priorityClass", Bind(&KubeReader::ReadPriorityClass)},
                 {"minAvailable", nullptr, "ignored (a gang starts whole)"}});
  };
  return Walk(n, path,
              {{"backoffLimit", Int32Into(&job_.restart.max_restarts, 0, kMaxRestarts)},
               {"activeDeadlineSeconds", SecondsInto(&job_.time_limit)},
               {"schedulingPolicy", scheduling}});
}

// ---- Reading a spec of any shape.

constexpr const char* kShapes[] = {"unipool/v1 Job", "v1 Pod", "batch/v1 Job",
                                   "kubeflow.org/v1 PyTorchJob"};

Status ReadShape(const YAML::Node& doc, std::string* shape) {
  if (!doc.IsMap()) return Expected(doc, "job", "a mapping with apiVersion and kind");
  const YAML::Node api = doc["apiVersion"];
  const YAML::Node kind = doc["kind"];
  if (!api.IsDefined()) return Missing(LocOf(doc), "apiVersion");
  if (!kind.IsDefined()) return Missing(LocOf(doc), "kind");
  std::string a, k;
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(api, "apiVersion", &a, false));
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(kind, "kind", &k, false));
  *shape = a + " " + k;
  if (std::find(std::begin(kShapes), std::end(kShapes), *shape) != std::end(kShapes)) {
    return Status::Ok();
  }
  return InvalidArgument(
      "kind: expected unipool/v1 Job, v1 Pod, batch/v1 Job or kubeflow.org/v1 PyTorchJob, got " +
          Quote(*shape),
      LocOf(kind));
}

// Keeps the ignored list bounded like every other list.
void CapIgnored(std::vector<std::string>* ignored) {
  if (ignored->size() <= kMaxListEntries) return;
  const size_t more = ignored->size() - (kMaxListEntries - 1);
  ignored->resize(kMaxListEntries - 1);
  ignored->push_back("...: " + std::to_string(more) + " more ignored fields are not listed");
}

Result<ParsedJob> Parse(std::string_view text) {
  if (text.size() > kMaxSpecBytes) {
    return InvalidArgument("the spec is " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(kMaxSpecBytes) + " are accepted");
  }
  Result<YAML::Node> doc = LoadDocument(text, "Job");
  if (!doc.ok()) return doc.status();
  const YAML::Node& root = *doc;
  ParsedJob out;
  UNIPOOL_RETURN_IF_ERROR(ReadShape(root, &out.job.source_kind));
  const std::string& shape = out.job.source_kind;
  KubeReader kube(&out);
  if (shape == "unipool/v1 Job") {
    UNIPOOL_RETURN_IF_ERROR(ReadNative(root, &out.job));
  } else if (shape == "v1 Pod") {
    UNIPOOL_RETURN_IF_ERROR(kube.ReadPod(root));
  } else if (shape == "batch/v1 Job") {
    UNIPOOL_RETURN_IF_ERROR(kube.ReadBatchJob(root));
  } else {
    UNIPOOL_RETURN_IF_ERROR(kube.ReadPyTorchJob(root));
  }
  CapIgnored(&out.ignored);
  return out;
}

Result<ParsedJob> ParseCatching(std::string_view text) {
  try {
    return Parse(text);
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp may throw on odd nodes
    return InvalidArgument("cannot read: " + e.msg, {e.mark.line + 1, e.mark.column + 1});
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("cannot read: ") + e.what());
  }
}

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
    return ReadString(*v, PathOf(key), out);
  }

  Status Int(const char* key, int64_t* out, int64_t min, int64_t max, bool required = false) const {
    const json* v = Get(key);
    if (v == nullptr) return required ? Stored(PathOf(key), "missing") : Status::Ok();
    const std::string want =
        "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max);
    if (!v->is_number_integer()) return Stored(PathOf(key), want);
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(max)) return Stored(PathOf(key), want);
      x = static_cast<int64_t>(u);
    } else {
      x = v->get<int64_t>();
    }
    if (x < min || x > max) return Stored(PathOf(key), want);
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
      UNIPOOL_RETURN_IF_ERROR(ReadString((*v)[i], Index(PathOf(key), i), &(*out)[i]));
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

  static Status ReadString(const json& v, const std::string& path, std::string* out) {
    if (!v.is_string()) return Stored(path, "expected a string");
    *out = v.get<std::string>();
    const std::string problem = StringProblem(*out);
    return problem.empty() ? Status::Ok() : Stored(path, problem);
  }

  const json* j_;  // not owned
  std::string path_;
};

Status ReadStoredProcess(const JsonFields& f, JobRequest* r) {
  UNIPOOL_RETURN_IF_ERROR(f.String("name", &r->name, true));
  UNIPOOL_RETURN_IF_ERROR(f.PairList("labels", "key", "value", kMaxLabels, &r->labels));
  UNIPOOL_RETURN_IF_ERROR(f.List("command", &r->command, true));
  UNIPOOL_RETURN_IF_ERROR(f.List("args", &r->args));
  UNIPOOL_RETURN_IF_ERROR(f.PairList("env", "name", "value", kMaxListEntries, &r->env));
  UNIPOOL_RETURN_IF_ERROR(f.String("workingDir", &r->working_dir));
  UNIPOOL_RETURN_IF_ERROR(f.String("image", &r->image));
  UNIPOOL_RETURN_IF_ERROR(f.List("volumes", &r->volumes));
  return f.String("sourceKind", &r->source_kind);
}

Status ReadStoredLaunch(const JsonFields& f, LaunchMode* out) {
  std::string s = LaunchModeName(*out);
  UNIPOOL_RETURN_IF_ERROR(f.String("launch", &s));
  if (s == "per-gpu") {
    *out = LaunchMode::kPerGpu;
  } else if (s == "per-node") {
    *out = LaunchMode::kPerNode;
  } else {
    return Stored("launch", "expected per-gpu or per-node, got " + Quote(s));
  }
  return Status::Ok();
}

Status ReadStoredScheduling(const JsonFields& f, JobRequest* r) {
  UNIPOOL_RETURN_IF_ERROR(f.Int("gpus", &r->gpus, 1, kMaxJobGpus, true));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("gpusPerNode", &r->gpus_per_node, 0, kMaxGpusPerNode));
  UNIPOOL_RETURN_IF_ERROR(f.Int("minGpus", &r->min_gpus, 0, r->gpus));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredLaunch(f, &r->launch));
  UNIPOOL_RETURN_IF_ERROR(f.String("queue", &r->queue));
  UNIPOOL_RETURN_IF_ERROR(f.String("priorityClass", &r->priority_class));
  UNIPOOL_RETURN_IF_ERROR(f.Int32("priority", &r->priority, -kMaxPriority, kMaxPriority));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("preemptible", &r->preemptible));
  UNIPOOL_RETURN_IF_ERROR(f.String("within", &r->within));
  UNIPOOL_RETURN_IF_ERROR(f.String("partition", &r->partition));
  UNIPOOL_RETURN_IF_ERROR(f.String("dataLocality", &r->data_locality));
  UNIPOOL_RETURN_IF_ERROR(f.Nanos("progressTimeoutNs", &r->progress_timeout));
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
  if (r.gpus_per_node > 0 && r.gpus % r.gpus_per_node != 0) {
    return Stored("gpusPerNode", "does not divide gpus");
  }
  if (!IsPriorityClass(r.priority_class)) {
    return Stored("priorityClass", "expected \"\", low, normal or high");
  }
  if (r.queue.empty()) return Stored("queue", "expected a non-empty string");
  return Status::Ok();
}

Result<JobRequest> FromJson(const json& j) {
  Result<JsonFields> f = JsonFields::Of(j, "",
                                        {"name",
                                         "labels",
                                         "command",
                                         "args",
                                         "env",
                                         "workingDir",
                                         "gpus",
                                         "gpusPerNode",
                                         "queue",
                                         "priorityClass",
                                         "priority",
                                         "preemptible",
                                         "minGpus",
                                         "restart",
                                         "checkpointDir",
                                         "checkpointIntervalNs",
                                         "within",
                                         "partition",
                                         "dataLocality",
                                         "volumes",
                                         "timeLimitNs",
                                         "launch",
                                         "image",
                                         "sourceKind",
                                         "progressTimeoutNs"});
  if (!f.ok()) return f.status();
  JobRequest r;
  UNIPOOL_RETURN_IF_ERROR(ReadStoredProcess(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredScheduling(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(ReadStoredRecovery(*f, &r));
  UNIPOOL_RETURN_IF_ERROR(CheckStored(r));
  return r;
}

json PairsToJson(const Pairs& pairs, const char* first, const char* second) {
  json out = json::array();
  for (const auto& [a, b] : pairs) out.push_back({{first, a}, {second, b}});
  return out;
}

}  // namespace

const char* LaunchModeName(LaunchMode m) {
  return m == LaunchMode::kPerNode ? "per-node" : "per-gpu";
}

Result<ParsedJob> ReadJobSpec(std::string_view text, const std::string& source) {
  Result<ParsedJob> parsed = ParseCatching(text);
  // Ignored keys and comments too must be text: ignored fields are named
  // in warnings, and the API answers them as JSON.
  if (const size_t bad = FirstBadUtf8(text); parsed.ok() && bad != std::string_view::npos) {
    const std::string_view before = text.substr(0, bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t nl = before.rfind('\n');
    const size_t col = bad - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
    return InvalidArgument(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": not UTF-8 text");
  }
  if (parsed.ok()) return parsed;
  return InvalidArgument(OneLine(WithFile(source, parsed.status())));
}

nlohmann::json JobRequestToJson(const JobRequest& r) {
  return json{
      {"name", r.name},
      {"labels", PairsToJson(r.labels, "key", "value")},
      {"command", r.command},
      {"args", r.args},
      {"env", PairsToJson(r.env, "name", "value")},
      {"workingDir", r.working_dir},
      {"gpus", r.gpus},
      {"gpusPerNode", r.gpus_per_node},
      {"queue", r.queue},
      {"priorityClass", r.priority_class},
      {"priority", r.priority},
      {"preemptible", r.preemptible},
      {"minGpus", r.min_gpus},
      {"restart",
       {{"maxRestarts", r.restart.max_restarts}, {"backoffNs", r.restart.backoff.value()}}},
      {"checkpointDir", r.checkpoint_dir},
      {"checkpointIntervalNs", r.checkpoint_interval.value()},
      {"within", r.within},
      {"partition", r.partition},
      {"dataLocality", r.data_locality},
      {"volumes", r.volumes},
      {"timeLimitNs", r.time_limit.value()},
      {"progressTimeoutNs", r.progress_timeout.value()},
      {"launch", LaunchModeName(r.launch)},
      {"image", r.image},
      {"sourceKind", r.source_kind},
  };
}

Result<JobRequest> JobRequestFromJson(const nlohmann::json& j) {
  try {
    return FromJson(j);
  } catch (const std::exception& e) {  // defensive: the checks above should prevent any
    return InvalidArgument(OneLine(std::string("stored job: cannot read: ") + e.what()));
  }
}

}  // namespace unipool::io
