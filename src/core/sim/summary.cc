#include "core/sim/summary.h"

#include <algorithm>
#include <map>

namespace unipool::sim {

Percentiles PercentilesOf(std::vector<double> v) {
  Percentiles p;
  p.count = static_cast<int64_t>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  p.p50 = QuantileOfSorted(v, 0.5);
  p.p90 = QuantileOfSorted(v, 0.9);
  p.p99 = QuantileOfSorted(v, 0.99);
  return p;
}

double QuantileOfSorted(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5)];
}

static const int64_t kBucketTop[] = {1, 8, 64, 512, 4096, 32768};
static const char* kBucketName[] = {"1", "2-8", "9-64", "65-512", "513-4K", "4K-32K", "32K+"};

static int BucketIndex(int64_t gpus) {
  int b = 0;
  while (b < 6 && gpus > kBucketTop[b]) ++b;
  return b;
}

std::string SizeBucket(int64_t gpus) { return kBucketName[BucketIndex(gpus)]; }

namespace {

// Accumulates one GroupRow.
struct Acc {
  GroupRow row;
  std::vector<double> jct, wait;
  double useful = 0, wall = 0, held_hours = 0;

  void Add(const JobRecord& j, Time end) {
    row.jobs++;
    row.failures += j.failures;
    row.preemptions += j.preemptions;
    row.lost_gpu_hours += static_cast<double>(j.lost_gpu_seconds) / 3600;
    held_hours += ToSeconds(j.held) / 3600;
    if (j.first_start.value() < 0) return;
    wait.push_back(ToSeconds(j.first_start - j.submit));
    const Time stop = j.end.value() >= 0 ? j.end : end;
    const double w = ToSeconds(stop - j.first_start);
    if (j.end.value() >= 0) {
      row.done++;
      jct.push_back(ToSeconds(j.end - j.submit));
    }
    if (w > 0) {
      const double g = static_cast<double>(j.gpus.value());
      useful += ToSeconds(j.committed) * g;
      wall += w * g;
    }
  }

  GroupRow Finish() {
    row.jct = PercentilesOf(std::move(jct));
    row.wait = PercentilesOf(std::move(wait));
    row.ettr = wall > 0 ? useful / wall : 0;
    row.mtti_hours = row.failures > 0 ? held_hours / static_cast<double>(row.failures) : 0;
    return row;
  }
};

// The compactness of the multi-node gangs at the lowest tier.
void SummarizeGangs(const SimOutput& out, Summary& s) {
  s.group_tier = out.gang_tier_name;
  const size_t t = static_cast<size_t>(out.gang_tier);
  if (out.gang_tier < 0) return;
  double used = 0, bound = 0;
  for (const JobRecord& j : out.jobs) {
    if (j.nodes < 2 || j.groups_used.size() <= t || j.groups_needed.size() <= t) continue;
    s.gangs++;
    used += j.groups_used[t];
    bound += j.groups_needed[t];
    s.gangs_on_fewest += j.groups_used[t] <= j.groups_needed[t];
  }
  if (s.gangs == 0) return;
  s.groups_per_gang = used / static_cast<double>(s.gangs);
  s.groups_per_gang_bound = bound / static_cast<double>(s.gangs);
}

void SummarizePower(const SimOutput& out, Summary& s) {
  s.it_energy_mwh = out.it_energy_joules / 3.6e9;
  s.pue = out.pue;
  s.facility_energy_mwh = s.it_energy_mwh * out.pue;
  const double seconds = ToSeconds(out.end);
  s.mean_it_mw = seconds > 0 ? out.it_energy_joules / seconds / 1e6 : 0;
  s.peak_it_mw = static_cast<double>(out.peak_it_watts) / 1e6;
  s.useful_gpu_hours_per_mwh =
      s.it_energy_mwh > 0 ? out.useful_gpu_seconds / 3600 / s.it_energy_mwh : 0;
  s.peak_gflops_per_watt =
      out.it_energy_joules > 0
          ? out.useful_gpu_seconds * out.peak_flops_per_gpu / 1e9 / out.it_energy_joules
          : 0;
  std::vector<double> kwh;
  for (const JobRecord& j : out.jobs) {
    if (j.end.value() >= 0) kwh.push_back(j.energy_joules / 3.6e6);
  }
  s.job_energy_kwh = PercentilesOf(std::move(kwh));
}

}  // namespace

