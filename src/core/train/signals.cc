#include "core/train/signals.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace unipool::train {

const char* FindingName(FindingKind k) {
  switch (k) {
    case FindingKind::kStraggler:
      return "Straggler";
    case FindingKind::kDataStraggler:
      return "DataStraggler";
    case FindingKind::kNonFiniteLoss:
      return "NonFiniteLoss";
    case FindingKind::kGradientSpike:
      return "GradientSpike";
    case FindingKind::kMemoryGrowth:
      return "MemoryGrowth";
  }
  return "?";
}

std::string Finding::Describe() const {
  char buf[256];
  switch (kind) {
    case FindingKind::kStraggler:
    case FindingKind::kDataStraggler:
      std::snprintf(buf, sizeof buf,
                    "rank %d on %s is %.1fx slower than the median rank for %lld steps, to step "
                    "%lld (%.3f s busy per step vs %.3f s; data loading %.0f%% of it)",
                    rank, node.c_str(), factor, static_cast<long long>(steps),
                    static_cast<long long>(step), busy.value() / 1e9, median.value() / 1e9,
                    100 * data_share);
      return buf;
    case FindingKind::kNonFiniteLoss:
      std::snprintf(buf, sizeof buf, "loss is %s at step %lld", std::isnan(value) ? "NaN" : "Inf",
                    static_cast<long long>(step));
      return buf;
    case FindingKind::kGradientSpike:
      std::snprintf(buf, sizeof buf,
                    "gradient norm %.3g at step %lld is %.0fx the median of the last steps (%.3g)",
                    value, static_cast<long long>(step), baseline > 0 ? value / baseline : 0.0,
                    baseline);
      return buf;
    case FindingKind::kMemoryGrowth: {
      const double mib = 1 << 20;
      const double grown = static_cast<double>((rss - rss_baseline).value());
      std::snprintf(buf, sizeof buf,
                    "rank %d on %s: resident memory grew from %.0f MiB at step %lld to %.0f MiB "
                    "at step %lld (+%.0f%%, %.1f MiB per step)",
                    rank, node.c_str(), rss_baseline.value() / mib,
                    static_cast<long long>(step - steps), rss.value() / mib,
                    static_cast<long long>(step),
                    rss_baseline.value() > 0 ? 100 * grown / rss_baseline.value() : 0.0,
                    steps > 0 ? grown / mib / static_cast<double>(steps) : 0.0);
      return buf;
    }
  }
  return "";
}

SignalWindow::SignalWindow(SignalOptions options) : options_(options) {}

Duration SignalWindow::MedianBusyExcept(int32_t rank) const {
  std::vector<int64_t> busy;
  for (const auto& [r, s] : ranks_) {
    if (r != rank) busy.push_back(s.busy.value());
  }
  if (busy.empty()) return Duration(0);
  const size_t mid = busy.size() / 2;
  std::nth_element(busy.begin(), busy.begin() + mid, busy.end());
  int64_t m = busy[mid];
  if (busy.size() % 2 == 0) {  // the lower middle too: the mean of the two
    const int64_t lower = *std::max_element(busy.begin(), busy.begin() + mid);
    m = lower + (m - lower) / 2;
  }
  return Duration(m);
}

// Phases: record the rank, compare it with the others; a rank over the
// bound counts steps until it is reported, and starts over once under it.
std::vector<Finding> SignalWindow::AddRank(const RankSample& s) {
  RankState& r = ranks_[s.rank];
  r.node = s.node;
  r.step = s.step;
  r.busy = std::max(Duration(0), s.step_time - s.comm_time);
  r.data = std::min(s.data_time, r.busy);
  r.step_time = s.step_time;
  r.comm = std::min(s.comm_time, s.step_time);
  const Duration median = MedianBusyExcept(s.rank);
  const bool slow = median.value() > 0 && r.busy - median > options_.straggler_min_excess &&
                    static_cast<double>(r.busy.value()) >
                        options_.straggler_factor * static_cast<double>(median.value());
  if (!slow) {
    r.slow_steps = 0;
    r.slow_samples = 0;
    r.reported = false;
    return {};
  }
  r.slow_steps += std::max(1, s.steps);
  r.slow_samples++;
  if (r.reported || r.slow_steps < options_.straggler_steps ||
      r.slow_samples < options_.straggler_samples) {
    return {};
  }
  r.reported = true;
  Finding f;
  f.step = s.step;
  f.rank = s.rank;
  f.node = s.node;
  f.busy = r.busy;
  f.median = median;
  f.factor = static_cast<double>(r.busy.value()) / static_cast<double>(median.value());
  f.data_share = r.busy.value() > 0 ? static_cast<double>(r.data.value()) / r.busy.value() : 0;
  f.steps = r.slow_steps;
  f.kind =
      f.data_share > options_.data_share ? FindingKind::kDataStraggler : FindingKind::kStraggler;
  return {f};
}

std::vector<Finding> SignalWindow::AddLoss(int64_t step, double loss,
                                           std::optional<double> grad_norm) {
  std::vector<Finding> out;
  if (!std::isfinite(loss)) {
    if (!loss_reported_) {
      Finding f;
      f.kind = FindingKind::kNonFiniteLoss;
      f.step = step;
      f.value = loss;
      out.push_back(f);
    }
    loss_reported_ = true;
  } else {
    loss_reported_ = false;
  }
  if (!grad_norm) return out;
  const double g = *grad_norm;
  if (!std::isfinite(g)) return out;  // the loss says so, or the next one will
  if (static_cast<int32_t>(norms_.size()) >= std::max(2, options_.spike_window / 2)) {
    std::vector<double> sorted(norms_.begin(), norms_.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const double median = sorted[sorted.size() / 2];
    const bool spike = median > 0 && g > options_.spike_factor * median;
    if (spike && !spike_reported_) {
      Finding f;
      f.kind = FindingKind::kGradientSpike;
      f.step = step;
      f.value = g;
      f.baseline = median;
      out.push_back(f);
    }
    spike_reported_ = spike;
    if (spike) return out;  // a spike does not become the baseline
  }
  norms_.push_back(g);
  while (static_cast<int32_t>(norms_.size()) > options_.spike_window) norms_.pop_front();
  return out;
}

// Phases: the first sample starts the warm-up; the first one past it sets
// the baseline; later ones compare with it. A rank reported once is again
// when it has gone back under the bound and over it again.
std::vector<Finding> SignalWindow::AddMemory(int32_t rank, const std::string& node, int64_t step,
                                             Bytes rss) {
  RankState& r = ranks_[rank];
  r.node = node;
  r.rss = rss;
  if (r.rss_first_step < 0) r.rss_first_step = step;
  if (r.rss_baseline_step < 0) {
    if (step >= r.rss_first_step + options_.memory_warmup_steps) {
      r.rss_baseline = rss;
      r.rss_baseline_step = step;
    }
    return {};
  }
  const int64_t bound =
      std::max(options_.memory_growth_min.value(),
               static_cast<int64_t>(options_.memory_growth_share * r.rss_baseline.value()));
  const bool grown = (rss - r.rss_baseline).value() > bound;
  if (!grown || r.rss_reported) {
    r.rss_reported = grown;
    return {};
  }
  r.rss_reported = true;
  Finding f;
  f.kind = FindingKind::kMemoryGrowth;
  f.step = step;
  f.rank = rank;
  f.node = node;
  f.rss = rss;
  f.rss_baseline = r.rss_baseline;
  f.steps = step - r.rss_baseline_step;
  return {f};
}

}  // namespace unipool::train
