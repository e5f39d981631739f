#include "server/metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "io/proc_stat.h"

namespace unipool::server {
namespace {

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  // The shortest text that reads back as `v`: a timestamp keeps its
  // fraction of a second (a fixed 9 digits rounded one to tens of seconds).
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// Inserts le="bound" as the last label of `labels` (rendered).
std::string WithLe(const std::string& labels, const std::string& le) {
  std::string out = labels.empty() ? "{" : labels;
  if (!labels.empty()) out.back() = ',';  // "{a=\"1\"}" -> "{a=\"1\","
  out += "le=\"";
  out += le;
  out += "\"}";
  return out;
}

const char* TypeName(Metrics::Type t) {
  switch (t) {
    case Metrics::Type::kCounter:
      return "counter";
    case Metrics::Type::kGauge:
      return "gauge";
    case Metrics::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// /proc/self/stat's fields, f[i] being field i: 14 and 15 (utime, stime) in
// ticks, 22 start time in ticks after boot, 23 vsize in bytes, 24 rss in
// pages. Empty where it cannot be read.
std::vector<std::string> ProcSelfStat() {
  return io::ProcStatFields(io::ReadProcFile("/proc/self/stat"));
}

// The process's start from its ticks after boot and the uptime, never later
// than now: in some sandboxes the two clocks disagree, and a process that
// starts in the future would confuse every rate Prometheus computes from it.
double ProcessStartTime() {
  const double now = static_cast<double>(time(nullptr));
  const std::vector<std::string> f = ProcSelfStat();
  std::ifstream uptime_file("/proc/uptime");
  double uptime = 0;
  if (f.size() <= 22 || !(uptime_file >> uptime)) return now;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return std::min(now, now - uptime + std::atof(f[22].c_str()) / tick);
}

}  // namespace

std::string RenderLabels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"" + Escape(labels[i].second, true) + "\"";
  }
  return out + "}";
}

std::vector<double> Metrics::LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

std::vector<double> Metrics::JobBuckets() {
  return {1,     10,    30,     60,     300,    600,     1800,   3600,
          7200,  14400, 28800,  43200,  86400,  172800,  604800, 2592000};
}

void Metrics::Declare(const std::string& name, Type type, const std::string& help,
                      std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  assert(!families_.contains(name));
  Family& f = families_[name];
  f.type = type;
  f.help = help;
  f.buckets = std::move(buckets);
}

Metrics::Family& Metrics::Get(const std::string& name, Type type) {
  auto it = families_.find(name);
  assert(it != families_.end() && it->second.type == type);
  return it->second;
}

void Metrics::Add(const std::string& name, const Labels& labels, double delta) {
  const std::string key = RenderLabels(labels);
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  assert(it != families_.end() && it->second.type != Type::kHistogram);
  it->second.values[key] += delta;
}

void Metrics::Set(const std::string& name, const Labels& labels, double value) {
  const std::string key = RenderLabels(labels);
  std::lock_guard lock(mu_);
  Get(name, Type::kGauge).values[key] = value;
}

void Metrics::Observe(const std::string& name, const Labels& labels, double value) {
  const std::string key = RenderLabels(labels);
  std::lock_guard lock(mu_);
  Family& f = Get(name, Type::kHistogram);
  Histogram& h = f.histograms[key];
  if (h.counts.empty()) h.counts.resize(f.buckets.size(), 0);
  for (size_t i = 0; i < f.buckets.size(); ++i) {
    if (value <= f.buckets[i]) {
      h.counts[i]++;
      break;
    }
  }
  h.sum += value;
  h.count++;
}

void Metrics::Reset(const std::string& name) {
  std::lock_guard lock(mu_);
  Get(name, Type::kGauge).values.clear();
}

std::string Metrics::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + Escape(f.help, false) + "\n";
    out += "# TYPE " + name + " " + TypeName(f.type) + "\n";
    for (const auto& [labels, v] : f.values) out += name + labels + " " + Number(v) + "\n";
    for (const auto& [labels, h] : f.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += h.counts[i];
        out += name + "_bucket" + WithLe(labels, Number(f.buckets[i])) + " " +
               std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket" + WithLe(labels, "+Inf") + " " + std::to_string(h.count) + "\n";
      out += name + "_sum" + labels + " " + Number(h.sum) + "\n";
      out += name + "_count" + labels + " " + std::to_string(h.count) + "\n";
    }
  }
  return out;
}

void DeclareProcessMetrics(Metrics& m) {
  using T = Metrics::Type;
  m.Declare("process_cpu_seconds_total", T::kCounter, "User and system CPU time in seconds.");
  m.Declare("process_resident_memory_bytes", T::kGauge, "Resident memory in bytes.");
  m.Declare("process_virtual_memory_bytes", T::kGauge, "Virtual memory in bytes.");
  m.Declare("process_open_fds", T::kGauge, "Open file descriptors.");
  m.Declare("process_max_fds", T::kGauge, "The limit on open file descriptors.");
  m.Declare("process_start_time_seconds", T::kGauge,
            "Start time of the process since the Unix epoch in seconds.");
  m.Set("process_start_time_seconds", {}, ProcessStartTime());
}

const char* UnipoolVersion() { return UNIPOOL_VERSION; }

void DeclareBuildInfo(Metrics& m) {
  m.Declare("unipool_build_info", Metrics::Type::kGauge,
            "1, labelled with the version of unipool that runs and its compiler.");
  m.Set("unipool_build_info", {{"version", UnipoolVersion()}, {"compiler", __VERSION__}}, 1);
}

void UpdateProcessMetrics(Metrics& m) {
  const std::vector<std::string> f = ProcSelfStat();
  if (f.size() <= 24) return;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  m.Set("process_cpu_seconds_total", {},
        (std::atof(f[14].c_str()) + std::atof(f[15].c_str())) / tick);
  m.Set("process_virtual_memory_bytes", {}, std::atof(f[23].c_str()));
  m.Set("process_resident_memory_bytes", {},
        std::atof(f[24].c_str()) * static_cast<double>(sysconf(_SC_PAGESIZE)));
  int fds = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++fds;
    closedir(d);
    m.Set("process_open_fds", {}, fds - 3);  // ".", ".." and the directory's own
  }
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    m.Set("process_max_fds", {}, static_cast<double>(nofile.rlim_cur));
  }
}

}  // namespace unipool::server
