#include "io/sim_reader.h"

#include <filesystem>

#include "core/sim/workload.h"
#include "io/cluster_reader.h"
#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

std::string Resolve(const std::string& base_file, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const std::filesystem::path dir = std::filesystem::path(base_file).parent_path();
  return (dir / path).lexically_normal().string();
}

Status ReadCheckpointMode(const Fields& f, const char* key, sim::CheckpointMode* out,
                          bool* given = nullptr) {
  std::string mode;
  UNIPOOL_RETURN_IF_ERROR(f.String(key, &mode));
  if (mode.empty()) return Status::Ok();
  if (given) *given = mode != "asGiven";
  if (mode == "none") {
    *out = sim::CheckpointMode::kNone;
  } else if (mode == "fixed") {
    *out = sim::CheckpointMode::kFixed;
  } else if (mode == "youngDaly") {
    *out = sim::CheckpointMode::kYoungDaly;
  } else if (mode != "asGiven" || !given) {
    return Expected(f.Get(key), f.PathOf(key),
                    given ? "asGiven, none, fixed or youngDaly" : "none, fixed or youngDaly");
  }
  return Status::Ok();
}

Result<int> TierIndex(const Topology& topo, const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) return Expected(node, path, "a tier name");
  std::optional<int> t = topo.FindTier(node.Scalar());
  if (!t) {
    std::string names;
    for (int i = 0; i < topo.num_tiers(); ++i) names += (i ? ", " : "") + topo.tier(i).name;
    return Expected(node, path, "a tier of the cluster (" + names + ")");
  }
  return *t;
}

Status ReadQueue(const YAML::Node& node, const std::string& path, sched::QueueSpec* q) {
  Result<Fields> f = Fields::Of(
      node, path, {"name", "parent", "guarantee", "limit", "weight", "policy", "order", "grace"});
  if (!f.ok()) return f.status();
  int64_t guarantee = 0, limit = 0;
  std::string policy = "best-effort", order = sched::QueueOrderName(q->order);
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &q->name, true));
  UNIPOOL_RETURN_IF_ERROR(f->String("parent", &q->parent));
  UNIPOOL_RETURN_IF_ERROR(f->Int("guarantee", &guarantee, 0, int64_t{1} << 30));
  UNIPOOL_RETURN_IF_ERROR(f->Int("limit", &limit, 0, int64_t{1} << 30));
  UNIPOOL_RETURN_IF_ERROR(f->Int("weight", &q->weight, 1, 1000000));
  UNIPOOL_RETURN_IF_ERROR(f->String("policy", &policy));
  UNIPOOL_RETURN_IF_ERROR(f->String("order", &order));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("grace", &q->grace));
  if (!sched::ParseQueueOrder(order, &q->order)) {
    return Expected(f->Get("order"), f->PathOf("order"), "submission, sjf or las");
  }
  if (policy != "best-effort" && policy != "fifo") {
    return Expected(f->Get("policy"), f->PathOf("policy"), "best-effort or fifo");
  }
  q->policy = policy == "fifo" ? sched::QueuePolicy::kFifo : sched::QueuePolicy::kBestEffort;
  q->guarantee = Gpus(guarantee);
  q->limit = Gpus(limit);
  return Status::Ok();
}

Result<int32_t> QueueIndex(const std::vector<sim::QueueConfig>& queues, const Fields& f) {
  std::string name;
  UNIPOOL_RETURN_IF_ERROR(f.String("queue", &name));
  if (name.empty()) return 0;
  for (size_t i = 0; i < queues.size(); ++i) {
    if (queues[i].spec.name == name) return static_cast<int32_t>(i);
  }
  return Expected(f.Get("queue"), f.PathOf("queue"), "a queue listed in spec.queues");
}

