#include "core/perf/sizing.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace unipool::perf {

FailureOverhead ExpectedWallTime(double work_s, int64_t nodes, double params,
                                 const FailureModel& f) {
  FailureOverhead o;
  const double rate = std::max(1e-12, nodes * f.node_failures_per_hour / 3600.0);
  o.mtbf_s = 1.0 / rate;
  o.checkpoint_bytes = params * (kWeightBytes + kOptimizerBytes);
  const double bw = std::min(f.storage_bytes_per_s, nodes * f.write_bytes_per_s_per_node);
  o.checkpoint_write_s = o.checkpoint_bytes / std::max(1.0, bw);
  o.interval_s = std::sqrt(2 * o.checkpoint_write_s * o.mtbf_s);
  const double lost = f.restart_s + (o.interval_s + o.checkpoint_write_s) / 2;
  const double useful = 1 - lost / o.mtbf_s;
  if (useful <= 0) {
    o.finishes = false;
    o.wall_s = std::numeric_limits<double>::infinity();
    o.expected_failures = std::numeric_limits<double>::infinity();
    return o;
  }
  o.wall_s = work_s * (1 + o.checkpoint_write_s / o.interval_s) / useful;
  o.expected_failures = o.wall_s / o.mtbf_s;
  return o;
}

namespace {

std::vector<int64_t> Candidates(int64_t unit, int64_t max) {
  std::vector<int64_t> v;
  for (int64_t n = unit; n <= max; n *= 2) {
    v.push_back(n);
    if (n % 2 == 0 && n / 2 * 3 <= max && n > unit) v.push_back(n / 2 * 3);
  }
  if (v.empty() || v.back() != max) v.push_back(max);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool Meets(const SizingTarget& t, const SizingOption& o) {
  if (!o.failures.finishes) return false;
  if (t.tokens_per_s > 0) return o.effective_tokens_per_s >= t.tokens_per_s;
  return o.failures.wall_s <= t.deadline_s;
}

}  // namespace

Result<SizingResult> Size(const Job& job, const Topology& cluster, const SizingTarget& target,
                          const FailureModel& failures, const SearchOptions& options) {
  if (target.tokens_per_s <= 0 && (target.tokens <= 0 || target.deadline_s <= 0)) {
    return InvalidArgument("sizing: give tokens and a deadline, or a tokens/s goal");
  }
  Result<HardwareView> whole = ViewOf(cluster, cluster.num_gpus().value());
  if (!whole.ok()) return whole.status();
  const int64_t unit = whole->scale_up_gpus();
  const double params = CountParams(job.model).total;
  SearchOptions quick = options;
  quick.top_k = 1;
  quick.explain = false;
  SizingResult r;
  bool have_chosen = false;
  for (int64_t n : Candidates(unit, cluster.num_gpus().value())) {
    Result<HardwareView> hw = ViewOf(cluster, n);
    if (!hw.ok()) continue;
    Result<PlanSearch> s = Search(job, *hw, quick);
    if (!s.ok()) continue;
    SizingOption o;
    o.gpus = n;
    o.best = s->top.front();
    const double tps = o.best.estimate.tokens_per_s;
    const double work_s = target.tokens > 0 ? target.tokens / tps : 86400.0;
    const int64_t nodes = (n + hw->gpus_per_node - 1) / hw->gpus_per_node;
    o.failures = ExpectedWallTime(work_s, nodes, params, failures);
    o.effective_tokens_per_s = o.failures.finishes ? tps * work_s / o.failures.wall_s : 0;
    o.meets_target = Meets(target, o);
    r.tried.push_back(o);
    if (o.meets_target) {
      r.chosen = o;
      have_chosen = true;
      break;
    }
  }
  if (r.tried.empty()) {
    return ResourceExhausted("sizing: no GPU count up to " +
                             std::to_string(cluster.num_gpus().value()) + " has a plan that fits");
  }
  if (!have_chosen) {  // the fastest, flagged as missing the target
    r.chosen = *std::max_element(r.tried.begin(), r.tried.end(),
                                 [](const SizingOption& a, const SizingOption& b) {
                                   return a.effective_tokens_per_s < b.effective_tokens_per_s;
                                 });
  }
  Result<HardwareView> hw = ViewOf(cluster, r.chosen.gpus);
  if (!hw.ok()) return hw.status();
  Result<PlanSearch> full = Search(job, *hw, options);
  if (!full.ok()) return full.status();
  r.search = std::move(*full);
  return r;
}

}  // namespace unipool::perf
