// The Kubernetes shapes: v1 Pod, batch/v1 Job, kubeflow.org/v1 PyTorchJob.
// Lenient: what has a meaning is mapped, every other field is listed in
// ParsedJob::ignored, in the order written.
#include <algorithm>
#include <set>

#include "io/job_policy.h"
#include "io/job_spec_rules.h"
#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io::spec_internal {
namespace {

constexpr const char* kQueueLabel = "unipool.io/queue";
constexpr const char* kKueueLabel = "kueue.x-k8s.io/queue-name";
constexpr const char* kGpuResource = "nvidia.com/gpu";

// How one field of a mapping is taken: `read` maps it (may be empty), `why`
// lists it as ignored (may be null). Fields with no rule are ignored.
struct Rule {
  const char* key;
  Reader read;
  const char* why = nullptr;
};

constexpr const char* kPlacementWhy = "ignored (placement follows the cluster topology)";
constexpr const char* kOnlyGpusWhy = "ignored (only nvidia.com/gpu, cpu and memory are read)";

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
  Status ReadVolumeMounts(const YAML::Node& n, const std::string& path);
  Status MatchMounts();
  Reader VolumeSource(const std::string& kind, std::vector<const char*> keys, std::string* out);
  Status ReadPyTorchSpec(const YAML::Node& n, const std::string& path);
  Status ReadReplicaSpecs(const YAML::Node& n, const std::string& path, Replicas* master,
                          Replicas* worker);
  Status ReadReplicas(const YAML::Node& n, const std::string& path, bool primary, Replicas* r);
  Status ReadSecondaryTemplate(const YAML::Node& n, const std::string& path, int64_t* pod_gpus);
  Status ReadRunPolicy(const YAML::Node& n, const std::string& path);
  Status SetGang(int64_t pods, int64_t pod_gpus, SourceLoc at, const std::string& path);
  Status ReadSpreadConstraints(const YAML::Node& n, const std::string& path);
  Status ReadAffinity(const YAML::Node& n, const std::string& path);
  // A topology key that spreads pods over nodes (kubernetes.io/hostname).
  bool SpreadsOverNodes(const YAML::Node& term) const;
  Status Finish();

  JobRequest& job_;
  std::vector<std::string>& ignored_;
  std::string scheduling_queue_;  // a PyTorchJob's runPolicy.schedulingPolicy.queue
  struct PendingMount {           // a volumeMounts entry, matched with its volume in Finish
    std::string name, path, at;
    bool read_only = false;
    SourceLoc loc;
  };
  std::vector<PendingMount> mounts_;
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
       {"affinity", Bind(&KubeReader::ReadAffinity)},
       {"tolerations", nullptr, kPlacementWhy},
       {"nodeName", nullptr, kPlacementWhy},
       {"topologySpreadConstraints", Bind(&KubeReader::ReadSpreadConstraints)},
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
  UNIPOOL_RETURN_IF_ERROR(
      Walk(n, path,
           {{"command", Into(ReadCommand, &job_.command)},
            {"args", Into(ReadStringList, &job_.args)},
            {"env", Bind(&KubeReader::ReadEnv)},
            {"workingDir", StringInto(&job_.working_dir)},
            {"image", StringInto(&job_.image)},
            {"resources", Bind(&KubeReader::ReadResources)},
            {"volumeMounts", Bind(&KubeReader::ReadVolumeMounts)},
            {"envFrom", nullptr, "ignored (ConfigMaps and Secrets are not read)"}}));
  if (n["command"].IsDefined()) return Status::Ok();
  return InvalidArgument(path +
                             ".command: required field is missing (the image's entrypoint is "
                             "not read: give the command)",
                         LocOf(n));
}