Status ReadClass(const YAML::Node& node, const std::string& path,
                 const std::vector<sim::QueueConfig>& queues, sim::JobClass* c) {
  Result<Fields> f =
      Fields::Of(node, path,
                 {"name", "share", "sizes", "durationMedian", "durationSigma", "durationMax",
                  "queue", "priority", "preemptible", "spanPartitions", "elasticMin", "checkpoint",
                  "checkpointInterval", "stateGBPerGpu", "storageGBps", "checkpointCost",
                  "twoStage", "restartCost", "estimate"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &c->name, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("share", &c->share, 1e-9, 1e12));
  const YAML::Node sizes = f->Get("sizes");
  if (!sizes.IsDefined()) return InvalidArgument(f->PathOf("sizes") + ": required field is missing", f->loc());
  if (!sizes.IsMap() || sizes.size() == 0) return Expected(sizes, f->PathOf("sizes"), "a mapping of GPUs to weights");
  for (const auto& kv : sizes) {
    int64_t gpus = 0;
    double w = 0;
    if (!kv.first.IsScalar() || !ParseInt64(kv.first.Scalar(), &gpus) || gpus < 1 ||
        gpus > (int64_t{1} << 24)) {
      return Expected(kv.first, f->PathOf("sizes"), "GPU counts from 1 to 16777216 as keys");
    }
    if (!kv.second.IsScalar() || !ParseDouble(kv.second.Scalar(), &w) || w <= 0) {
      return Expected(kv.second, f->PathOf("sizes") + "." + kv.first.Scalar(), "a weight > 0");
    }
    c->sizes.emplace_back(gpus, w);
  }
  UNIPOOL_RETURN_IF_ERROR(f->Dur("durationMedian", &c->duration_median, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("durationSigma", &c->duration_sigma, 0, 10));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("durationMax", &c->duration_max));
  Result<int32_t> q = QueueIndex(queues, *f);
  if (!q.ok()) return q.status();
  c->queue = *q;
  int64_t priority = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Int("priority", &priority, -1000000, 1000000));
  c->priority = static_cast<int32_t>(priority);
  UNIPOOL_RETURN_IF_ERROR(f->Bool("preemptible", &c->preemptible));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("spanPartitions", &c->span_partitions));
  UNIPOOL_RETURN_IF_ERROR(f->Double("elasticMin", &c->elastic_min, 0, 1));
  UNIPOOL_RETURN_IF_ERROR(ReadCheckpointMode(*f, "checkpoint", &c->checkpoint));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("checkpointInterval", &c->checkpoint_interval));
  double state_gb = 0, storage_gbps = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Double("stateGBPerGpu", &state_gb, 0, 1e6));
  UNIPOOL_RETURN_IF_ERROR(f->Double("storageGBps", &storage_gbps, 0, 1e9));
  c->state_bytes_per_gpu = state_gb * 1e9;
  c->storage_bytes_per_s = storage_gbps * 1e9;
  UNIPOOL_RETURN_IF_ERROR(f->Dur("checkpointCost", &c->checkpoint_fixed));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("twoStage", &c->two_stage));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("restartCost", &c->restart_cost));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("estimate", &c->estimate));
  if (c->checkpoint == sim::CheckpointMode::kFixed && c->checkpoint_interval.value() <= 0) {
    return InvalidArgument(f->PathOf("checkpointInterval") + ": required when checkpoint is fixed",
                           f->loc());
  }
  return Status::Ok();
}

Status ReadJob(const YAML::Node& node, const std::string& path,
               const std::vector<sim::QueueConfig>& queues, sim::SimJob* j) {
  Result<Fields> f =
      Fields::Of(node, path,
                 {"name", "gpus", "submit", "duration", "queue", "priority", "preemptible",
                  "spanPartitions", "elasticMin", "checkpoint", "checkpointInterval",
                  "checkpointCost", "checkpointGB", "twoStage", "restartCost", "estimate"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &j->name, true));
  int64_t gpus = 0, priority = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Int("gpus", &gpus, 1, int64_t{1} << 24, true));
  j->gpus = Gpus(gpus);
  UNIPOOL_RETURN_IF_ERROR(f->Dur("submit", &j->submit));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("duration", &j->work, true));
  Result<int32_t> q = QueueIndex(queues, *f);
  if (!q.ok()) return q.status();
  j->queue = *q;
  UNIPOOL_RETURN_IF_ERROR(f->Int("priority", &priority, -1000000, 1000000));
  j->priority = static_cast<int32_t>(priority);
  UNIPOOL_RETURN_IF_ERROR(f->Bool("preemptible", &j->preemptible));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("spanPartitions", &j->span_partitions));
  double elastic = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Double("elasticMin", &elastic, 0, 1));
  if (elastic > 0) j->min_gpus = Gpus(std::max<int64_t>(1, std::llround(elastic * gpus)));
  UNIPOOL_RETURN_IF_ERROR(ReadCheckpointMode(*f, "checkpoint", &j->checkpoint));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("checkpointInterval", &j->checkpoint_interval));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("checkpointCost", &j->checkpoint_cost));
  double checkpoint_gb = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Double("checkpointGB", &checkpoint_gb, 0, 1e9));
  j->checkpoint_bytes = checkpoint_gb * 1e9;
  UNIPOOL_RETURN_IF_ERROR(f->Bool("twoStage", &j->two_stage));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("restartCost", &j->restart_cost));
  bool estimate = true;
  UNIPOOL_RETURN_IF_ERROR(f->Bool("estimate", &estimate));
  if (estimate) j->runtime_estimate = j->work + j->restart_cost;
  return Status::Ok();
}

