// The native shape: apiVersion unipool/v1, kind Job. Strict: unknown fields
// are errors.
#include <set>

#include "io/job_spec_rules.h"
#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io::spec_internal {
namespace {

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
// env as a list of {name, value, secret}, as in Kubernetes (secret: the
// value is kept apart, JobRequest::secret_env).
Status ReadNativeEnvList(const YAML::Node& n, const std::string& path, JobRequest* job) {
  std::set<std::string> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = Index(path, i);
    Result<Fields> f = Fields::Of(n[i], at, {"name", "value", "secret"});
    if (!f.ok()) return f.status();
    if (!f->Has("name")) return Missing(f->loc(), at + ".name");
    std::string name, value;
    bool secret = false;
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(f->Get("name"), at + ".name", &name, false));
    if (f->Has("value")) {
      UNIPOOL_RETURN_IF_ERROR(ReadScalar(f->Get("value"), at + ".value", &value, true));
    }
    UNIPOOL_RETURN_IF_ERROR(f->Bool("secret", &secret));
    UNIPOOL_RETURN_IF_ERROR(AddEnv(f->Get("name"), at + ".name", name, std::move(value), &seen,
                                   secret ? &job->secret_env : &job->env));
  }
  return Status::Ok();
}

Status ReadNativeEnv(const YAML::Node& n, const std::string& path, JobRequest* job) {
  if (!n.IsSequence() && !n.IsMap()) {
    return Expected(n, path, "a list of {name, value} or a mapping of names to values");
  }
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  return n.IsMap() ? ReadEnvMapping(n, path, &job->env) : ReadNativeEnvList(n, path, job);
}

Status ReadNativeProcess(const Fields& f, JobRequest* job) {
  if (!f.Has("command")) return Missing(f.loc(), "spec.command");
  UNIPOOL_RETURN_IF_ERROR(ReadCommand(f.Get("command"), "spec.command", &job->command));
  if (f.Has("args")) {
    UNIPOOL_RETURN_IF_ERROR(ReadStringList(f.Get("args"), "spec.args", &job->args));
  }
  if (f.Has("env")) UNIPOOL_RETURN_IF_ERROR(ReadNativeEnv(f.Get("env"), "spec.env", job));
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "workingDir", &job->working_dir));
  return ReadFieldString(f, "image", &job->image);
}

Status ReadLaunch(const Fields& f, LaunchMode* out) {
  std::string s;
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "launch", &s));
  if (s.empty()) return Status::Ok();
  std::optional<LaunchMode> m = ParseLaunchMode(s);
  if (!m) return Expected(f.Get("launch"), f.PathOf("launch"), "per-gpu, per-node or per-task");
  *out = *m;
  return Status::Ok();
}

// A share of spec.gpus (gpusPerNode, gpusPerTask) that divides it.
Status ReadShare(const Fields& f, const char* key, int64_t gpus, int32_t* out) {
  UNIPOOL_RETURN_IF_ERROR(f.Int32(key, out, 0, kMaxGpusPerNode));
  if (*out == 0 || gpus % *out == 0) return Status::Ok();
  return InvalidArgument(f.PathOf(key) + ": " + std::to_string(*out) +
                             " does not divide spec.gpus (" + std::to_string(gpus) + ")",
                         LocOf(f.Get(key)));
}

// nodes: {min, max}, torchrun's --nnodes=MIN:MAX: `max` nodes of
// gpusPerNode GPUs each (spec.gpus, when given, is their product), elastic
// down to `min` nodes. Sets *min_nodes.
Status ReadNodeRange(const Fields& f, JobRequest* job, int64_t* min_nodes) {
  Result<Fields> r = Fields::Of(f.Get("nodes"), "spec.nodes", {"min", "max"});
  if (!r.ok()) return r.status();
  int64_t max = 0;
  UNIPOOL_RETURN_IF_ERROR(r->Int("max", &max, 1, kMaxJobGpus, true));
  UNIPOOL_RETURN_IF_ERROR(r->Int("min", min_nodes, 1, max, true));
  if (f.Has("gpusPerTask")) {
    return InvalidArgument("spec.nodes: a range of nodes runs a task per node: give gpusPerNode",
                           LocOf(f.Get("gpusPerTask")));
  }
  int32_t per = 0;
  UNIPOOL_RETURN_IF_ERROR(f.Int32("gpusPerNode", &per, 0, kMaxGpusPerNode));
  if (per == 0 && job->gpus > 0 && job->gpus % max == 0)
    per = static_cast<int32_t>(job->gpus / max);
  if (per == 0) {
    return InvalidArgument(
        "spec.nodes: a range of nodes needs spec.gpusPerNode (the GPUs on each node)",
        LocOf(f.Get("nodes")));
  }
  if (job->gpus == 0) job->gpus = max * per;
  if (job->gpus != max * per || job->gpus > kMaxJobGpus) {
    return InvalidArgument("spec.gpus: " + std::to_string(job->gpus) + " is not nodes.max (" +
                               std::to_string(max) + ") x gpusPerNode (" + std::to_string(per) +
                               ")",
                           LocOf(f.Has("gpus") ? f.Get("gpus") : f.Get("nodes")));
  }
  job->nodes = static_cast<int32_t>(max);
  job->gpus_per_node = per;
  job->min_gpus = *min_nodes * per;
  return Status::Ok();
}

