#include "io/sim_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "io/summary_writer.h"
#include "io/svg_chart.h"

namespace unipool::io {
namespace {

using Points = std::vector<std::pair<double, double>>;
using Bands = std::vector<std::pair<double, double>>;

constexpr size_t kMaxQueueLines = 5;  // then "other queues"

double Day(Time t) { return ToSeconds(t) / 86400; }
double ClusterGpus(const SimRun& r) {
  return static_cast<double>(std::max<int64_t>(1, r.output->cluster_gpus));
}

// ---- Data for the charts --------------------------------------------------------

// The days when GPUs were drained for maintenance (by the first run's
// samples: the windows are the same for every policy).
Bands MaintenanceBands(const std::vector<SimRun>& runs) {
  Bands bands;
  if (runs.empty()) return bands;
  double from = -1;
  for (const sim::Sample& s : runs[0].output->series) {
    if (s.drained_gpus > 0 && from < 0) from = Day(s.t);
    if (s.drained_gpus == 0 && from >= 0) bands.emplace_back(from, Day(s.t)), from = -1;
  }
  if (from >= 0) bands.emplace_back(from, Day(runs[0].output->end));
  return bands;
}

// Useful work (kept by a checkpoint or the end) per unit of time, as a
// share of the cluster's GPUs in %, over a trailing window of about 1/40
// of the run: work is kept in steps (each checkpoint), so a window smooths
// them into a rate.
Points UsefulShare(const SimRun& r) {
  const std::vector<sim::Sample>& series = r.output->series;
  const size_t k = std::max<size_t>(1, series.size() / 40);
  Points p;
  for (size_t i = 1; i < series.size(); ++i) {
    const sim::Sample& a = series[i >= k ? i - k : 0];
    const sim::Sample& b = series[i];
    const double dt = ToSeconds(b.t - a.t);
    if (dt <= 0) continue;
    p.emplace_back(Day(b.t),
                   100 * (b.useful_gpu_seconds - a.useful_gpu_seconds) / dt / ClusterGpus(r));
  }
  return p;
}

// Failures per day of each cause, in bins of an hour, 6 hours, a day or a
// week (the finest that gives at most 60 bins).
std::vector<ChartLine> FailureRates(const SimRun& r) {
  const double days = std::max(Day(r.output->end), 1e-9);
  double bin = 7;
  for (double b : {1.0 / 24, 0.25, 1.0, 7.0}) {
    if (days / b <= 60) {
      bin = b;
      break;
    }
  }
  const size_t bins = std::max<size_t>(1, static_cast<size_t>(std::ceil(days / bin - 1e-9)));
  std::vector<ChartLine> lines;
  for (size_t p = 0; p < r.summary.causes.size(); ++p) {
    std::vector<int64_t> count(bins, 0);
    for (const sim::FailureRecord& f : r.output->failures) {
      if (f.process == static_cast<int32_t>(p)) {
        count[std::min(bins - 1, static_cast<size_t>(Day(f.t) / bin))]++;
      }
    }
    ChartLine line{r.summary.causes[p].cause, {}};
    for (size_t b = 0; b < bins; ++b) {  // a step per bin
      const double rate = static_cast<double>(count[b]) / bin;
      line.points.emplace_back(static_cast<double>(b) * bin, rate);
      line.points.emplace_back(std::min(days, static_cast<double>(b + 1) * bin), rate);
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// GPUs in use by the queues that used most (mean over the run), the rest
// summed; each queue's guarantee dashed in its colour.
std::vector<ChartLine> QueueUse(const SimRun& r, const sim::SimConfig& config) {
  const size_t n = config.queues.size();
  std::vector<double> mean(n, 0);
  for (const sim::Sample& s : r.output->series) {
    for (size_t q = 0; q < n && q < s.queue_gpus.size(); ++q)
      mean[q] += static_cast<double>(s.queue_gpus[q]);
  }
  std::vector<size_t> order(n);
  for (size_t q = 0; q < n; ++q) order[q] = q;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return mean[a] > mean[b]; });
  const size_t shown = std::min(n, n > kMaxQueueLines + 1 ? kMaxQueueLines : n);
  std::vector<ChartLine> lines;
  for (size_t k = 0; k < shown; ++k) {
    const size_t q = order[k];
    // Colour by the queue, not its rank: the same in every policy's chart.
    ChartLine use{config.queues[q].spec.name, {}, false, static_cast<int>(q)};
    for (const sim::Sample& s : r.output->series) {
      use.points.emplace_back(Day(s.t),
                              q < s.queue_gpus.size() ? static_cast<double>(s.queue_gpus[q]) : 0);
    }
    lines.push_back(std::move(use));
    const int64_t g = config.queues[q].spec.guarantee.value();
    if (g > 0 && !r.output->series.empty()) {
      lines.push_back(ChartLine{config.queues[q].spec.name + " guarantee",
                                {{Day(r.output->series.front().t), static_cast<double>(g)},
                                 {Day(r.output->end), static_cast<double>(g)}},
                                true,
                                static_cast<int>(q)});
    }
  }
  if (shown < n) {
    ChartLine other{
        "other queues (" + std::to_string(n - shown) + ")", {}, false, /*grey-blue*/ 7};
    for (const sim::Sample& s : r.output->series) {
      double sum = 0;
      for (size_t k = shown; k < n; ++k) {
        if (order[k] < s.queue_gpus.size()) sum += static_cast<double>(s.queue_gpus[order[k]]);
      }
      other.points.emplace_back(Day(s.t), sum);
    }
    lines.push_back(std::move(other));
  }
  return lines;
}

// A CDF of `v` in 41 quantiles, taken as the tables take them.
Points Cdf(std::vector<double> v) {
  Points pts;
  if (v.empty()) return pts;
  std::sort(v.begin(), v.end());
  for (int i = 0; i <= 40; ++i) pts.emplace_back(sim::QuantileOfSorted(v, i / 40.0), i / 40.0);
  return pts;
}

// ---- Sections -------------------------------------------------------------------

void Head(std::ostringstream& out, const SimHeader& h, const std::vector<SimRun>& runs) {
  out << "<!doctype html><html><head><meta charset='utf-8'><title>unipool sim: "
      << XmlEscape(h.name)
      << "</title><style>body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px "
         "8px;"
         "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
         ".charts{display:flex;flex-wrap:wrap;gap:12px}h2{margin-top:28px}</style></head><body>";
  out << "<h1>unipool sim: " << XmlEscape(h.name) << "</h1><p>cluster <b>" << XmlEscape(h.cluster)
      << "</b>; " << XmlEscape(h.workload) << "; seed " << h.seed << "</p>";
  out << "<h2>Policies side by side</h2><table><tr><th>metric</th>";
  for (const SimRun& r : runs) out << "<th>" << XmlEscape(r.summary.policy) << "</th>";
  out << "</tr>";
  for (auto& [label, cells] : ComparisonRows(runs)) {
    out << "<tr><td>" << XmlEscape(label) << "</td>";
    for (const std::string& c : cells) out << "<td>" << XmlEscape(c) << "</td>";
    out << "</tr>";
  }
  out << "</table>";
}

Chart OverTime(const std::string& title, const std::string& ylabel, const Bands& bands) {
  Chart c{title, "day", ylabel, AxisUnit::kDays};
  c.bands = bands;
  c.band_label = "maintenance (shaded)";
  return c;
}

void OverTimeCharts(std::ostringstream& out, const std::vector<SimRun>& runs) {
  const Bands bands = MaintenanceBands(runs);
  std::vector<ChartLine> use, unavailable, queue, lost, power;
  for (size_t i = 0; i < runs.size(); ++i) {
    const SimRun& r = runs[i];
    const std::string& name = r.summary.policy;
    const int color = static_cast<int>(i);
    ChartLine allocated{name + ": allocated", {}, false, color},
        failed{name + ": failed", {}, false, color}, drained{name + ": drained", {}, true, color},
        q{name, {}, false, color}, l{name, {}, false, color}, mw{name, {}, false, color};
    for (const sim::Sample& s : r.output->series) {
      const double d = Day(s.t);
      allocated.points.emplace_back(d,
                                    100.0 * static_cast<double>(s.allocated_gpus) / ClusterGpus(r));
      failed.points.emplace_back(d, 100.0 * static_cast<double>(s.down_gpus) / ClusterGpus(r));
      drained.points.emplace_back(d, 100.0 * static_cast<double>(s.drained_gpus) / ClusterGpus(r));
      q.points.emplace_back(d, static_cast<double>(s.pending_jobs));
      l.points.emplace_back(d, static_cast<double>(s.lost_gpu_seconds) / 3600.0);
      mw.points.emplace_back(d, static_cast<double>(s.it_watts) / 1e6);
    }
    use.push_back(std::move(allocated));
    use.push_back(ChartLine{name + ": useful work", UsefulShare(r), true, color});
    unavailable.push_back(std::move(failed));
    unavailable.push_back(std::move(drained));
    queue.push_back(std::move(q));
    lost.push_back(std::move(l));
    power.push_back(std::move(mw));
  }
  Chart use_chart = OverTime("GPUs allocated, and doing useful work (dashed)", "% of GPUs", bands);
  use_chart.ymax = 100;
  out << "<h2>Over time</h2><div class='charts'>" << LineChart(use_chart, use)
      << LineChart(
             OverTime("GPUs failed, and drained for maintenance (dashed)", "% of GPUs", bands),
             unavailable)
      << LineChart(OverTime("Queue length", "pending jobs", bands), queue)
      << LineChart(
             OverTime("Work lost to failures and preemption (cumulative)", "GPU-hours", bands),
             lost)
      << LineChart(OverTime("Cluster IT power", "MW", bands), power);
  for (const SimRun& r : runs) {
    if (r.summary.causes.empty()) continue;
    const std::string of = runs.size() > 1 ? " [" + r.summary.policy + "]" : "";
    out << LineChart(OverTime("Failures per day by cause" + of, "failures per day", bands),
                     FailureRates(r));
    break;  // the failure processes are the policies' common input: one chart
  }
  out << "</div>";
}

void QueueCharts(std::ostringstream& out, const SimHeader& h, const std::vector<SimRun>& runs) {
  if (h.config == nullptr) return;
  const auto guaranteed =
      std::any_of(h.config->queues.begin(), h.config->queues.end(),
                  [](const sim::QueueConfig& q) { return q.spec.guarantee.value() > 0; });
  if (h.config->queues.size() < 2 && !guaranteed) return;
  const Bands bands = MaintenanceBands(runs);
  out << "<h2>Queues: GPUs in use against their guarantee</h2><div class='charts'>";
  for (const SimRun& r : runs) {
    out << LineChart(OverTime("GPUs in use by queue [" + r.summary.policy + "]", "GPUs", bands),
                     QueueUse(r, *h.config));
  }
  out << "</div>";
}

void DistributionCharts(std::ostringstream& out, const std::vector<SimRun>& runs) {
  out << "<h2>Job completion and queueing by job size</h2><div class='charts'>";
  for (const SimRun& r : runs) {
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;
    for (const sim::JobRecord& j : r.output->jobs) {
      auto& [jct, wait] = by[sim::SizeBucket(j.gpus.value())];
      if (j.end.value() >= 0) jct.push_back(ToSeconds(j.end - j.submit));
      if (j.first_start.value() >= 0) wait.push_back(ToSeconds(j.first_start - j.submit));
    }
    std::vector<ChartLine> jct, wait;
    for (const sim::GroupRow& g : r.summary.by_size) {
      jct.push_back(ChartLine{g.name + " GPUs", Cdf(by[g.name].first)});
      wait.push_back(ChartLine{g.name + " GPUs", Cdf(by[g.name].second)});
    }
    Chart c{"JCT CDF [" + r.summary.policy + "]", "job completion time (log)", "share of jobs",
            AxisUnit::kSeconds, /*log_x=*/true};
    c.ymax = 1;
    out << LineChart(c, jct);
    c.title = "Wait CDF [" + r.summary.policy + "]";
    c.xlabel = "queue wait (log; under 1 s at 1 s)";
    out << LineChart(c, wait);
  }
  out << "</div>";
}

void SizeCharts(std::ostringstream& out, const std::vector<SimRun>& runs) {
  std::vector<std::string> cats;
  for (const SimRun& r : runs) {
    for (const sim::GroupRow& g : r.summary.by_size) {
      if (std::find(cats.begin(), cats.end(), g.name) == cats.end()) cats.push_back(g.name);
    }
  }
  std::vector<ChartLine> ettr, mtti;
  for (const SimRun& r : runs) {
    ChartLine e{r.summary.policy, {}}, m{r.summary.policy, {}};
    for (const std::string& c : cats) {
      double ev = 0, mv = 0;
      for (const sim::GroupRow& g : r.summary.by_size) {
        if (g.name == c) ev = g.ettr, mv = g.mtti_hours;
      }
      e.points.emplace_back(0, ev);
      m.points.emplace_back(0, mv);
    }
    ettr.push_back(std::move(e));
    mtti.push_back(std::move(m));
  }
  Chart e{"ETTR by job size", "job size (GPUs)", "ETTR"};
  e.ymax = 1;
  Chart m{"Mean time to interruption by job size", "job size (GPUs)", "hours (log)"};
  m.log_y = true;  // from minutes for the largest jobs to months for one GPU
  out << "<h2>Effective training time by job size</h2><div class='charts'>"
      << BarChart(e, cats, ettr) << BarChart(m, cats, mtti) << "</div>";
}

void Tables(std::ostringstream& out, const std::vector<SimRun>& runs) {
  for (const SimRun& r : runs) {
    out << "<h2>" << XmlEscape(r.summary.policy)
        << ": by job size</h2><table><tr><th>GPUs</th><th>jobs</th>"
        << "<th>done</th><th>wait p50</th><th>wait p99</th><th>JCT p50</th><th>JCT "
           "p99</th><th>ETTR</th>"
        << "<th>failures</th><th>MTTI</th><th>preempted</th><th>lost GPU-h</th></tr>";
    const auto q = [](const sim::Percentiles& p, double v) {
      return p.count == 0 ? "-" : HumanSeconds(v);
    };
    for (const sim::GroupRow& g : r.summary.by_size) {
      out << "<tr><td>" << g.name << "</td><td>" << Thousands(g.jobs) << "</td><td>"
          << Thousands(g.done) << "</td><td>" << q(g.wait, g.wait.p50) << "</td><td>"
          << q(g.wait, g.wait.p99) << "</td><td>" << q(g.jct, g.jct.p50) << "</td><td>"
          << q(g.jct, g.jct.p99) << "</td><td>" << Fixed(g.ettr, 3) << "</td><td>"
          << Thousands(g.failures) << "</td><td>"
          << (g.mtti_hours > 0 ? Fixed(g.mtti_hours, 1) + " h" : "-") << "</td><td>"
          << Thousands(g.preemptions) << "</td><td>" << Thousands(std::llround(g.lost_gpu_hours))
          << "</td></tr>";
    }
    out << "</table>";
    if (r.summary.causes.empty()) continue;
    out << "<table><tr><th>failure cause</th><th>failures</th><th>jobs hit</th><th>lost "
           "GPU-h</th></tr>";
    for (const sim::CauseRow& c : r.summary.causes) {
      out << "<tr><td>" << XmlEscape(c.cause) << "</td><td>" << Thousands(c.failures) << "</td><td>"
          << Thousands(c.jobs_hit) << "</td><td>" << Thousands(std::llround(c.lost_gpu_hours))
          << "</td></tr>";
    }
    out << "</table>";
  }
}

}  // namespace

std::string SimHtml(const SimHeader& h, const std::vector<SimRun>& runs) {
  std::ostringstream out;
  Head(out, h, runs);
  OverTimeCharts(out, runs);
  QueueCharts(out, h, runs);
  DistributionCharts(out, runs);
  SizeCharts(out, runs);
  Tables(out, runs);
  out << "<p style='color:#888'>Generated by unipool sim. Self-contained: no scripts, no "
         "network.</p>"
      << "</body></html>\n";
  return out.str();
}

}  // namespace unipool::io