Status ReadWorkload(const YAML::Node& node, const std::string& file, SimFile* out) {
  Result<Fields> f = Fields::Of(node, "spec.workload", {"trace", "synthetic", "jobs"});
  if (!f.ok()) return f.status();
  if (f->Has("trace") + f->Has("synthetic") + f->Has("jobs") != 1) {
    return InvalidArgument("spec.workload: give exactly one of 'trace', 'synthetic' or 'jobs'", f->loc());
  }
  if (f->Has("jobs")) {
    std::vector<YAML::Node> items;
    UNIPOOL_RETURN_IF_ERROR(f->Sequence("jobs", &items, true));
    for (size_t i = 0; i < items.size(); ++i) {
      out->jobs.emplace_back();
      out->jobs.back().id = static_cast<int64_t>(i) + 1;
      UNIPOOL_RETURN_IF_ERROR(ReadJob(items[i], "spec.workload.jobs[" + std::to_string(i) + "]",
                                      out->config.queues, &out->jobs.back()));
    }
    return Status::Ok();
  }
  if (f->Has("trace")) {
    Result<Fields> t = Fields::Of(f->Get("trace"), "spec.workload.trace",
                                  {"file", "queueFrom", "defaultQueue", "checkpoint",
                                   "checkpointInterval", "checkpointCost", "restartCost", "estimates"});
    if (!t.ok()) return t.status();
    UNIPOOL_RETURN_IF_ERROR(t->String("file", &out->trace_path, true));
    out->trace_path = Resolve(file, out->trace_path);
    UNIPOOL_RETURN_IF_ERROR(t->String("queueFrom", &out->trace.queue_from));
    if (out->trace.queue_from != "queue" && out->trace.queue_from != "user" &&
        out->trace.queue_from != "none") {
      return Expected(t->Get("queueFrom"), t->PathOf("queueFrom"), "queue, user or none");
    }
    UNIPOOL_RETURN_IF_ERROR(t->String("defaultQueue", &out->trace.default_queue));
    UNIPOOL_RETURN_IF_ERROR(ReadCheckpointMode(*t, "checkpoint", &out->trace.checkpoint));
    UNIPOOL_RETURN_IF_ERROR(t->Dur("checkpointInterval", &out->trace.checkpoint_interval));
    UNIPOOL_RETURN_IF_ERROR(t->Dur("checkpointCost", &out->trace.checkpoint_cost));
    UNIPOOL_RETURN_IF_ERROR(t->Dur("restartCost", &out->trace.restart_cost));
    return t->Bool("estimates", &out->trace.estimates);
  }
  Result<Fields> s = Fields::Of(f->Get("synthetic"), "spec.workload.synthetic",
                                {"arrivalsPerHour", "horizon", "classes", "fitTrace"});
  if (!s.ok()) return s.status();
  sim::SyntheticSpec spec;
  spec.horizon = out->config.horizon;
  // A class fitted to a trace: its sizes, durations and arrival rate.
  std::string fit_path;
  UNIPOOL_RETURN_IF_ERROR(s->String("fitTrace", &fit_path));
  if (!fit_path.empty()) {
    Result<Trace> trace = ReadTrace(Resolve(file, fit_path), TraceOptions{});
    if (!trace.ok()) {
      return InvalidArgument(s->PathOf("fitTrace") + ": " + trace.status().message(),
                             LocOf(s->Get("fitTrace")));
    }
    Result<sim::FittedClass> fit = sim::FitClass(trace->jobs, "fitted");
    if (!fit.ok()) return InvalidArgument(s->PathOf("fitTrace") + ": " + fit.status().message(), s->loc());
    spec.classes.push_back(fit->job_class);
    spec.arrivals_per_hour = fit->arrivals_per_hour;
  }
  UNIPOOL_RETURN_IF_ERROR(
      s->Double("arrivalsPerHour", &spec.arrivals_per_hour, 1e-6, 1e9, fit_path.empty()));
  UNIPOOL_RETURN_IF_ERROR(s->Dur("horizon", &spec.horizon));
  if (spec.horizon.value() <= 0) {
    return InvalidArgument("spec.workload.synthetic.horizon: needed when spec.horizon is not set",
                           s->loc());
  }
  std::vector<YAML::Node> classes;
  UNIPOOL_RETURN_IF_ERROR(s->Sequence("classes", &classes, fit_path.empty()));
  for (size_t i = 0; i < classes.size(); ++i) {
    spec.classes.emplace_back();
    UNIPOOL_RETURN_IF_ERROR(ReadClass(classes[i], "spec.workload.synthetic.classes[" +
                                                      std::to_string(i) + "]",
                                      out->config.queues, &spec.classes.back()));
  }
  out->synthetic = std::move(spec);
  return Status::Ok();
}

