#include "io/cluster_reader.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

constexpr double kMaxGbps = 1e6;       // 1 Pb/s per GPU is beyond any link
constexpr double kMaxLatencyUs = 1e6;  // one second

Status ReadTier(const YAML::Node& node, int index, TierSpec* out) {
  const std::string path = "spec.tiers[" + std::to_string(index) + "]";
  Result<Fields> f = Fields::Of(
      node, path,
      {"name", "bandwidthGbps", "latencyUs", "oversubscription", "fanout", "switchesPerGroup"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &out->name, true));
  double gbps = 0, latency_us = 0, oversub = 1;
  UNIPOOL_RETURN_IF_ERROR(f->Double("bandwidthGbps", &gbps, 1e-3, kMaxGbps, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("latencyUs", &latency_us, 0, kMaxLatencyUs));
  // Oversubscription: a number (7) or a ratio ("7:1").
  const YAML::Node o = f->Get("oversubscription");
  if (o.IsDefined()) {
    double down = 0, up = 0;
    const std::string s = o.IsScalar() ? o.Scalar() : "";
    const size_t colon = s.find(':');
    const bool ok = colon == std::string::npos ? ParseDouble(s, &oversub)
                                               : ParseDouble(s.substr(0, colon), &down) &&
                                                     ParseDouble(s.substr(colon + 1), &up) &&
                                                     up > 0 && (oversub = down / up, true);
    if (!ok || oversub < 1 || oversub > 1000) {
      return Expected(o, f->PathOf("oversubscription"), "a ratio of at least 1, like 3 or '3:1'");
    }
  }
  UNIPOOL_RETURN_IF_ERROR(f->Int32("fanout", &out->fanout, 1, 1 << 24));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("switchesPerGroup", &out->switches_per_group, 1, 1 << 20));
  out->bandwidth_per_gpu = Bandwidth(std::llround(gbps * 1e9));
  out->latency = Nanoseconds(std::llround(latency_us * 1e3));
  out->oversubscription_milli = std::llround(oversub * 1000);
  return Status::Ok();
}