Summary Summarize(const SimOutput& out, const SimConfig& config) {
  Summary s;
  s.policy = out.policy;
  s.days = ToSeconds(out.end) / 86400;
  s.gpus = out.cluster_gpus;
  const double total = static_cast<double>(out.cluster_gpus) * ToSeconds(out.end);
  s.utilization_allocated = total > 0 ? out.allocated_gpu_seconds / total : 0;
  s.utilization_useful = total > 0 ? out.useful_gpu_seconds / total : 0;
  const double available = total - out.down_gpu_seconds;
  s.goodput = available > 0 ? out.useful_gpu_seconds / available : 0;
  std::map<int, Acc> sizes;
  std::map<int32_t, Acc> queues;
  Acc all;
  for (const JobRecord& j : out.jobs) {
    s.jobs++;
    if (j.infeasible && j.first_start.value() < 0) {
      s.infeasible++;
      continue;
    }
    if (j.end.value() >= 0) {
      s.done++;
      s.gpu_hours_done += ToSeconds(j.work) * static_cast<double>(j.gpus.value()) / 3600;
    } else {
      s.unfinished++;
    }
    sizes[BucketIndex(j.gpus.value())].Add(j, out.end);
    queues[j.queue].Add(j, out.end);
    all.Add(j, out.end);
  }
  std::vector<double> intervals;
  for (const JobRecord& j : out.jobs) {
    if (j.checkpoint_interval.value() > 0) intervals.push_back(ToSeconds(j.checkpoint_interval));
  }
  s.checkpoint_interval = PercentilesOf(std::move(intervals));
  std::vector<double> stalls;
  stalls.reserve(out.checkpoint_stall_ns.size());
  for (int64_t ns : out.checkpoint_stall_ns) stalls.push_back(static_cast<double>(ns) * 1e-9);
  s.checkpoint_stall = PercentilesOf(std::move(stalls));
  s.drains_lost = out.drains_lost;
  s.stragglers = out.stragglers;
  s.straggler_replacements = out.straggler_replacements;
  const GroupRow everyone = all.Finish();
  s.ettr = everyone.ettr;
  s.jct = everyone.jct;
  s.wait = everyone.wait;
  if (s.unfinished == 0 && s.done > 0) {
    Time first = Time(-1), last = Time(-1);
    for (const JobRecord& j : out.jobs) {
      if (j.end.value() < 0) continue;
      if (first.value() < 0 || j.submit < first) first = j.submit;
      last = std::max(last, j.end);
    }
    s.makespan_seconds = ToSeconds(last - first);
  }
  SummarizeGangs(out, s);
  SummarizePower(out, s);
  for (auto& [b, acc] : sizes) {
    acc.row.name = kBucketName[b];
    s.by_size.push_back(acc.Finish());
  }
  for (auto& [q, acc] : queues) {
    acc.row.name =
        q < static_cast<int32_t>(config.queues.size()) ? config.queues[q].spec.name : "?";
    s.by_queue.push_back(acc.Finish());
  }
  for (size_t p = 0; p < config.failures.size(); ++p) {
    const FailureProcess& fp = config.failures[p];
    CauseRow row{fp.cause.empty() ? ComponentName(fp.component) : fp.cause, 0, 0,
                 p < out.lost_by_process.size() ? out.lost_by_process[p] / 3600.0 : 0};
    for (const FailureRecord& f : out.failures) {
      if (f.process != static_cast<int32_t>(p)) continue;
      row.failures++;
      row.jobs_hit += f.jobs_hit;
    }
    s.causes.push_back(row);
  }
  s.failures = static_cast<int64_t>(out.failures.size());
  s.failure_lost_gpu_hours = static_cast<double>(out.failed_lost_gpu_seconds) / 3600;
  s.preemptions = out.preemptions;
  s.preemption_lost_gpu_hours = static_cast<double>(out.preempted_lost_gpu_seconds) / 3600;
  s.cycles = out.cycles;
  s.decisions = out.decisions;
  s.events = out.events;
  s.placement_searches = out.scheduler.attempts;
  s.preemption_searches = out.scheduler.preemption_searches;
  s.reservations = out.scheduler.reservations;
  std::vector<double> ns(out.cycle_wall_ns.begin(), out.cycle_wall_ns.end());
  const Percentiles c = PercentilesOf(std::move(ns));
  s.cycle_p50_us = c.p50 / 1000;
  s.cycle_p99_us = c.p99 / 1000;
  return s;
}

}  // namespace unipool::sim