Status ReadFailure(const YAML::Node& node, const std::string& path, const Topology& topo,
                   sim::FailureProcess* fp) {
  Result<Fields> f = Fields::Of(node, path,
                                {"component", "cause", "per1000NodeDays", "mtbf", "weibullShape",
                                 "tier", "detection", "repair"});
  if (!f.ok()) return f.status();
  std::string component;
  UNIPOOL_RETURN_IF_ERROR(f->String("component", &component, true));
  static const std::pair<const char*, sim::Component> kKinds[] = {
      {"gpu", sim::Component::kGpu},
      {"node", sim::Component::kNode},
      {"nic", sim::Component::kNic},
      {"leafSwitch", sim::Component::kLeafSwitch},
      {"spineSwitch", sim::Component::kSpineSwitch},
      {"powerDomain", sim::Component::kPowerDomain}};
  bool known = false;
  for (const auto& [name, kind] : kKinds) {
    if (component == name) fp->component = kind, known = true;
  }
  if (!known) {
    return Expected(f->Get("component"), f->PathOf("component"),
                    "gpu, node, nic, leafSwitch, spineSwitch or powerDomain");
  }
  // Where each kind sits unless `tier` says otherwise.
  switch (fp->component) {
    case sim::Component::kLeafSwitch:
    case sim::Component::kPowerDomain: fp->tier = std::min(1, topo.num_tiers() - 1); break;
    case sim::Component::kSpineSwitch: fp->tier = std::min(2, topo.num_tiers() - 1); break;
    default: fp->tier = -1;
  }
  if (f->Has("tier")) {
    Result<int> t = TierIndex(topo, f->Get("tier"), f->PathOf("tier"));
    if (!t.ok()) return t.status();
    fp->tier = *t;
  }
  UNIPOOL_RETURN_IF_ERROR(f->String("cause", &fp->cause));
  UNIPOOL_RETURN_IF_ERROR(f->Double("per1000NodeDays", &fp->per_1000_node_days, 0, 1e9));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("mtbf", &fp->mtbf));
  if ((fp->per_1000_node_days > 0) == (fp->mtbf.value() > 0)) {
    return InvalidArgument(path + ": give exactly one of per1000NodeDays or mtbf", f->loc());
  }
  UNIPOOL_RETURN_IF_ERROR(f->Double("weibullShape", &fp->weibull_shape, 0.05, 20));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("detection", &fp->detection));
  return f->Dur("repair", &fp->repair);
}

Status ReadMaintenance(const YAML::Node& node, const std::string& path, const Topology& topo,
                       sim::Maintenance* m) {
  Result<Fields> f = Fields::Of(node, path, {"tier", "start", "length", "every"});
  if (!f.ok()) return f.status();
  if (!f->Has("tier")) return InvalidArgument(path + ".tier: required field is missing", f->loc());
  Result<int> t = TierIndex(topo, f->Get("tier"), f->PathOf("tier"));
  if (!t.ok()) return t.status();
  m->tier = *t;
  UNIPOOL_RETURN_IF_ERROR(f->Dur("start", &m->start));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("length", &m->length, true));
  return f->Dur("every", &m->every);
}