// limits and requests: nvidia.com/gpu was read by PickGpuContainer; the
// cpu and memory limits are the pod's (each task's) limits.
Status KubeReader::ReadResources(const YAML::Node& n, const std::string& path) {
  if (n.IsNull()) return Status::Ok();
  TaskLimits& l = job_.limits;
  const Reader limits = [this, &l](const YAML::Node& v, const std::string& p) {
    if (v.IsNull()) return Status::Ok();
    return Walk(v, p,
                {{kGpuResource, nullptr},
                 {"cpu", Into(ReadCpuLimit, &l.milli_cpu)},
                 {"memory", Into(ReadMemoryLimit, &l.memory)}},
                kOnlyGpusWhy);
  };
  const Reader requests = [this](const YAML::Node& v, const std::string& p) {
    if (v.IsNull()) return Status::Ok();
    constexpr const char* kWhy =
        "ignored (not reserved: the limit is enforced, where one is given)";
    return Walk(v, p, {{kGpuResource, nullptr}, {"cpu", nullptr, kWhy}, {"memory", nullptr, kWhy}},
                kOnlyGpusWhy);
  };
  return Walk(n, path, {{"limits", limits}, {"requests", requests}});
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
  std::string name, value, secret, key;
  bool from = false;
  const Reader secret_ref = [&](const YAML::Node& v, const std::string& p) {
    return Walk(v, p, {{"name", StringInto(&secret)}, {"key", StringInto(&key)}});
  };
  UNIPOOL_RETURN_IF_ERROR(Walk(
      n, path,
      {{"name", StringInto(&name)},
       {"value",
        [&](const YAML::Node& v, const std::string& p) { return ReadScalar(v, p, &value, true); }},
       {"valueFrom", [&](const YAML::Node& v, const std::string& p) {
          from = true;
          return Walk(v, p, {{"secretKeyRef", secret_ref}},
                      "ignored (only secretKeyRef is resolved: the variable is not set)");
        }}}));
  if (name.empty()) return Missing(LocOf(n), path + ".name");
  if (!IsEnvName(name)) return Expected(n["name"], path + ".name", kEnvNameRule);
  if (from && !secret.empty() && !key.empty()) {
    const bool safe = secret.find('/') == std::string::npos && key.find('/') == std::string::npos &&
                      !HasDotDot(secret + "/" + key);
    if (!safe) {
      return InvalidArgument(path + ".valueFrom.secretKeyRef: a secret's name and key have no '/'",
                             LocOf(n));
    }
    job_.secret_refs.emplace_back(name, secret + "/" + key);
    return Status::Ok();
  }
  if (from) return Status::Ok();
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
            {"nfs", VolumeSource("nfs", {"server", "path"}, &source)},
            {"emptyDir",
             [&](const YAML::Node&, const std::string&) {
               source = "emptyDir";
               return Status::Ok();
             }}},
           "ignored (the volume is recorded by name only)"));
  if (name.empty()) return Missing(LocOf(n), path + ".name");
  return AddVolume(n, path, name, source, &job_.volumes);
}

// volumeMounts of the container: {name, mountPath, readOnly}.
Status KubeReader::ReadVolumeMounts(const YAML::Node& n, const std::string& path) {
  if (!n.IsSequence()) return Expected(n, path, "a list of volume mounts");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  for (size_t i = 0; i < n.size(); ++i) {
    PendingMount m;
    m.at = Index(path, i);
    m.loc = LocOf(n[i]);
    UNIPOOL_RETURN_IF_ERROR(Walk(n[i], m.at,
                                 {{"name", StringInto(&m.name)},
                                  {"mountPath", StringInto(&m.path)},
                                  {"readOnly",
                                   [&](const YAML::Node& v, const std::string& p) {
                                     if (!v.IsScalar() ||
                                         (v.Scalar() != "true" && v.Scalar() != "false")) {
                                       return Expected(v, p, "true or false");
                                     }
                                     m.read_only = v.Scalar() == "true";
                                     return Status::Ok();
                                   }}},
                                 "ignored (mounted whole, as given)"));
    if (m.name.empty()) return Missing(m.loc, m.at + ".name");
    if (m.path.empty()) return Missing(m.loc, m.at + ".mountPath");
    mounts_.push_back(std::move(m));
  }
  return Status::Ok();
}

