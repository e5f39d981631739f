// Metrics: a small Prometheus registry. Families are declared once with
// their type and help; samples are addressed by label values. Render()
// writes the text exposition format (version 0.0.4) that `promtool check
// metrics` accepts: HELP and TYPE lines, sorted families, escaped label
// values, histograms with cumulative `le` buckets, `_sum` and `_count`.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace unipool::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // REQUIRES: `name` matches [a-zA-Z_:][a-zA-Z0-9_:]*, declared once;
  // counters end in _total; `buckets` ascending (histograms only).
  void Declare(const std::string& name, Type type, const std::string& help,
               std::vector<double> buckets = {});

  void Add(const std::string& name, const Labels& labels, double delta = 1);
  void Set(const std::string& name, const Labels& labels, double value);
  void Observe(const std::string& name, const Labels& labels, double value);
  // Drops every sample of a gauge family (before it is filled again, so
  // that label sets that went away disappear).
  void Reset(const std::string& name);

  std::string Render() const;

  // Bucket bounds for latencies in seconds: 100 us to 10 s.
  static std::vector<double> LatencyBuckets();
  // Bucket bounds for the life of jobs in seconds: 1 s to 30 days.
  static std::vector<double> JobBuckets();

 private:
  struct Histogram {
    std::vector<uint64_t> counts;  // per bucket, not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, double> values;         // rendered labels -> value
    std::map<std::string, Histogram> histograms;  // rendered labels -> histogram
  };
  Family& Get(const std::string& name, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// {a="1",b="x\"y"}: label values escaped as the format asks; "" when empty.
std::string RenderLabels(const Labels& labels);

// The process_* families of Prometheus' client libraries, for this
// process: CPU seconds, resident and virtual memory, open and maximum file
// descriptors, start time (set by Declare, at most now). Declare once, at
// start-up; Update before each Render.
void DeclareProcessMetrics(Metrics& m);
void UpdateProcessMetrics(Metrics& m);

// unipool's version (the project's, from CMake), e.g. "0.1.0".
const char* UnipoolVersion();
// unipool_build_info{version,compiler}: 1, the way Prometheus' own
// build_info says what runs.
void DeclareBuildInfo(Metrics& m);

}  // namespace unipool::server