// elastic: restart | continue, elasticMinShare, elasticStep, rejoinCost,
// onStraggler: warn | replace.
Status ReadPolicyElastic(const Fields& f, sim::PolicyConfig* p) {
  std::string elastic, straggler;
  UNIPOOL_RETURN_IF_ERROR(f.String("elastic", &elastic));
  if (!elastic.empty() && elastic != "restart" && elastic != "continue") {
    return Expected(f.Get("elastic"), f.PathOf("elastic"), "restart or continue");
  }
  if (!elastic.empty()) p->elastic_continue = elastic == "continue";
  UNIPOOL_RETURN_IF_ERROR(f.Double("elasticMinShare", &p->elastic_min_share, 0, 1));
  int64_t step = p->elastic_step.value();
  UNIPOOL_RETURN_IF_ERROR(f.Int("elasticStep", &step, 0, int64_t{1} << 40));
  p->elastic_step = Gpus(step);
  UNIPOOL_RETURN_IF_ERROR(f.Dur("rejoinCost", &p->rejoin_cost));
  UNIPOOL_RETURN_IF_ERROR(f.String("onStraggler", &straggler));
  if (!straggler.empty() && straggler != "warn" && straggler != "replace") {
    return Expected(f.Get("onStraggler"), f.PathOf("onStraggler"), "warn or replace");
  }
  if (!straggler.empty()) p->replace_stragglers = straggler == "replace";
  return Status::Ok();
}

Status ReadStraggler(const YAML::Node& node, const std::string& path, sim::StragglerProcess* sp) {
  Result<Fields> f =
      Fields::Of(node, path, {"per1000NodeDays", "slowdown", "duration", "detection"});
  if (!f.ok()) return f.status();
  UNIPOOL_RETURN_IF_ERROR(f->Double("per1000NodeDays", &sp->per_1000_node_days, 0, 1e9));
  if (!(sp->per_1000_node_days > 0)) {
    return InvalidArgument(path + ".per1000NodeDays: required, > 0", f->loc());
  }
  UNIPOOL_RETURN_IF_ERROR(f->Double("slowdown", &sp->slowdown, 1, 1000));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("duration", &sp->duration));
  if (sp->duration.value() <= 0) {
    return Expected(f->Get("duration"), f->PathOf("duration"), "a duration > 0");
  }
  return f->Dur("detection", &sp->detection);
}

Status ReadPolicy(const YAML::Node& node, const std::string& path, sim::PolicyConfig* p) {
  Result<Fields> f =
      Fields::Of(node, path,
                 {"name", "preset", "placer", "preemption", "backfill", "minRuntime", "checkpoint",
                  "checkpointInterval", "flakyFailures", "compactMaxWait", "commShare",
                  "queueOrder", "powerCaps", "twoStage", "elastic", "elasticMinShare",
                  "elasticStep", "rejoinCost", "onStraggler"});
  if (!f.ok()) return f.status();
  std::string preset;
  UNIPOOL_RETURN_IF_ERROR(f->String("preset", &preset));
  if (!preset.empty()) {
    Result<sim::PolicyConfig> base = PolicyPreset(preset);
    if (!base.ok()) return InvalidArgument(f->PathOf("preset") + ": " + base.status().message(), LocOf(f->Get("preset")));
    *p = *base;
  }
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &p->name, preset.empty()));
  std::string placer;
  UNIPOOL_RETURN_IF_ERROR(f->String("placer", &placer));
  if (!placer.empty() && placer != "topology" && placer != "firstFit") {
    return Expected(f->Get("placer"), f->PathOf("placer"), "topology or firstFit");
  }
  if (!placer.empty()) {
    p->scheduler.placer = placer == "firstFit" ? sched::PlacerKind::kFirstFit : sched::PlacerKind::kTopology;
  }
  UNIPOOL_RETURN_IF_ERROR(f->Bool("preemption", &p->scheduler.preemption));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("backfill", &p->scheduler.backfill));
  UNIPOOL_RETURN_IF_ERROR(f->Bool("powerCaps", &p->scheduler.power_caps));
  if (f->Has("twoStage")) {
    p->override_two_stage = true;
    UNIPOOL_RETURN_IF_ERROR(f->Bool("twoStage", &p->two_stage));
  }
  UNIPOOL_RETURN_IF_ERROR(f->Dur("minRuntime", &p->scheduler.min_runtime));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("compactMaxWait", &p->scheduler.compact_max_wait));
  UNIPOOL_RETURN_IF_ERROR(f->Double("commShare", &p->scheduler.comm_share, 0, 1));
  std::string order;
  UNIPOOL_RETURN_IF_ERROR(f->String("queueOrder", &order));
  if (!order.empty()) {
    if (!sched::ParseQueueOrder(order, &p->queue_order)) {
      return Expected(f->Get("queueOrder"), f->PathOf("queueOrder"), "submission, sjf or las");
    }
    p->override_queue_order = true;
  }
  UNIPOOL_RETURN_IF_ERROR(ReadPolicyElastic(*f, p));
  int64_t flaky = p->scheduler.flaky_failures;
  UNIPOOL_RETURN_IF_ERROR(f->Int("flakyFailures", &flaky, 1, 1 << 30));
  p->scheduler.flaky_failures = static_cast<int>(flaky);
  bool overrides = p->override_checkpoint;
  UNIPOOL_RETURN_IF_ERROR(ReadCheckpointMode(*f, "checkpoint", &p->checkpoint, &overrides));
  p->override_checkpoint = overrides;
  UNIPOOL_RETURN_IF_ERROR(f->Dur("checkpointInterval", &p->checkpoint_interval));
  if (p->override_checkpoint && p->checkpoint == sim::CheckpointMode::kFixed &&
      p->checkpoint_interval.value() <= 0) {
    return InvalidArgument(path + ".checkpointInterval: required when checkpoint is fixed", f->loc());
  }
  return Status::Ok();
}

