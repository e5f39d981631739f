#include "io/summary_writer.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/table.h"
#include "io/text.h"

namespace unipool::io {

std::string Thousands(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// `v` rounded to 6 decimals, so that JSON shows 259200 and not
// 259200.00000000003 (the sums of products of unit conversions).

static std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string HumanBandwidth(Bandwidth b) {
  const double gbps = ToGbps(b);
  if (gbps >= 1e6) return Fixed(gbps / 1e6, 2) + " Pb/s";
  if (gbps >= 1e3) return Fixed(gbps / 1e3, 2) + " Tb/s";
  return Fixed(gbps, gbps < 10 ? 2 : 0) + " Gb/s";
}

std::string HumanFlops(FlopRate f) {
  const double tflops = ToTflops(f);
  if (tflops >= 1e6) return Fixed(tflops / 1e6, 2) + " EFLOP/s";
  if (tflops >= 1e3) return Fixed(tflops / 1e3, 1) + " PFLOP/s";
  return Fixed(tflops, 1) + " TFLOP/s";
}

std::string HumanBytes(Bytes b) {
  const double v = static_cast<double>(b.value());
  if (v >= 1e15) return Fixed(v / 1e15, 1) + " PB";
  if (v >= 1e12) return Fixed(v / 1e12, 1) + " TB";
  return Fixed(v / 1e9, 1) + " GB";
}

std::string HumanPower(Watts w) {
  const double v = static_cast<double>(w.value());
  if (v >= 1e6) return Fixed(v / 1e6, 2) + " MW";
  if (v >= 1e3) return Fixed(v / 1e3, 1) + " kW";
  return Fixed(v, 0) + " W";
}

static std::string Ratio(int64_t milli) {
  return Fixed(milli / 1000.0, milli % 1000 == 0 ? 0 : 2) + ":1";
}

static std::string GroupSize(const TierSummary& t) {
  if (t.min_group_gpus == t.max_group_gpus) return Thousands(t.max_group_gpus.value());
  return Thousands(t.min_group_gpus.value()) + "-" + Thousands(t.max_group_gpus.value());
}

std::string SummaryText(const ClusterSummary& s) {
  std::ostringstream out;
  out << "cluster " << s.name << ": " << Thousands(s.gpus.value()) << " GPUs on "
      << Thousands(s.nodes) << " nodes, " << s.partitions.size() << " partition"
      << (s.partitions.size() == 1 ? "" : "s") << "\n";
  out << "peak " << HumanFlops(s.peak_bf16) << " BF16";
  if (s.peak_fp8.value() > 0) out << ", " << HumanFlops(s.peak_fp8) << " FP8";
  out << "; HBM " << HumanBytes(s.hbm) << "; GPU power " << HumanPower(s.power) << "\n\n";

  Table tiers({"TIER", "GROUPS", "SWITCHES", "GPUS/GROUP", "BW/GPU", "OVERSUB", "LATENCY",
               "EFFECTIVE/GPU", "BISECTION"});
  for (const TierSummary& t : s.tiers) {
    tiers.Add({t.name, Thousands(t.groups), Thousands(t.switches), GroupSize(t),
               HumanBandwidth(t.bandwidth_per_gpu), Ratio(t.oversubscription_milli),
               Fixed(t.latency.value() / 1000.0, 1) + " us", HumanBandwidth(t.effective_per_gpu),
               HumanBandwidth(t.bisection)});
  }
  out << tiers.Render() << "\n";

  Table models({"GPU MODEL", "GPUS", "PEAK BF16", "PEAK FP8", "HBM", "POWER"});
  for (const ModelSummary& m : s.models) {
    models.Add({m.name, Thousands(m.gpus.value()), HumanFlops(m.peak_bf16),
                m.peak_fp8.value() > 0 ? HumanFlops(m.peak_fp8) : "-", HumanBytes(m.hbm),
                HumanPower(m.power)});
  }
  out << models.Render() << "\n";

  Table parts({"PARTITION", "NODES", "GPUS"});
  for (const PartitionSummary& p : s.partitions) {
    parts.Add({p.name, Thousands(p.nodes), Thousands(p.gpus.value())});
  }
  out << parts.Render();

  std::string states;
  for (int st = 1; st < static_cast<int>(s.nodes_by_state.size()); ++st) {
    if (s.nodes_by_state[st] == 0) continue;
    states += (states.empty() ? "" : ", ") + Thousands(s.nodes_by_state[st]) + " " +
              NodeStateName(static_cast<NodeState>(st));
  }
  out << "\nnodes: " << Thousands(s.nodes_by_state[0]) << " up"
      << (states.empty() ? "" : ", " + states) << "\n";
  return out.str();
}

std::string SummaryJson(const ClusterSummary& s) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["name"] = s.name;
  j["gpus"] = s.gpus.value();
  j["nodes"] = s.nodes;
  j["peakBf16Tflops"] = Tidy(ToTflops(s.peak_bf16));
  j["peakFp8Tflops"] = Tidy(ToTflops(s.peak_fp8));
  j["hbmBytes"] = s.hbm.value();
  j["powerWatts"] = s.power.value();
  j["tiers"] = ordered_json::array();
  for (const TierSummary& t : s.tiers) {
    j["tiers"].push_back({{"name", t.name},
                          {"groups", t.groups},
                          {"switches", t.switches},
                          {"minGroupGpus", t.min_group_gpus.value()},
                          {"maxGroupGpus", t.max_group_gpus.value()},
                          {"bandwidthGbps", Tidy(ToGbps(t.bandwidth_per_gpu))},
                          {"oversubscription", Tidy(t.oversubscription_milli / 1000.0)},
                          {"latencyUs", Tidy(t.latency.value() / 1000.0)},
                          {"effectiveGbpsPerGpu", Tidy(ToGbps(t.effective_per_gpu))},
                          {"bisectionGbps", Tidy(ToGbps(t.bisection))}});
  }
  j["gpuModels"] = ordered_json::array();
  for (const ModelSummary& m : s.models) {
    j["gpuModels"].push_back({{"name", m.name},
                              {"gpus", m.gpus.value()},
                              {"peakBf16Tflops", Tidy(ToTflops(m.peak_bf16))},
                              {"peakFp8Tflops", Tidy(ToTflops(m.peak_fp8))},
                              {"hbmBytes", m.hbm.value()},
                              {"powerWatts", m.power.value()}});
  }
  j["partitions"] = ordered_json::array();
  for (const PartitionSummary& p : s.partitions) {
    j["partitions"].push_back({{"name", p.name}, {"nodes", p.nodes}, {"gpus", p.gpus.value()}});
  }
  ordered_json states = ordered_json::object();
  for (int st = 0; st < static_cast<int>(s.nodes_by_state.size()); ++st) {
    states[NodeStateName(static_cast<NodeState>(st))] = s.nodes_by_state[st];
  }
  j["nodesByState"] = states;
  return j.dump(2) + "\n";
}

}  // namespace unipool::io