Status ReadGpuModel(const YAML::Node& node, int index, GpuModel* out) {
  const std::string path = "spec.gpuModels[" + std::to_string(index) + "]";
  Result<Fields> f = Fields::Of(node, path,
                                {"name", "bf16Tflops", "fp8Tflops", "hbmGB", "hbmGBps", "watts",
                                 "idleWatts", "trainWatts", "hostWatts", "powerLimitWatts"});
  if (!f.ok()) return f.status();
  double bf16 = 0, fp8 = 0, hbm_gb = 0, hbm_gbps = 0, watts = 0, idle = 0, train = 0, host = 0,
         limit = 0;
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &out->name, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("bf16Tflops", &bf16, 0.001, 1e6, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("fp8Tflops", &fp8, 0, 1e6));
  UNIPOOL_RETURN_IF_ERROR(f->Double("hbmGB", &hbm_gb, 0.001, 1e6, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("hbmGBps", &hbm_gbps, 0, 1e6));
  UNIPOOL_RETURN_IF_ERROR(f->Double("watts", &watts, 0, 1e6, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("idleWatts", &idle, 0, watts));
  UNIPOOL_RETURN_IF_ERROR(f->Double("trainWatts", &train, idle, watts));
  UNIPOOL_RETURN_IF_ERROR(f->Double("hostWatts", &host, 0, 1e6));
  UNIPOOL_RETURN_IF_ERROR(f->Double("powerLimitWatts", &limit, 0, watts));
  out->peak_bf16 = Tflops(bf16);
  out->peak_fp8 = Tflops(fp8);
  out->hbm = Bytes(std::llround(hbm_gb * 1e9));
  out->hbm_bandwidth = Bandwidth(std::llround(hbm_gbps * 8e9));
  out->power = Watts(std::llround(watts));
  out->idle_power = Watts(std::llround(idle));
  out->train_power = Watts(std::llround(train));
  out->host_power = Watts(std::llround(host));
  out->power_limit = Watts(std::llround(limit));
  return Status::Ok();
}

Status ReadGenerator(const YAML::Node& node, GeneratorSpec* out) {
  Result<Fields> f = Fields::Of(
      node, "spec.generator",
      {"kind", "gpus", "gpusPerNode", "gpuModel", "nodePrefix", "partitionTier", "labels"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  std::string kind = "fatTree";
  UNIPOOL_RETURN_IF_ERROR(f->String("kind", &kind));
  if (kind == "fatTree" || kind == "clos") {
    out->kind = GeneratorKind::kFatTree;
  } else if (kind == "railOptimized") {
    out->kind = GeneratorKind::kRailOptimized;
  } else {
    return Expected(f->Get("kind"), f->PathOf("kind"), "fatTree, clos or railOptimized");
  }
  UNIPOOL_RETURN_IF_ERROR(f->Int("gpus", &out->gpus, 1, int64_t{1} << 24, true));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("gpusPerNode", &out->gpus_per_node, 1, kMaxGpusPerNode));
  UNIPOOL_RETURN_IF_ERROR(f->String("gpuModel", &out->gpu_model, true));
  UNIPOOL_RETURN_IF_ERROR(f->String("nodePrefix", &out->node_prefix));
  UNIPOOL_RETURN_IF_ERROR(f->String("partitionTier", &out->partition_tier));
  return f->StringMap("labels", &out->labels);
}

Status ReadNode(const YAML::Node& node, int index, const std::vector<TierSpec>& tiers,
                NodeSpec* out) {
  const std::string path = "spec.nodes[" + std::to_string(index) + "]";
  Result<Fields> f = Fields::Of(
      node, path, {"name", "gpus", "gpuModel", "partition", "labels", "state", "switches"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &out->name, true));
  UNIPOOL_RETURN_IF_ERROR(f->Int32("gpus", &out->gpus, 1, kMaxGpusPerNode, true));
  UNIPOOL_RETURN_IF_ERROR(f->String("gpuModel", &out->gpu_model, true));
  UNIPOOL_RETURN_IF_ERROR(f->String("partition", &out->partition));
  UNIPOOL_RETURN_IF_ERROR(f->StringMap("labels", &out->labels));
  std::string state = "up";
  UNIPOOL_RETURN_IF_ERROR(f->String("state", &state));
  std::optional<NodeState> st = ParseNodeState(state);
  if (!st) {
    return Expected(f->Get("state"), f->PathOf("state"), "up, cordoned, drained, flaky or down");
  }
  out->state = *st;
  // switches: {tierName: groupName, ...}
  Labels switches;
  UNIPOOL_RETURN_IF_ERROR(f->StringMap("switches", &switches));
  out->groups.assign(tiers.size(), "");
  for (const auto& [tier, group] : switches) {
    const std::string& name = tier;  // clang 14 cannot capture a structured binding
    auto it =
        std::find_if(tiers.begin(), tiers.end(), [&](const TierSpec& t) { return t.name == name; });
    if (it == tiers.end()) {
      return InvalidArgument(f->PathOf("switches") + ": no tier named " + Quote(tier),
                             LocOf(f->Get("switches")));
    }
    out->groups[it - tiers.begin()] = group;
  }
  return Status::Ok();
}

// One cap: {tier, group?, kw | mw}.
Status ReadPowerCap(const YAML::Node& node, int index, PowerCapSpec* out) {
  const std::string path = "spec.power.caps[" + std::to_string(index) + "]";
  Result<Fields> f = Fields::Of(node, path, {"tier", "group", "kw", "mw"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  UNIPOOL_RETURN_IF_ERROR(f->String("tier", &out->tier, true));
  UNIPOOL_RETURN_IF_ERROR(f->String("group", &out->group));
  if (f->Has("kw") == f->Has("mw")) {
    return InvalidArgument(path + ": give exactly one of 'kw' or 'mw'", f->loc());
  }
  double kw = 0, mw = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Double("kw", &kw, 0.001, 1e9));
  UNIPOOL_RETURN_IF_ERROR(f->Double("mw", &mw, 1e-6, 1e6));
  out->cap = Watts(std::llround(f->Has("kw") ? kw * 1e3 : mw * 1e6));
  return Status::Ok();
}

// power: {pue, caps: [...]}
Status ReadPower(const YAML::Node& node, PowerSpec* out) {
  Result<Fields> f = Fields::Of(node, "spec.power", {"pue", "caps"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  UNIPOOL_RETURN_IF_ERROR(f->Double("pue", &out->pue, 1, 10));
  std::vector<YAML::Node> items;
  UNIPOOL_RETURN_IF_ERROR(f->Sequence("caps", &items));
  if (items.size() > 4096) return Expected(f->Get("caps"), "spec.power.caps", "at most 4096 caps");
  out->caps.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    UNIPOOL_RETURN_IF_ERROR(ReadPowerCap(items[i], static_cast<int>(i), &out->caps[i]));
  }
  return Status::Ok();
}

// One storage system: {name, writeGBps, readGBps?, clientGBps, localGBps?,
// partition?}.
Status ReadStorage(const YAML::Node& node, int index, StorageSpec* out) {
  const std::string path = "spec.storage[" + std::to_string(index) + "]";
  Result<Fields> f = Fields::Of(
      node, path, {"name", "writeGBps", "readGBps", "clientGBps", "localGBps", "partition"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  UNIPOOL_RETURN_IF_ERROR(f->String("name", &out->name, true));
  double write = 0, read = 0, client = 0, local = 0;
  UNIPOOL_RETURN_IF_ERROR(f->Double("writeGBps", &write, 1e-3, 1e7, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("readGBps", &read, 1e-3, 1e7));
  UNIPOOL_RETURN_IF_ERROR(f->Double("clientGBps", &client, 1e-3, 1e5, true));
  UNIPOOL_RETURN_IF_ERROR(f->Double("localGBps", &local, 0, 1e5));
  UNIPOOL_RETURN_IF_ERROR(f->String("partition", &out->partition));
  out->write_bytes_per_s = write * 1e9;
  out->read_bytes_per_s = read * 1e9;
  out->client_bytes_per_s = client * 1e9;
  out->local_bytes_per_s = local * 1e9;
  return Status::Ok();
}

Status ReadSpec(const YAML::Node& node, ClusterSpec* out) {
  Result<Fields> f =
      Fields::Of(node, "spec", {"gpuModels", "tiers", "generator", "nodes", "power", "storage"});
  if (!f.ok()) return f.status();
  out->loc = f->loc();
  std::vector<YAML::Node> items;
  UNIPOOL_RETURN_IF_ERROR(f->Sequence("gpuModels", &items));
  for (size_t i = 0; i < items.size(); ++i) {
    out->gpu_models.emplace_back();
    UNIPOOL_RETURN_IF_ERROR(ReadGpuModel(items[i], static_cast<int>(i), &out->gpu_models.back()));
  }
  UNIPOOL_RETURN_IF_ERROR(f->Sequence("tiers", &items, true));
  if (items.size() > 8) return Expected(f->Get("tiers"), "spec.tiers", "at most 8 tiers");
  for (size_t i = 0; i < items.size(); ++i) {
    out->tiers.emplace_back();
    UNIPOOL_RETURN_IF_ERROR(ReadTier(items[i], static_cast<int>(i), &out->tiers.back()));
  }
  if (f->Has("power")) UNIPOOL_RETURN_IF_ERROR(ReadPower(f->Get("power"), &out->power));
  items.clear();  // Sequence leaves it as it was when the key is absent
  UNIPOOL_RETURN_IF_ERROR(f->Sequence("storage", &items));
  if (items.size() > 64) return Expected(f->Get("storage"), "spec.storage", "at most 64 systems");
  out->storage.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    UNIPOOL_RETURN_IF_ERROR(ReadStorage(items[i], static_cast<int>(i), &out->storage[i]));
  }
  if (f->Has("generator") == f->Has("nodes")) {
    return InvalidArgument("spec: give exactly one of 'generator' or 'nodes'", f->loc());
  }
  if (f->Has("generator")) {
    out->generator.emplace();
    return ReadGenerator(f->Get("generator"), &*out->generator);
  }
  UNIPOOL_RETURN_IF_ERROR(f->Sequence("nodes", &items, true));
  if (items.size() > (1u << 20))
    return Expected(f->Get("nodes"), "spec.nodes", "at most 2^20 nodes");
  out->nodes.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    UNIPOOL_RETURN_IF_ERROR(ReadNode(items[i], static_cast<int>(i), out->tiers, &out->nodes[i]));
  }
  return Status::Ok();
}

Status ReadDocument(const YAML::Node& doc, ClusterSpec* out) {
  Result<Fields> f = Fields::Of(doc, "cluster file", {"apiVersion", "kind", "metadata", "spec"});
  if (!f.ok()) return f.status();
  std::string api, kind;
  UNIPOOL_RETURN_IF_ERROR(f->String("apiVersion", &api, true));
  if (api != "unipool/v1") return Expected(f->Get("apiVersion"), "apiVersion", "unipool/v1");
  UNIPOOL_RETURN_IF_ERROR(f->String("kind", &kind, true));
  if (kind != "Cluster") return Expected(f->Get("kind"), "kind", "Cluster");
  if (!f->Has("metadata")) return InvalidArgument("metadata: required field is missing", f->loc());
  Result<Fields> meta =
      Fields::Of(f->Get("metadata"), "metadata", {"name", "description", "labels"});
  if (!meta.ok()) return meta.status();
  UNIPOOL_RETURN_IF_ERROR(meta->String("name", &out->name, true));
  if (!f->Has("spec")) return InvalidArgument("spec: required field is missing", f->loc());
  return ReadSpec(f->Get("spec"), out);
}

}  // namespace

Result<ClusterSpec> ParseClusterSpec(std::string_view text) {
  Result<YAML::Node> doc = LoadDocument(text, "Cluster");
  if (!doc.ok()) return doc.status();
  ClusterSpec spec;
  try {
    UNIPOOL_RETURN_IF_ERROR(ReadDocument(*doc, &spec));
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp may throw on odd nodes
    return InvalidArgument("cannot read: " + OneLine(e.msg), {e.mark.line + 1, e.mark.column + 1});
  }
  return spec;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return InvalidArgument(path + ": cannot read: " + std::strerror(errno));
  return ss.str();
}

std::string WithFile(const std::string& path, const Status& status) {
  return status.loc().known() ? path + ":" + status.ToString() : path + ": " + status.message();
}

Result<Topology> LoadTopology(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<ClusterSpec> spec = ParseClusterSpec(*text);
  if (!spec.ok()) return InvalidArgument(WithFile(path, spec.status()));
  Result<Topology> topo = Topology::Build(*spec);
  if (!topo.ok()) return InvalidArgument(WithFile(path, topo.status()));
  return topo;
}

}  // namespace unipool::io