template <class T, class Fn>
Status ReadList(const Fields& f, const char* key, std::vector<T>* out, Fn read) {
  std::vector<YAML::Node> items;
  UNIPOOL_RETURN_IF_ERROR(f.Sequence(key, &items));
  for (size_t i = 0; i < items.size(); ++i) {
    out->emplace_back();
    UNIPOOL_RETURN_IF_ERROR(read(items[i], f.PathOf(key) + "[" + std::to_string(i) + "]", &out->back()));
  }
  return Status::Ok();
}

Status ReadSpec(const YAML::Node& node, const std::string& file, const std::string& cluster_override,
                SimFile* out) {
  Result<Fields> f =
      Fields::Of(node, "spec",
                 {"cluster", "seed", "horizon", "sampleInterval", "cycleInterval", "workload",
                  "queues", "failures", "stragglers", "maintenance", "policies"});
  if (!f.ok()) return f.status();
  std::string cluster;
  UNIPOOL_RETURN_IF_ERROR(f->String("cluster", &cluster, cluster_override.empty()));
  out->cluster_path = cluster_override.empty() ? Resolve(file, cluster) : cluster_override;
  Result<Topology> topo = LoadTopology(out->cluster_path);
  if (!topo.ok()) {
    if (cluster_override.empty()) {
      return InvalidArgument("spec.cluster: " + topo.status().message(), LocOf(f->Get("cluster")));
    }
    return InvalidArgument(topo.status().message());
  }
  out->topology = std::make_unique<Topology>(std::move(topo).value());
  int64_t seed = 1;
  UNIPOOL_RETURN_IF_ERROR(f->Int("seed", &seed, 0, INT64_MAX));
  out->seed = static_cast<uint64_t>(seed);
  UNIPOOL_RETURN_IF_ERROR(f->Dur("horizon", &out->config.horizon));
  UNIPOOL_RETURN_IF_ERROR(f->Dur("sampleInterval", &out->config.sample_interval));
  if (out->config.sample_interval.value() <= 0) {
    return Expected(f->Get("sampleInterval"), "spec.sampleInterval", "a duration > 0");
  }
  UNIPOOL_RETURN_IF_ERROR(f->Dur("cycleInterval", &out->config.cycle_interval));
  std::vector<sched::QueueSpec> queues;
  UNIPOOL_RETURN_IF_ERROR(ReadList(*f, "queues", &queues, ReadQueue));
  for (const auto& q : queues) out->config.queues.push_back(sim::QueueConfig{q});
  // The workload may instead come from the command line (--trace).
  const bool synthetic = f->Has("workload") && !f->Get("workload")["trace"].IsDefined();
  if (out->config.queues.empty() && synthetic) {
    sim::QueueConfig q;
    q.spec.name = "default";
    out->config.queues.push_back(q);
  }
  if (f->Has("workload")) UNIPOOL_RETURN_IF_ERROR(ReadWorkload(f->Get("workload"), file, out));
  const Topology& t = *out->topology;
  UNIPOOL_RETURN_IF_ERROR(ReadList(*f, "failures", &out->config.failures,
                                   [&](const YAML::Node& n, const std::string& p, sim::FailureProcess* fp) {
                                     return ReadFailure(n, p, t, fp);
                                   }));
  UNIPOOL_RETURN_IF_ERROR(ReadList(*f, "stragglers", &out->config.stragglers, ReadStraggler));
  UNIPOOL_RETURN_IF_ERROR(ReadList(*f, "maintenance", &out->config.maintenance,
                                   [&](const YAML::Node& n, const std::string& p, sim::Maintenance* m) {
                                     return ReadMaintenance(n, p, t, m);
                                   }));
  UNIPOOL_RETURN_IF_ERROR(ReadList(*f, "policies", &out->policies, ReadPolicy));
  if (out->policies.empty()) out->policies.push_back(*PolicyPreset("default"));
  return Status::Ok();
}

}  // namespace

