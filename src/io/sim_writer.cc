#include "io/sim_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/summary_writer.h"
#include "io/table.h"

namespace unipool::io {
namespace {

std::string F(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string Pct(double share) { return F(share * 100, 1) + "%"; }

// "45 s", "12.5 min", "3.2 h", "4.1 d".
std::string Dur(double s) {
  if (s < 120) return F(s, 0) + " s";
  if (s < 7200) return F(s / 60, 1) + " min";
  if (s < 172800) return F(s / 3600, 1) + " h";
  return F(s / 86400, 1) + " d";
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Rows of the side-by-side comparison: label, value per run.
std::vector<std::pair<std::string, std::vector<std::string>>> Comparison(const std::vector<SimRun>& runs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto add = [&](const std::string& label, auto fn) {
    std::vector<std::string> cells;
    for (const SimRun& r : runs) cells.push_back(fn(r.summary));
    rows.emplace_back(label, cells);
  };
  using S = sim::Summary;
  add("simulated days", [](const S& s) { return F(s.days, 1); });
  add("jobs done / total", [](const S& s) { return Thousands(s.done) + " / " + Thousands(s.jobs); });
  add("unfinished, infeasible", [](const S& s) { return Thousands(s.unfinished) + ", " + Thousands(s.infeasible); });
  add("GPU-hours done", [](const S& s) { return Thousands(std::llround(s.gpu_hours_done)); });
  add("utilization (allocated)", [](const S& s) { return Pct(s.utilization_allocated); });
  add("utilization (useful)", [](const S& s) { return Pct(s.utilization_useful); });
  add("goodput (useful / up GPU-h)", [](const S& s) { return Pct(s.goodput); });
  add("ETTR (GPU-time weighted)", [](const S& s) { return F(s.ettr, 3); });
  add("checkpoint interval p50", [](const S& s) {
    return s.checkpoint_interval.count == 0 ? std::string("- (none)")
                                            : Dur(s.checkpoint_interval.p50);
  });
  add("JCT mean / p50 / p99", [](const S& s) {
    return s.jct.count == 0 ? std::string("- (none done)")
                            : Dur(s.jct.mean) + " / " + Dur(s.jct.p50) + " / " + Dur(s.jct.p99);
  });
  add("wait mean / p50 / p99", [](const S& s) {
    return s.wait.count == 0 ? std::string("- (none started)")
                             : Dur(s.wait.mean) + " / " + Dur(s.wait.p50) + " / " + Dur(s.wait.p99);
  });
  add("makespan", [](const S& s) {
    return s.makespan_seconds < 0 ? std::string("- (not all done)") : Dur(s.makespan_seconds);
  });
  add("failures, lost GPU-h", [](const S& s) {
    return Thousands(s.failures) + ", " + Thousands(std::llround(s.failure_lost_gpu_hours));
  });
  add("preemptions, lost GPU-h", [](const S& s) {
    return Thousands(s.preemptions) + ", " + Thousands(std::llround(s.preemption_lost_gpu_hours));
  });
  add("scheduler cycles, decisions", [](const S& s) { return Thousands(s.cycles) + ", " + Thousands(s.decisions); });
  // Wall-clock figures only when measured (`--timing`): without them the
  // output depends on the inputs and seed alone.
  const bool timed = std::any_of(runs.begin(), runs.end(), [](const SimRun& r) {
    return r.summary.cycle_p99_us > 0;
  });
  if (timed) {
    add("cycle wall time p50 / p99",
        [](const S& s) { return F(s.cycle_p50_us, 1) + " / " + F(s.cycle_p99_us, 1) + " us"; });
  }
  return rows;
}

std::string GroupTable(const std::vector<sim::GroupRow>& rows, const char* first) {
  Table t({first, "JOBS", "DONE", "WAIT P50", "WAIT P99", "JCT P50", "JCT P99", "ETTR", "FAILURES",
           "MTTI", "PREEMPTED", "LOST GPU-H"});
  for (const sim::GroupRow& r : rows) {
    // (a percentile of no job is "-", not "0 s")
    auto q = [](const sim::Percentiles& p, double v) { return p.count == 0 ? "-" : Dur(v); };
    t.Add({r.name, Thousands(r.jobs), Thousands(r.done), q(r.wait, r.wait.p50),
           q(r.wait, r.wait.p99), q(r.jct, r.jct.p50), q(r.jct, r.jct.p99), F(r.ettr, 3),
           Thousands(r.failures),
           r.mtti_hours > 0 ? F(r.mtti_hours, 1) + " h" : "-", Thousands(r.preemptions),
           Thousands(std::llround(r.lost_gpu_hours))});
  }
  return t.Render();
}

nlohmann::ordered_json PercentilesJson(const sim::Percentiles& p) {
  return {{"count", p.count}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

nlohmann::ordered_json GroupsJson(const std::vector<sim::GroupRow>& rows) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const sim::GroupRow& r : rows) {
    a.push_back({{"name", r.name},
                 {"jobs", r.jobs},
                 {"done", r.done},
                 {"waitSeconds", PercentilesJson(r.wait)},
                 {"jctSeconds", PercentilesJson(r.jct)},
                 {"ettr", r.ettr},
                 {"failures", r.failures},
                 {"mttiHours", r.mtti_hours},
                 {"preemptions", r.preemptions},
                 {"lostGpuHours", r.lost_gpu_hours}});
  }
  return a;
}

// ---- SVG charts ----------------------------------------------------------------

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"};

struct Line {
  std::string name;
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
};

double Nice(double v) {  // a round upper bound
  if (v <= 0) return 1;
  const double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

std::string Tick(double v) {
  if (std::fabs(v) >= 1e6) return F(v / 1e6, 1) + "M";
  if (std::fabs(v) >= 1e4) return F(v / 1e3, 0) + "k";
  if (std::fabs(v) >= 100 || v == std::floor(v)) return F(v, 0);
  return F(v, 2);
}

// `seconds_x`: the x axis is a time in seconds, its ticks in human units
// ("35 s", "12.5 min", "7.5 d").
std::string LineChart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<Line>& lines, bool log_x = false, double ymax_fixed = 0,
                      bool seconds_x = false) {
  const double w = 460, h = 260, l = 60, r = 12, t = 28, b = 42;
  double xmin = 1e300, xmax = -1e300, ymax = 0;
  for (const Line& line : lines) {
    for (const auto& [x, y] : line.points) {
      const double xv = log_x ? std::log10(std::max(x, 1.0)) : x;
      xmin = std::min(xmin, xv);
      xmax = std::max(xmax, xv);
      ymax = std::max(ymax, y);
    }
  }
  if (xmin > xmax) xmin = 0, xmax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  ymax = ymax_fixed > 0 ? ymax_fixed : Nice(ymax);
  auto X = [&](double x) { return l + (w - l - r) * ((log_x ? std::log10(std::max(x, 1.0)) : x) - xmin) / (xmax - xmin); };
  auto Y = [&](double y) { return t + (h - t - b) * (1 - y / ymax); };
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
    << "' font-family='sans-serif' font-size='11'>";
  s << "<text x='" << w / 2 << "' y='16' text-anchor='middle' font-size='13' font-weight='bold'>"
    << HtmlEscape(title) << "</text>";
  for (int i = 0; i <= 4; ++i) {
    const double yv = ymax * i / 4;
    s << "<line x1='" << l << "' x2='" << w - r << "' y1='" << Y(yv) << "' y2='" << Y(yv)
      << "' stroke='#ddd'/><text x='" << l - 4 << "' y='" << Y(yv) + 4 << "' text-anchor='end'>"
      << Tick(yv) << "</text>";
  }
  for (int i = 0; i <= 4; ++i) {
    const double xv = xmin + (xmax - xmin) * i / 4;
    const double px = l + (w - l - r) * i / 4;
    const double x = log_x ? std::pow(10, xv) : xv;
    s << "<text x='" << px << "' y='" << h - b + 14 << "' text-anchor='middle'>"
      << (seconds_x          ? Dur(x)
          : xlabel == "day" ? F(x, x == std::floor(x) ? 0 : 1) + " d"
                            : Tick(x))
      << "</text>";
  }
  s << "<text x='" << (l + w - r) / 2 << "' y='" << h - 8 << "' text-anchor='middle'>" << HtmlEscape(xlabel)
    << "</text><text x='12' y='" << (t + h - b) / 2 << "' transform='rotate(-90 12," << (t + h - b) / 2
    << ")' text-anchor='middle'>" << HtmlEscape(ylabel) << "</text>";
  s << "<rect x='" << l << "' y='" << t << "' width='" << w - l - r << "' height='" << h - t - b
    << "' fill='none' stroke='#888'/>";
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& line = lines[i];
    if (line.points.empty()) continue;
    s << "<polyline fill='none' stroke-width='1.6' stroke='" << kColors[i % 7] << "'"
      << (line.dashed ? " stroke-dasharray='4 3'" : "") << " points='";
    for (const auto& [x, y] : line.points) s << F(X(x), 1) << "," << F(Y(std::min(y, ymax)), 1) << " ";
    s << "'/>";
    s << "<text x='" << l + 6 << "' y='" << t + 14 + 13 * i << "' fill='" << kColors[i % 7] << "'>"
      << HtmlEscape(line.name) << "</text>";
  }
  s << "</svg>";
  return s.str();
}

// Grouped bars: one group per category, one bar per series.
std::string BarChart(const std::string& title, const std::string& ylabel,
                     const std::vector<std::string>& categories, const std::vector<Line>& series,
                     double ymax_fixed) {
  const double w = 460, h = 260, l = 60, r = 12, t = 28, b = 42;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
    << "' font-family='sans-serif' font-size='11'>";
  s << "<text x='" << w / 2 << "' y='16' text-anchor='middle' font-size='13' font-weight='bold'>"
    << HtmlEscape(title) << "</text>";
  auto Y = [&](double y) { return t + (h - t - b) * (1 - y / ymax_fixed); };
  for (int i = 0; i <= 4; ++i) {
    const double yv = ymax_fixed * i / 4;
    s << "<line x1='" << l << "' x2='" << w - r << "' y1='" << Y(yv) << "' y2='" << Y(yv)
      << "' stroke='#ddd'/><text x='" << l - 4 << "' y='" << Y(yv) + 4 << "' text-anchor='end'>"
      << Tick(yv) << "</text>";
  }
  s << "<text x='12' y='" << (t + h - b) / 2 << "' transform='rotate(-90 12," << (t + h - b) / 2
    << ")' text-anchor='middle'>" << HtmlEscape(ylabel) << "</text>";
  const double group_w = (w - l - r) / std::max<size_t>(1, categories.size());
  const double bar_w = group_w * 0.8 / std::max<size_t>(1, series.size());
  for (size_t c = 0; c < categories.size(); ++c) {
    const double gx = l + group_w * c + group_w * 0.1;
    s << "<text x='" << gx + group_w * 0.4 << "' y='" << h - b + 14 << "' text-anchor='middle'>"
      << HtmlEscape(categories[c]) << "</text>";
    for (size_t k = 0; k < series.size(); ++k) {
      if (c >= series[k].points.size()) continue;
      const double y = std::min(series[k].points[c].second, ymax_fixed);
      s << "<rect x='" << F(gx + bar_w * k, 1) << "' y='" << F(Y(y), 1) << "' width='" << F(bar_w - 1, 1)
        << "' height='" << F(Y(0) - Y(y), 1) << "' fill='" << kColors[k % 7] << "'/>";
    }
  }
  for (size_t k = 0; k < series.size(); ++k) {
    s << "<text x='" << l + 6 << "' y='" << t + 14 + 13 * k << "' fill='" << kColors[k % 7] << "'>"
      << HtmlEscape(series[k].name) << "</text>";
  }
  s << "<text x='" << (l + w - r) / 2 << "' y='" << h - 8 << "' text-anchor='middle'>job size (GPUs)</text>";
  s << "</svg>";
  return s.str();
}

// CDF points of values (seconds), 40 quantiles.
std::vector<std::pair<double, double>> Cdf(std::vector<double> v) {
  std::vector<std::pair<double, double>> pts;
  if (v.empty()) return pts;
  std::sort(v.begin(), v.end());
  for (int i = 0; i <= 40; ++i) {
    const double q = i / 40.0;
    pts.emplace_back(std::max(1.0, v[static_cast<size_t>(q * (v.size() - 1))]), q);
  }
  return pts;
}

}  // namespace

std::string SimText(const SimHeader& h, const std::vector<SimRun>& runs) {
  std::ostringstream out;
  out << "simulation " << h.name << ": cluster " << h.cluster << ", " << h.workload << ", seed " << h.seed
      << "\n\n";
  std::vector<std::string> head{"METRIC"};
  for (const SimRun& r : runs) head.push_back(r.summary.policy);
  Table cmp(head);
  for (auto& [label, cells] : Comparison(runs)) {
    std::vector<std::string> row{label};
    row.insert(row.end(), cells.begin(), cells.end());
    cmp.Add(row);
  }
  out << cmp.Render();
  for (const SimRun& r : runs) {
    out << "\n[" << r.summary.policy << "] by job size\n" << GroupTable(r.summary.by_size, "GPUS");
    if (r.summary.by_queue.size() > 1) {
      out << "\n[" << r.summary.policy << "] by queue\n" << GroupTable(r.summary.by_queue, "QUEUE");
    }
    if (!r.summary.causes.empty()) {
      Table c({"CAUSE", "FAILURES", "JOBS HIT", "LOST GPU-H"});
      for (const sim::CauseRow& row : r.summary.causes) {
        c.Add({row.cause, Thousands(row.failures), Thousands(row.jobs_hit),
               Thousands(std::llround(row.lost_gpu_hours))});
      }
      out << "\n[" << r.summary.policy << "] failures by cause\n" << c.Render();
    }
  }
  return out.str();
}

std::string SimJson(const SimHeader& h, const std::vector<SimRun>& runs) {
  nlohmann::ordered_json j;
  j["name"] = h.name;
  j["cluster"] = h.cluster;
  j["workload"] = h.workload;
  j["seed"] = h.seed;
  j["policies"] = nlohmann::ordered_json::array();
  for (const SimRun& r : runs) {
    const sim::Summary& s = r.summary;
    nlohmann::ordered_json p;
    p["policy"] = s.policy;
    p["days"] = s.days;
    p["gpus"] = s.gpus;
    p["jobs"] = {{"total", s.jobs}, {"done", s.done}, {"unfinished", s.unfinished}, {"infeasible", s.infeasible}};
    p["gpuHoursDone"] = s.gpu_hours_done;
    p["utilizationAllocated"] = s.utilization_allocated;
    p["utilizationUseful"] = s.utilization_useful;
    p["goodput"] = s.goodput;
    p["ettr"] = s.ettr;
    p["jctSeconds"] = PercentilesJson(s.jct);
    p["waitSeconds"] = PercentilesJson(s.wait);
    p["checkpointIntervalSeconds"] = PercentilesJson(s.checkpoint_interval);
    p["makespanSeconds"] = s.makespan_seconds < 0 ? nlohmann::ordered_json()
                                                  : nlohmann::ordered_json(s.makespan_seconds);
    p["bySize"] = GroupsJson(s.by_size);
    p["byQueue"] = GroupsJson(s.by_queue);
    p["failures"] = {{"count", s.failures}, {"lostGpuHours", s.failure_lost_gpu_hours}};
    p["failures"]["byCause"] = nlohmann::ordered_json::array();
    for (const sim::CauseRow& c : s.causes) {
      p["failures"]["byCause"].push_back({{"cause", c.cause}, {"failures", c.failures},
                                          {"jobsHit", c.jobs_hit}, {"lostGpuHours", c.lost_gpu_hours}});
    }
    p["preemptions"] = {{"count", s.preemptions}, {"lostGpuHours", s.preemption_lost_gpu_hours}};
    p["scheduler"] = {{"cycles", s.cycles}, {"decisions", s.decisions}, {"events", s.events},
                      {"placementSearches", s.placement_searches},
                      {"preemptionSearches", s.preemption_searches},
                      {"reservations", s.reservations}};
    if (s.cycle_p99_us > 0) {
      p["scheduler"]["cycleP50Us"] = s.cycle_p50_us;
      p["scheduler"]["cycleP99Us"] = s.cycle_p99_us;
    }
    j["policies"].push_back(p);
  }
  return j.dump(2) + "\n";
}

std::string SimSeriesCsv(const std::vector<SimRun>& runs) {
  std::ostringstream out;
  out << "policy,time_hours,allocated_gpus,down_gpus,running_jobs,pending_jobs,failures,lost_gpu_hours\n";
  for (const SimRun& r : runs) {
    for (const sim::Sample& s : r.output->series) {
      out << r.summary.policy << "," << F(ToSeconds(s.t) / 3600, 3) << "," << s.allocated_gpus << ","
          << s.down_gpus << "," << s.running_jobs << "," << s.pending_jobs << "," << s.failures << ","
          << F(s.lost_gpu_seconds / 3600.0, 3) << "\n";
    }
  }
  return out.str();
}

std::string SimHtml(const SimHeader& h, const std::vector<SimRun>& runs) {
  std::ostringstream out;
  out << "<!doctype html><html><head><meta charset='utf-8'><title>unipool sim: " << HtmlEscape(h.name)
      << "</title><style>body{font-family:sans-serif;margin:24px;color:#222}"
         "table{border-collapse:collapse;margin:8px 0 20px}td,th{border:1px solid #ccc;padding:3px 8px;"
         "text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
         ".charts{display:flex;flex-wrap:wrap;gap:12px}h2{margin-top:28px}</style></head><body>";
  out << "<h1>unipool sim: " << HtmlEscape(h.name) << "</h1><p>cluster <b>" << HtmlEscape(h.cluster)
      << "</b>; " << HtmlEscape(h.workload) << "; seed " << h.seed << "</p>";
  out << "<h2>Policies side by side</h2><table><tr><th>metric</th>";
  for (const SimRun& r : runs) out << "<th>" << HtmlEscape(r.summary.policy) << "</th>";
  out << "</tr>";
  for (auto& [label, cells] : Comparison(runs)) {
    out << "<tr><td>" << HtmlEscape(label) << "</td>";
    for (const std::string& c : cells) out << "<td>" << HtmlEscape(c) << "</td>";
    out << "</tr>";
  }
  out << "</table>";

  // Over time.
  std::vector<Line> util, queue, failures, lost;
  for (const SimRun& r : runs) {
    Line u{r.summary.policy, {}}, q{r.summary.policy, {}}, f{r.summary.policy, {}}, l{r.summary.policy, {}};
    Line down{r.summary.policy + ": down", {}, true};  // failed or drained
    const double gpus = static_cast<double>(std::max<int64_t>(1, r.output->cluster_gpus));
    for (const sim::Sample& s : r.output->series) {
      const double d = ToSeconds(s.t) / 86400;
      u.points.emplace_back(d, 100.0 * s.allocated_gpus / gpus);
      down.points.emplace_back(d, 100.0 * s.down_gpus / gpus);
      q.points.emplace_back(d, static_cast<double>(s.pending_jobs));
      f.points.emplace_back(d, static_cast<double>(s.failures));
      l.points.emplace_back(d, s.lost_gpu_seconds / 3600.0);
    }
    util.push_back(u);
    util.push_back(down);
    queue.push_back(q);
    failures.push_back(f);
    lost.push_back(l);
  }
  out << "<h2>Over time</h2><div class='charts'>"
      << LineChart("GPUs allocated, and down (dashed)", "day", "% of GPUs", util, false, 100)
      << LineChart("Queue length", "day", "pending jobs", queue)
      << LineChart("Failures (cumulative)", "day", "failures", failures)
      << LineChart("Work lost to failures and preemption", "day", "GPU-hours", lost) << "</div>";

  // Distributions by job size, one chart per policy.
  out << "<h2>Job completion and queueing by job size</h2><div class='charts'>";
  for (const SimRun& r : runs) {
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by;
    std::vector<std::string> order;
    for (const sim::JobRecord& j : r.output->jobs) {
      const std::string b = sim::SizeBucket(j.gpus.value());
      if (!by.count(b)) order.push_back(b);
      if (j.end.value() >= 0) by[b].first.push_back(ToSeconds(j.end - j.submit));
      if (j.first_start.value() >= 0) by[b].second.push_back(ToSeconds(j.first_start - j.submit) + 1);
    }
    std::vector<Line> jct, wait;
    for (const sim::GroupRow& g : r.summary.by_size) {
      jct.push_back(Line{g.name + " GPUs", Cdf(by[g.name].first)});
      wait.push_back(Line{g.name + " GPUs", Cdf(by[g.name].second)});
    }
    out << LineChart("JCT CDF [" + r.summary.policy + "]", "job completion time (log)",
                     "share of jobs", jct, true, 1, true)
        << LineChart("Wait CDF [" + r.summary.policy + "]", "queue wait + 1 s (log)",
                     "share of jobs", wait, true, 1, true);
  }
  out << "</div>";

  // ETTR and lost work by size.
  std::vector<std::string> cats;
  for (const SimRun& r : runs) {
    for (const sim::GroupRow& g : r.summary.by_size) {
      if (std::find(cats.begin(), cats.end(), g.name) == cats.end()) cats.push_back(g.name);
    }
  }
  std::vector<Line> ettr, mtti;
  double mtti_max = 0;
  for (const SimRun& r : runs) {
    Line e{r.summary.policy, {}}, m{r.summary.policy, {}};
    for (const std::string& c : cats) {
      double ev = 0, mv = 0;
      for (const sim::GroupRow& g : r.summary.by_size) {
        if (g.name == c) ev = g.ettr, mv = g.mtti_hours;
      }
      e.points.emplace_back(0, ev);
      m.points.emplace_back(0, mv);
      mtti_max = std::max(mtti_max, mv);
    }
    ettr.push_back(e);
    mtti.push_back(m);
  }
  out << "<h2>Effective training time by job size</h2><div class='charts'>"
      << BarChart("ETTR by job size", "ETTR", cats, ettr, 1.0)
      << BarChart("Mean time to interruption by job size", "hours", cats, mtti, Nice(mtti_max)) << "</div>";

  for (const SimRun& r : runs) {
    out << "<h2>" << HtmlEscape(r.summary.policy) << ": by job size</h2><table><tr><th>GPUs</th><th>jobs</th>"
        << "<th>done</th><th>wait p50</th><th>wait p99</th><th>JCT p50</th><th>JCT p99</th><th>ETTR</th>"
        << "<th>failures</th><th>MTTI</th><th>preempted</th><th>lost GPU-h</th></tr>";
    for (const sim::GroupRow& g : r.summary.by_size) {
      out << "<tr><td>" << g.name << "</td><td>" << Thousands(g.jobs) << "</td><td>" << Thousands(g.done)
          << "</td><td>" << Dur(g.wait.p50) << "</td><td>" << Dur(g.wait.p99) << "</td><td>" << Dur(g.jct.p50)
          << "</td><td>" << Dur(g.jct.p99) << "</td><td>" << F(g.ettr, 3) << "</td><td>" << Thousands(g.failures)
          << "</td><td>" << (g.mtti_hours > 0 ? F(g.mtti_hours, 1) + " h" : "-") << "</td><td>"
          << Thousands(g.preemptions) << "</td><td>" << Thousands(std::llround(g.lost_gpu_hours)) << "</td></tr>";
    }
    out << "</table>";
    if (!r.summary.causes.empty()) {
      out << "<table><tr><th>failure cause</th><th>failures</th><th>jobs hit</th><th>lost GPU-h</th></tr>";
      for (const sim::CauseRow& c : r.summary.causes) {
        out << "<tr><td>" << HtmlEscape(c.cause) << "</td><td>" << Thousands(c.failures) << "</td><td>"
            << Thousands(c.jobs_hit) << "</td><td>" << Thousands(std::llround(c.lost_gpu_hours)) << "</td></tr>";
      }
      out << "</table>";
    }
  }
  out << "<p style='color:#888'>Generated by unipool sim. Self-contained: no scripts, no network.</p>"
      << "</body></html>\n";
  return out.str();
}

}  // namespace unipool::io
