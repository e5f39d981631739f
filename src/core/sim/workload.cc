#include "core/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace unipool::sim {

Duration CheckpointCost(const JobClass& c, int64_t gpus) {
  Duration cost = c.checkpoint_fixed;
  if (c.storage_bytes_per_s > 0) {
    const double s = c.state_bytes_per_gpu * static_cast<double>(gpus) / c.storage_bytes_per_s;
    cost += Nanoseconds(std::llround(s * 1e9));
  }
  return cost;
}

static const JobClass& Pick(const std::vector<JobClass>& classes, double total, Rng& rng,
                            int32_t* index) {
  double x = rng.Uniform() * total;
  for (size_t i = 0; i < classes.size(); ++i) {
    if ((x -= classes[i].share) < 0 || i + 1 == classes.size()) {
      *index = static_cast<int32_t>(i);
      return classes[i];
    }
  }
  return classes.back();
}

static int64_t PickSize(const JobClass& c, Rng& rng) {
  double total = 0;
  for (const auto& [gpus, w] : c.sizes) total += w;
  double x = rng.Uniform() * total;
  for (const auto& [gpus, w] : c.sizes) {
    if ((x -= w) < 0) return gpus;
  }
  return c.sizes.back().first;
}

Result<FittedClass> FitClass(const std::vector<SimJob>& jobs, const std::string& name) {
  if (jobs.size() < 2) return InvalidArgument("cannot fit a workload to fewer than two jobs");
  std::map<int64_t, double> sizes;
  double sum = 0, sum_sq = 0;
  Time first = jobs.front().submit, last = jobs.front().submit;
  for (const SimJob& j : jobs) {
    sizes[j.gpus.value()] += 1;
    const double l = std::log(std::max(1.0, ToSeconds(j.work)));
    sum += l;
    sum_sq += l * l;
    first = std::min(first, j.submit);
    last = std::max(last, j.submit);
  }
  const double n = static_cast<double>(jobs.size());
  const double mean = sum / n;
  FittedClass fit;
  fit.job_class.name = name;
  fit.job_class.sizes.assign(sizes.begin(), sizes.end());
  fit.job_class.duration_median = Nanoseconds(std::llround(std::exp(mean) * 1e9));
  fit.job_class.duration_sigma = std::sqrt(std::max(0.0, sum_sq / n - mean * mean));
  const double hours = std::max(ToSeconds(last - first) / 3600, 1e-9);
  fit.arrivals_per_hour = (n - 1) / hours;
  return fit;
}

Result<std::vector<SimJob>> Generate(const SyntheticSpec& spec, Rng& rng) {
  if (spec.classes.empty()) return InvalidArgument("workload: no job classes");
  if (spec.arrivals_per_hour <= 0) return InvalidArgument("workload: arrivalsPerHour must be > 0");
  double total = 0;
  for (const JobClass& c : spec.classes) {
    if (c.sizes.empty()) return InvalidArgument("workload class '" + c.name + "': no sizes");
    if (c.share <= 0) return InvalidArgument("workload class '" + c.name + "': share must be > 0");
    if (c.duration_median.value() <= 0) {
      return InvalidArgument("workload class '" + c.name + "': durationMedian must be > 0");
    }
    total += c.share;
  }
  std::vector<SimJob> jobs;
  const double mean_gap_s = 3600.0 / spec.arrivals_per_hour;
  double t = rng.Exponential(mean_gap_s);
  while (t < ToSeconds(spec.horizon)) {
    SimJob j;
    const JobClass& c = Pick(spec.classes, total, rng, &j.job_class);
    j.id = static_cast<int64_t>(jobs.size()) + 1;
    j.name = c.name + "-" + std::to_string(j.id);
    j.submit = Nanoseconds(std::llround(t * 1e9));
    j.gpus = Gpus(PickSize(c, rng));
    double d = rng.LogNormal(ToSeconds(c.duration_median), c.duration_sigma);
    if (c.duration_max.value() > 0) d = std::min(d, ToSeconds(c.duration_max));
    j.work = Nanoseconds(std::max<int64_t>(1000000000, std::llround(d * 1e9)));
    j.queue = c.queue;
    j.priority = c.priority;
    j.preemptible = c.preemptible;
    j.span_partitions = c.span_partitions;
    if (c.elastic_min > 0) j.min_gpus = Gpus(std::max<int64_t>(1, std::llround(c.elastic_min * j.gpus.value())));
    j.checkpoint = c.checkpoint;
    j.checkpoint_interval = c.checkpoint_interval;
    j.checkpoint_cost = CheckpointCost(c, j.gpus.value());
    // Without a bandwidth of its own, the state goes to the cluster's
    // storage (used when the cluster file lists one).
    if (c.storage_bytes_per_s <= 0) {
      j.checkpoint_bytes = c.state_bytes_per_gpu * static_cast<double>(j.gpus.value());
    }
    j.two_stage = c.two_stage;
    j.restart_cost = c.restart_cost;
    if (c.estimate) j.runtime_estimate = j.work + j.restart_cost;
    jobs.push_back(std::move(j));
    t += rng.Exponential(mean_gap_s);
  }
  return jobs;
}

}  // namespace unipool::sim
