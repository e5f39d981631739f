#include "io/sim_writer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/summary_writer.h"
#include "io/svg_chart.h"
#include "io/table.h"

namespace unipool::io {
namespace {

std::string Pct(double share) { return Fixed(share * 100, 1) + "%"; }

// Hours to 9 decimals (3.6 us), without trailing zeros: a sample a second
// apart from the next stays apart (at 3 decimals both read 3.6 s apart or
// the same).
std::string Hours(double hours) {
  std::string s = Fixed(hours, 9);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string GroupTable(const std::vector<sim::GroupRow>& rows, const char* first) {
  Table t({first, "JOBS", "DONE", "WAIT P50", "WAIT P99", "JCT P50", "JCT P99", "ETTR", "FAILURES",
           "MTTI", "PREEMPTED", "LOST GPU-H"});
  for (const sim::GroupRow& r : rows) {
    // (a percentile of no job is "-", not "0 s")
    auto q = [](const sim::Percentiles& p, double v) {
      return p.count == 0 ? "-" : HumanSeconds(v);
    };
    t.Add({r.name, Thousands(r.jobs), Thousands(r.done), q(r.wait, r.wait.p50),
           q(r.wait, r.wait.p99), q(r.jct, r.jct.p50), q(r.jct, r.jct.p99), Fixed(r.ettr, 3),
           Thousands(r.failures), r.mtti_hours > 0 ? Fixed(r.mtti_hours, 1) + " h" : "-",
           Thousands(r.preemptions), Thousands(std::llround(r.lost_gpu_hours))});
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

}  // namespace

std::vector<std::pair<std::string, std::vector<std::string>>> ComparisonRows(
    const std::vector<SimRun>& runs) {
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto add = [&](const std::string& label, auto fn) {
    std::vector<std::string> cells;
    for (const SimRun& r : runs) cells.push_back(fn(r.summary));
    rows.emplace_back(label, cells);
  };
  using S = sim::Summary;
  add("simulated days", [](const S& s) { return Fixed(s.days, 1); });
  add("jobs done / total",
      [](const S& s) { return Thousands(s.done) + " / " + Thousands(s.jobs); });
  add("unfinished, infeasible",
      [](const S& s) { return Thousands(s.unfinished) + ", " + Thousands(s.infeasible); });
  add("GPU-hours done", [](const S& s) { return Thousands(std::llround(s.gpu_hours_done)); });
  add("utilization (allocated)", [](const S& s) { return Pct(s.utilization_allocated); });
  add("utilization (useful)", [](const S& s) { return Pct(s.utilization_useful); });
  add("goodput (useful / up GPU-h)", [](const S& s) { return Pct(s.goodput); });
  add("ETTR (GPU-time weighted)", [](const S& s) { return Fixed(s.ettr, 3); });
  add("checkpoint interval p50", [](const S& s) {
    return s.checkpoint_interval.count == 0 ? std::string("- (none)")
                                            : HumanSeconds(s.checkpoint_interval.p50);
  });
  if (std::any_of(runs.begin(), runs.end(),
                  [](const SimRun& r) { return r.summary.checkpoint_stall.count > 0; })) {
    add("checkpoint stall p50 / p99", [](const S& s) {
      // Stalls are often under a second: ms, then tenths of seconds.
      const auto fine = [](double x) {
        return x < 1 ? Fixed(x * 1000, 1) + " ms" : x < 120 ? Fixed(x, 1) + " s" : HumanSeconds(x);
      };
      return s.checkpoint_stall.count == 0
                 ? std::string("- (none to storage)")
                 : fine(s.checkpoint_stall.p50) + " / " + fine(s.checkpoint_stall.p99);
    });
    add("checkpoints to storage, drains lost", [](const S& s) {
      return Thousands(s.checkpoint_stall.count) + ", " + Thousands(s.drains_lost);
    });
  }
  add("JCT mean / p50 / p99", [](const S& s) {
    return s.jct.count == 0 ? std::string("- (none done)")
                            : HumanSeconds(s.jct.mean) + " / " + HumanSeconds(s.jct.p50) + " / " +
                                  HumanSeconds(s.jct.p99);
  });
  add("wait mean / p50 / p99", [](const S& s) {
    return s.wait.count == 0 ? std::string("- (none started)")
                             : HumanSeconds(s.wait.mean) + " / " + HumanSeconds(s.wait.p50) +
                                   " / " + HumanSeconds(s.wait.p99);
  });
  add("makespan", [](const S& s) {
    return s.makespan_seconds < 0 ? std::string("- (not all done)")
                                  : HumanSeconds(s.makespan_seconds);
  });
  const std::string tier = runs.empty() ? std::string("group") : runs[0].summary.group_tier;
  add(tier + " groups per multi-node gang (fewest)", [](const S& s) {
    return s.gangs == 0
               ? std::string("- (none)")
               : Fixed(s.groups_per_gang, 3) + " (" + Fixed(s.groups_per_gang_bound, 3) + ")";
  });
  add("gangs on the fewest " + tier + " groups", [](const S& s) {
    return s.gangs == 0 ? std::string("- (none)")
                        : Thousands(s.gangs_on_fewest) + " / " + Thousands(s.gangs);
  });
  add("failures, lost GPU-h", [](const S& s) {
    return Thousands(s.failures) + ", " + Thousands(std::llround(s.failure_lost_gpu_hours));
  });
  if (std::any_of(runs.begin(), runs.end(),
                  [](const SimRun& r) { return r.summary.stragglers > 0; })) {
    add("stragglers, replaced", [](const S& s) {
      return Thousands(s.stragglers) + ", " + Thousands(s.straggler_replacements);
    });
  }
  add("preemptions, lost GPU-h", [](const S& s) {
    return Thousands(s.preemptions) + ", " + Thousands(std::llround(s.preemption_lost_gpu_hours));
  });
  add("energy IT / facility (PUE)", [](const S& s) {
    return Thousands(std::llround(s.it_energy_mwh)) + " / " +
           Thousands(std::llround(s.facility_energy_mwh)) + " MWh (" + Fixed(s.pue, 2) + ")";
  });
  add("IT power mean / peak",
      [](const S& s) { return Fixed(s.mean_it_mw, 2) + " / " + Fixed(s.peak_it_mw, 2) + " MW"; });
  add("useful GPU-h per IT MWh", [](const S& s) { return Fixed(s.useful_gpu_hours_per_mwh, 1); });
  add("useful GFLOP/s per W (BF16 peak)",
      [](const S& s) { return Fixed(s.peak_gflops_per_watt, 1); });
  add("scheduler cycles, decisions",
      [](const S& s) { return Thousands(s.cycles) + ", " + Thousands(s.decisions); });
  // Wall-clock figures only when measured (`--timing`): without them the
  // output depends on the inputs and seed alone.
  const bool timed = std::any_of(runs.begin(), runs.end(),
                                 [](const SimRun& r) { return r.summary.cycle_p99_us > 0; });
  if (timed) {
    add("cycle wall time p50 / p99", [](const S& s) {
      return Fixed(s.cycle_p50_us, 1) + " / " + Fixed(s.cycle_p99_us, 1) + " us";
    });
  }
  return rows;
}

std::string SimText(const SimHeader& h, const std::vector<SimRun>& runs) {
  std::ostringstream out;
  out << "simulation " << h.name << ": cluster " << h.cluster << ", " << h.workload << ", seed "
      << h.seed << "\n\n";
  std::vector<std::string> head{"METRIC"};
  for (const SimRun& r : runs) head.push_back(r.summary.policy);
  Table cmp(head);
  for (auto& [label, cells] : ComparisonRows(runs)) {
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
    p["jobs"] = {{"total", s.jobs},
                 {"done", s.done},
                 {"unfinished", s.unfinished},
                 {"infeasible", s.infeasible}};
    p["gpuHoursDone"] = s.gpu_hours_done;
    p["utilizationAllocated"] = s.utilization_allocated;
    p["utilizationUseful"] = s.utilization_useful;
    p["goodput"] = s.goodput;
    p["ettr"] = s.ettr;
    p["jctSeconds"] = PercentilesJson(s.jct);
    p["waitSeconds"] = PercentilesJson(s.wait);
    p["checkpointIntervalSeconds"] = PercentilesJson(s.checkpoint_interval);
    p["checkpointStallSeconds"] = PercentilesJson(s.checkpoint_stall);
    p["drainsLost"] = s.drains_lost;
    p["makespanSeconds"] = s.makespan_seconds < 0 ? nlohmann::ordered_json()
                                                  : nlohmann::ordered_json(s.makespan_seconds);
    if (s.gangs > 0) {
      p["gangs"] = {{"multiNode", s.gangs},
                    {"tier", s.group_tier},
                    {"groupsPerGang", s.groups_per_gang},
                    {"groupsPerGangBound", s.groups_per_gang_bound},
                    {"onFewest", s.gangs_on_fewest}};
    }
    p["bySize"] = GroupsJson(s.by_size);
    p["byQueue"] = GroupsJson(s.by_queue);
    p["failures"] = {{"count", s.failures}, {"lostGpuHours", s.failure_lost_gpu_hours}};
    p["failures"]["byCause"] = nlohmann::ordered_json::array();
    for (const sim::CauseRow& c : s.causes) {
      p["failures"]["byCause"].push_back({{"cause", c.cause},
                                          {"failures", c.failures},
                                          {"jobsHit", c.jobs_hit},
                                          {"lostGpuHours", c.lost_gpu_hours}});
    }
    p["stragglers"] = {{"count", s.stragglers}, {"replaced", s.straggler_replacements}};
    p["preemptions"] = {{"count", s.preemptions}, {"lostGpuHours", s.preemption_lost_gpu_hours}};
    p["power"] = {{"itEnergyMwh", s.it_energy_mwh},
                  {"facilityEnergyMwh", s.facility_energy_mwh},
                  {"pue", s.pue},
                  {"meanItMw", s.mean_it_mw},
                  {"peakItMw", s.peak_it_mw},
                  {"usefulGpuHoursPerMwh", s.useful_gpu_hours_per_mwh},
                  {"usefulPeakGflopsPerWatt", s.peak_gflops_per_watt},
                  {"jobEnergyKwh", PercentilesJson(s.job_energy_kwh)}};
    p["scheduler"] = {{"cycles", s.cycles},
                      {"decisions", s.decisions},
                      {"events", s.events},
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
  out << "policy,time_hours,allocated_gpus,down_gpus,running_jobs,pending_jobs,failures,"
         "lost_gpu_hours,drained_gpus,useful_gpu_hours,it_mw\n";
  for (const SimRun& r : runs) {
    for (const sim::Sample& s : r.output->series) {
      out << r.summary.policy << "," << Hours(ToSeconds(s.t) / 3600) << "," << s.allocated_gpus
          << "," << s.down_gpus << "," << s.running_jobs << "," << s.pending_jobs << ","
          << s.failures << "," << Hours(s.lost_gpu_seconds / 3600.0) << "," << s.drained_gpus << ","
          << Hours(s.useful_gpu_seconds / 3600.0) << ","
          << Hours(static_cast<double>(s.it_watts) / 1e6) << "\n";
    }
  }
  return out.str();
}

namespace {

// Seconds with up to 3 decimals; empty for a time that never came.
std::string CsvSeconds(Time t) { return t.value() < 0 ? "" : Fixed(ToSeconds(t), 3); }

// A CSV cell: quoted when it holds a comma, a quote or a line break.
std::string CsvCell(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

const char* JobState(const sim::JobRecord& r) {
  if (r.infeasible) return "infeasible";
  if (r.end.value() >= 0) return "done";
  return r.first_start.value() >= 0 ? "running" : "pending";
}

}  // namespace

std::string SimJobsCsv(const std::vector<SimRun>& runs, const std::vector<std::string>& tiers,
                       const std::vector<std::string>& queues) {
  std::ostringstream out;
  out << "policy,job,name,queue,gpus,submit_s,start_s,end_s,wait_s,nodes";
  for (const std::string& t : tiers) out << "," << CsvCell(t + "_groups");
  out << ",failures,preemptions,lost_gpu_seconds,energy_kwh,state\n";
  for (const SimRun& run : runs) {
    for (const sim::JobRecord& r : run.output->jobs) {
      const bool started = r.first_start.value() >= 0;
      const std::string queue = r.queue >= 0 && static_cast<size_t>(r.queue) < queues.size()
                                    ? queues[r.queue]
                                    : std::to_string(r.queue);
      out << CsvCell(run.summary.policy) << "," << r.id << "," << CsvCell(r.name) << ","
          << CsvCell(queue) << "," << r.gpus.value() << "," << CsvSeconds(r.submit) << ","
          << CsvSeconds(r.first_start) << "," << CsvSeconds(r.end) << ","
          << (started ? Fixed(ToSeconds(r.first_start - r.submit), 3) : "") << "," << r.nodes;
      for (size_t t = 0; t < tiers.size(); ++t) {
        out << ",";
        if (t < r.groups_used.size()) out << r.groups_used[t];
      }
      out << "," << r.failures << "," << r.preemptions << "," << r.lost_gpu_seconds << ","
          << Fixed(r.energy_joules / 3.6e6, 3) << "," << JobState(r) << "\n";
    }
  }
  return out.str();
}

}  // namespace unipool::io