std::vector<std::string> PolicyPresetNames() {
  return {"default",  "fifo",          "no-preemption", "first-fit", "young-daly",
          "fixed-1h", "no-checkpoint", "sjf",           "las"};
}

Result<sim::PolicyConfig> PolicyPreset(const std::string& name) {
  sim::PolicyConfig p;
  p.name = name;
  if (name == "default") return p;
  if (name == "fifo") {
    p.scheduler.backfill = false;
    p.scheduler.preemption = false;
  } else if (name == "no-preemption") {
    p.scheduler.preemption = false;
  } else if (name == "first-fit") {
    p.scheduler.placer = sched::PlacerKind::kFirstFit;
  } else if (name == "young-daly") {
    p.override_checkpoint = true;
    p.checkpoint = sim::CheckpointMode::kYoungDaly;
  } else if (name == "fixed-1h") {
    p.override_checkpoint = true;
    p.checkpoint = sim::CheckpointMode::kFixed;
    p.checkpoint_interval = Seconds(3600);
  } else if (name == "no-checkpoint") {
    p.override_checkpoint = true;
    p.checkpoint = sim::CheckpointMode::kNone;
  } else if (name == "sjf" || name == "las") {
    p.override_queue_order = true;
    sched::ParseQueueOrder(name, &p.queue_order);
  } else {
    std::string names;
    for (const std::string& n : PolicyPresetNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("no policy named " + Quote(name) + " (presets: " + names + ")");
  }
  return p;
}

std::vector<sim::QueueConfig> QueuesForTrace(const Trace& trace) {
  std::vector<sim::QueueConfig> queues;
  for (const std::string& name : trace.queues) {
    sim::QueueConfig q;
    q.spec.name = name;
    queues.push_back(q);
  }
  if (queues.empty()) queues.push_back(sim::QueueConfig{sched::QueueSpec{"default"}});
  return queues;
}

Result<SimFile> ReadSimFile(const std::string& path, const std::string& cluster_override) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseSimFile(*text, path, cluster_override);
}

Result<SimFile> ParseSimFile(std::string_view text, const std::string& path,
                             const std::string& cluster_override) {
  SimFile out;
  try {
    Result<YAML::Node> doc = LoadDocument(text, "Simulation");
    if (!doc.ok()) return InvalidArgument(WithFile(path, doc.status()));
    Result<Fields> f = Fields::Of(*doc, "simulation file", {"apiVersion", "kind", "metadata", "spec"});
    Status st = f.ok() ? Status::Ok() : f.status();
    std::string api, kind;
    if (st.ok()) st = f->String("apiVersion", &api, true);
    if (st.ok() && api != "unipool/v1") st = Expected(f->Get("apiVersion"), "apiVersion", "unipool/v1");
    if (st.ok()) st = f->String("kind", &kind, true);
    if (st.ok() && kind != "Simulation") st = Expected(f->Get("kind"), "kind", "Simulation");
    if (st.ok() && f->Has("metadata")) {
      Result<Fields> meta = Fields::Of(f->Get("metadata"), "metadata", {"name", "description"});
      st = meta.ok() ? meta->String("name", &out.name) : meta.status();
    }
    if (st.ok() && !f->Has("spec")) st = InvalidArgument("spec: required field is missing", f->loc());
    if (st.ok()) st = ReadSpec(f->Get("spec"), path, cluster_override, &out);
    if (!st.ok()) {
      // Cluster-file errors already name their own file.
      if (!st.loc().known()) return InvalidArgument(st.message());
      return InvalidArgument(WithFile(path, st));
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": cannot read: " + OneLine(e.msg));
  }
  return out;
}

}  // namespace unipool::io