// gpusPerNode or gpusPerTask (not both) and nodes, a number.
Status ReadFixedShape(const Fields& f, JobRequest* job) {
  UNIPOOL_RETURN_IF_ERROR(ReadShare(f, "gpusPerNode", job->gpus, &job->gpus_per_node));
  UNIPOOL_RETURN_IF_ERROR(ReadShare(f, "gpusPerTask", job->gpus, &job->gpus_per_task));
  if (job->gpus_per_node > 0 && job->gpus_per_task > 0) {
    return InvalidArgument(
        "spec.gpusPerTask: give gpusPerNode (the GPUs on each node) or gpusPerTask (tasks that "
        "may share a node), not both",
        LocOf(f.Get("gpusPerTask")));
  }
  int64_t nodes = 0;
  UNIPOOL_RETURN_IF_ERROR(f.Int("nodes", &nodes, 0, kMaxJobGpus));
  job->nodes = static_cast<int32_t>(nodes);
  if (nodes > 0) {
    const int64_t per = job->gpus_per_node > 0 ? job->gpus_per_node : job->gpus / nodes;
    if (job->gpus_per_task > 0 || per * nodes != job->gpus) {
      return InvalidArgument(
          "spec.nodes: " + std::to_string(nodes) + " nodes" +
              (job->gpus_per_task > 0
                   ? " with gpusPerTask: give nodes alone or with gpusPerNode"
                   : " cannot share spec.gpus (" + std::to_string(job->gpus) + ") evenly" +
                         (job->gpus_per_node > 0 ? " at gpusPerNode " + std::to_string(per) : "")),
          LocOf(f.Get("nodes")));
    }
    job->gpus_per_node = static_cast<int32_t>(per);
  }
  return Status::Ok();
}

// gpus with at most one of gpusPerNode and gpusPerTask; nodes (a number, or
// a range); exclusive; placement (pack or spread); elastic; launch.
Status ReadNativeShape(const Fields& f, JobRequest* job) {
  const bool range = f.Has("nodes") && f.Get("nodes").IsMap();
  UNIPOOL_RETURN_IF_ERROR(f.Int("gpus", &job->gpus, 1, kMaxJobGpus, !range));
  int64_t min_nodes = 0;
  UNIPOOL_RETURN_IF_ERROR(range ? ReadNodeRange(f, job, &min_nodes) : ReadFixedShape(f, job));
  UNIPOOL_RETURN_IF_ERROR(f.Bool("exclusive", &job->exclusive));
  std::string placement;
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "placement", &placement));
  if (placement == "spread") {
    job->spread = Spread::kSpread;
  } else if (!placement.empty() && placement != "pack") {
    return Expected(f.Get("placement"), f.PathOf("placement"), "pack or spread");
  }
  if (range && job->exclusive) {
    return InvalidArgument("spec.nodes: an exclusive job has a fixed size", LocOf(f.Get("nodes")));
  }
  if (f.Has("elastic")) {
    Result<Fields> e = Fields::Of(f.Get("elastic"), "spec.elastic", {"minGpus", "onResize"});
    if (!e.ok()) return e.status();
    if (range && e->Has("minGpus")) {
      return InvalidArgument(
          "spec.elastic.minGpus: spec.nodes.min says the minimum already; give one of them",
          LocOf(e->Get("minGpus")));
    }
    UNIPOOL_RETURN_IF_ERROR(e->Int("minGpus", &job->min_gpus, 1, job->gpus, !range));
    std::string on_resize = "restart";
    UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*e, "onResize", &on_resize));
    if (on_resize != "restart" && on_resize != "continue") {
      return Expected(e->Get("onResize"), e->PathOf("onResize"), "restart or continue");
    }
    job->elastic_continue = on_resize == "continue";
    if (job->exclusive) {
      return InvalidArgument("spec.elastic: an exclusive job has a fixed size",
                             LocOf(f.Get("elastic")));
    }
  }
  return ReadLaunch(f, &job->launch);
}