// Each volume mount with its pod volume: a Mount, or ignored when the
// volume is of a kind that is not mounted (configMap, secret, ...).
Status KubeReader::MatchMounts() {
  for (const PendingMount& pm : mounts_) {
    std::string source;
    bool found = false;
    for (const std::string& hint : job_.volumes) {
      const size_t eq = hint.find('=');
      if (hint.substr(0, eq) != pm.name) continue;
      found = true;
      if (eq != std::string::npos) source = hint.substr(eq + 1);
    }
    if (!found) {
      return InvalidArgument(pm.at + ".name: no volume '" + pm.name + "' in the pod's volumes",
                             pm.loc);
    }
    if (source.empty()) {
      Ignore(pm.at, "ignored (volume '" + pm.name +
                        "' is of a kind that is not mounted: use hostPath, emptyDir or a "
                        "persistentVolumeClaim)");
      continue;
    }
    Mount m{source, pm.path, pm.read_only};
    UNIPOOL_RETURN_IF_ERROR(CheckMount(m, pm.loc, pm.at));
    job_.mounts.push_back(std::move(m));
  }
  return Status::Ok();
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

bool KubeReader::SpreadsOverNodes(const YAML::Node& term) const {
  return term.IsDefined() && term.IsMap() && term["topologyKey"].IsDefined() &&
         term["topologyKey"].IsScalar() && term["topologyKey"].Scalar() == "kubernetes.io/hostname";
}

// Constraints on kubernetes.io/hostname spread the pods, one a node (the
// tightest skew); other topology keys follow the cluster's topology.
Status KubeReader::ReadSpreadConstraints(const YAML::Node& n, const std::string& path) {
  if (!n.IsSequence()) return Expected(n, path, "a list of topology spread constraints");
  for (size_t i = 0; i < n.size(); ++i) {
    if (SpreadsOverNodes(n[i])) {
      job_.spread = Spread::kSpread;
    } else {
      Ignore(Index(path, i), kPlacementWhy);
    }
  }
  return Status::Ok();
}

// podAntiAffinity on kubernetes.io/hostname (required or preferred)
// spreads the pods; the rest of affinity is ignored.
Status KubeReader::ReadAffinity(const YAML::Node& n, const std::string& path) {
  const Reader anti = [this](const YAML::Node& v, const std::string& p) -> Status {
    bool spreads = false;
    for (const char* kind : {"requiredDuringSchedulingIgnoredDuringExecution",
                             "preferredDuringSchedulingIgnoredDuringExecution"}) {
      const YAML::Node terms = v.IsMap() ? v[kind] : YAML::Node();
      if (!terms.IsDefined() || !terms.IsSequence()) continue;
      for (const YAML::Node& t : terms) {
        spreads = spreads || SpreadsOverNodes(t) || SpreadsOverNodes(t["podAffinityTerm"]);
      }
    }
    if (spreads) {
      job_.spread = Spread::kSpread;
    } else {
      Ignore(p, kPlacementWhy);
    }
    return Status::Ok();
  };
  return Walk(n, path, {{"podAntiAffinity", anti}}, kPlacementWhy);
}

Status KubeReader::SetGang(int64_t pods, int64_t pod_gpus, SourceLoc at, const std::string& path) {
  if (pods * pod_gpus > kMaxJobGpus) {
    return InvalidArgument(path + ": " + std::to_string(pods) + " pods of " +
                               std::to_string(pod_gpus) + " GPUs exceed " +
                               std::to_string(kMaxJobGpus) + " GPUs",
                           at);
  }
  job_.gpus = pods * pod_gpus;
  job_.gpus_per_task = static_cast<int32_t>(pod_gpus);  // a pod is a task; pods may share a node
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
  job_.launch = LaunchMode::kPerTask;  // the container's command runs once per pod
  return MatchMounts();
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

}  // namespace

Status ReadKubePod(const YAML::Node& doc, ParsedJob* out) { return KubeReader(out).ReadPod(doc); }

Status ReadKubeBatchJob(const YAML::Node& doc, ParsedJob* out) {
  return KubeReader(out).ReadBatchJob(doc);
}

Status ReadKubePyTorchJob(const YAML::Node& doc, ParsedJob* out) {
  return KubeReader(out).ReadPyTorchJob(doc);
}

}  // namespace unipool::io::spec_internal