// resources: {cpu, memory, pids}, each task's limits.
Status ReadNativeResources(const Fields& f, TaskLimits* out) {
  if (!f.Has("resources")) return Status::Ok();
  Result<Fields> r = Fields::Of(f.Get("resources"), "spec.resources", {"cpu", "memory", "pids"});
  if (!r.ok()) return r.status();
  if (r->Has("cpu")) {
    UNIPOOL_RETURN_IF_ERROR(ReadCpuLimit(r->Get("cpu"), r->PathOf("cpu"), &out->milli_cpu));
  }
  if (r->Has("memory")) {
    UNIPOOL_RETURN_IF_ERROR(ReadMemoryLimit(r->Get("memory"), r->PathOf("memory"), &out->memory));
  }
  return r->Int("pids", &out->pids, 1, kMaxPids);
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
    Result<Fields> t =
        Fields::Of(f.Get("topology"), "spec.topology", {"within", "prefer", "maxWait"});
    if (!t.ok()) return t.status();
    UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*t, "within", &job->within));
    UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*t, "prefer", &job->prefer));
    if (t->Has("maxWait")) {
      Duration d;
      UNIPOOL_RETURN_IF_ERROR(t->Dur("maxWait", &d));
      job->max_wait = d;
    }
  }
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "partition", &job->partition));
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "dataLocality", &job->data_locality));
  UNIPOOL_RETURN_IF_ERROR(f.Dur("progressTimeout", &job->progress_timeout));
  UNIPOOL_RETURN_IF_ERROR(ReadFieldString(f, "onStraggler", &job->on_straggler));
  if (job->on_straggler != "warn" && job->on_straggler != "replace") {
    return InvalidArgument(f.PathOf("onStraggler") + ": expected warn or replace, got " +
                           Quote(job->on_straggler));
  }
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
// volumes: names, or {name, source, mountPath, readOnly}: recorded as
// "name=source"; with a mountPath also a Mount (its source is required).
Status ReadNativeVolumes(const Fields& f, JobRequest* job) {
  if (!f.Has("volumes")) return Status::Ok();
  const YAML::Node n = f.Get("volumes");
  const std::string path = "spec.volumes";
  if (!n.IsSequence()) return Expected(n, path, "a list of volume names or {name, source}");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string at = Index(path, i);
    std::string name, source;
    if (n[i].IsMap()) {
      Result<Fields> v = Fields::Of(n[i], at, {"name", "source", "mountPath", "readOnly"});
      if (!v.ok()) return v.status();
      if (!v->Has("name")) return Missing(v->loc(), at + ".name");
      UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*v, "name", &name));
      UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*v, "source", &source));
      if (v->Has("mountPath")) {
        Mount m{source, "", false};
        UNIPOOL_RETURN_IF_ERROR(ReadFieldString(*v, "mountPath", &m.path));
        UNIPOOL_RETURN_IF_ERROR(v->Bool("readOnly", &m.read_only));
        UNIPOOL_RETURN_IF_ERROR(CheckMount(m, LocOf(n[i]), at));
        job->mounts.push_back(std::move(m));
      }
    } else {
      UNIPOOL_RETURN_IF_ERROR(ReadScalar(n[i], at, &name, false));
    }
    UNIPOOL_RETURN_IF_ERROR(AddVolume(n[i], at, name, source, &job->volumes));
  }
  return Status::Ok();
}

Status ReadNativeSpec(const YAML::Node& n, JobRequest* job) {
  Result<Fields> f = Fields::Of(
      n, "spec", {"command",   "args",         "env",           "workingDir", "image",
                  "gpus",      "gpusPerNode",  "gpusPerTask",   "nodes",      "exclusive",
                  "placement", "elastic",      "launch",        "queue",      "priorityClassName",
                  "priority",  "preemptible",  "restartPolicy", "checkpoint", "topology",
                  "partition", "dataLocality", "volumes",       "timeLimit",  "progressTimeout",
                  "resources", "onStraggler"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(ReadNativeProcess(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativeShape(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativeResources(*f, &job->limits));
  UNIPOOL_RETURN_IF_ERROR(ReadNativePriority(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativePlacement(*f, job));
  UNIPOOL_RETURN_IF_ERROR(ReadNativeRecovery(*f, job));
  return ReadNativeVolumes(*f, job);
}

}  // namespace

Status ReadNative(const YAML::Node& doc, JobRequest* job) {
  Result<Fields> f = Fields::Of(doc, "job", {"apiVersion", "kind", "metadata", "spec"});
  if (!f.ok()) return f.status();
  if (!f->Has("metadata")) return Missing(f->loc(), "metadata");
  UNIPOOL_RETURN_IF_ERROR(ReadNativeMetadata(f->Get("metadata"), job));
  if (!f->Has("spec")) return Missing(f->loc(), "spec");
  return ReadNativeSpec(f->Get("spec"), job);
}

}  // namespace unipool::io::spec_internal
