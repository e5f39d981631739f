// `unipool sim`: runs the simulator on a cluster with a trace or a synthetic
// workload under one or more policies and writes the summary, a time-series
// CSV and a self-contained HTML report.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/process_info.h"
#include "core/sim/simulator.h"
#include "core/sim/summary.h"
#include "core/sim/workload.h"
#include "io/cluster_reader.h"
#include "io/sim_reader.h"
#include "io/sim_report.h"
#include "io/sim_writer.h"
#include "io/summary_writer.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

struct SimOptions {
  std::string file;
  std::string cluster;
  std::string trace;
  std::string queue_from;
  std::string policies;
  int64_t seed = -1;
  std::string horizon;
  std::string output = "text";
  std::string report;
  std::string timeseries;
  std::string jobs;
  bool progress = true;
  bool timing = false;
};

int Fail(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return kExitBadInput;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return InvalidArgument(path + ": cannot write");
  return Status::Ok();
}

// Maps trace queues onto the configured queues (by name, else the default).
Status MapQueues(const io::Trace& trace, const std::string& fallback, sim::SimConfig& config,
                 std::vector<sim::SimJob>& jobs) {
  if (config.queues.empty()) {
    config.queues = io::QueuesForTrace(trace);
    return Status::Ok();
  }
  auto find = [&](const std::string& name) -> int32_t {
    for (size_t i = 0; i < config.queues.size(); ++i) {
      if (config.queues[i].spec.name == name) return static_cast<int32_t>(i);
    }
    return -1;
  };
  const int32_t def = find(fallback);
  for (sim::SimJob& j : jobs) {
    int32_t q = find(trace.queues[j.queue]);
    if (q < 0) q = def;
    if (q < 0) {
      return InvalidArgument("trace queue '" + trace.queues[j.queue] +
                             "' is not in spec.queues and there is no queue '" + fallback + "'");
    }
    j.queue = q;
  }
  return Status::Ok();
}

// Progress on stderr: a bar redrawn in place on a terminal; elsewhere (a
// log file, CI) a line every 5 s, so a long run still shows it advances.
class ProgressBar {
 public:
  explicit ProgressBar(bool on)
      : on_(on), tty_(isatty(2)), start_(std::chrono::steady_clock::now()), last_line_(start_) {}
  void Show(const std::string& label, double done) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0.01 ? elapsed * (1 - done) / done : 0;
    if (!tty_) {
      if (done >= 1 || now - last_line_ < std::chrono::seconds(5)) return;
      last_line_ = now;
      std::fprintf(stderr, "sim: %s %d%% after %.0fs, about %.0fs to go\n", label.c_str(),
                   static_cast<int>(done * 100), elapsed, eta);
      return;
    }
    const int width = 30, filled = static_cast<int>(done * width);
    std::fprintf(stderr, "\r%-16s [%s%s] %3d%%  ETA %4.0fs ", label.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<int>(done * 100), eta);
    if (done >= 1) std::fprintf(stderr, "\n");
  }
  void Restart() { start_ = last_line_ = std::chrono::steady_clock::now(); }

 private:
  bool on_, tty_;
  std::chrono::steady_clock::time_point start_, last_line_;
};

int RunSim(const SimOptions& opt) {
  io::SimFile file;
  if (!opt.file.empty()) {
    Result<io::SimFile> read = io::ReadSimFile(opt.file, opt.cluster);
    if (!read.ok()) return Fail(read.status().message());
    file = std::move(read).value();
  } else {
    if (opt.cluster.empty()) return Fail("give a simulation file, or --cluster with --trace");
    if (opt.trace.empty()) return Fail("give a simulation file, or --trace with --cluster");
    Result<Topology> topo = io::LoadTopology(opt.cluster);
    if (!topo.ok()) return Fail(topo.status().message());
    file.topology = std::make_unique<Topology>(std::move(topo).value());
    file.name = "trace replay";
    file.policies.push_back(*io::PolicyPreset("default"));
  }
  if (!opt.trace.empty()) {
    file.trace_path = opt.trace;
    file.synthetic.reset();
  }
  if (!opt.queue_from.empty()) file.trace.queue_from = opt.queue_from;
  if (opt.seed >= 0) file.seed = static_cast<uint64_t>(opt.seed);
  if (!opt.horizon.empty() && !io::ParseDuration(opt.horizon, &file.config.horizon)) {
    return Fail("--horizon: expected a duration like 30d or 12h, got '" + opt.horizon + "'");
  }
  if (!opt.policies.empty()) {
    std::vector<sim::PolicyConfig> chosen;
    std::stringstream ss(opt.policies);
    std::string name;
    while (std::getline(ss, name, ',')) {
      auto it = std::find_if(file.policies.begin(), file.policies.end(),
                             [&](const sim::PolicyConfig& p) { return p.name == name; });
      if (it != file.policies.end()) {
        chosen.push_back(*it);
        continue;
      }
      Result<sim::PolicyConfig> preset = io::PolicyPreset(name);
      if (!preset.ok()) return Fail("--policies: " + preset.status().message());
      chosen.push_back(*preset);
    }
    file.policies = chosen;
  }

  // The workload, the same for every policy.
  std::vector<sim::SimJob> jobs;
  io::SimHeader header{file.name, file.topology->name(), "", file.seed};
  header.config = &file.config;
  if (!file.trace_path.empty()) {
    Result<io::Trace> trace = io::ReadTrace(file.trace_path, file.trace);
    if (!trace.ok()) return Fail(trace.status().message());
    jobs = trace->jobs;
    Status mapped = MapQueues(*trace, file.trace.default_queue, file.config, jobs);
    if (!mapped.ok()) return Fail(mapped.message());
    header.workload = "trace " + file.trace_path.substr(file.trace_path.find_last_of('/') + 1) +
                      " (" + io::Thousands(static_cast<int64_t>(jobs.size())) + " GPU jobs of " +
                      io::Thousands(trace->rows) + " rows, " +
                      io::Thousands(static_cast<int64_t>(trace->gpu_hours)) + " GPU-hours)";
  } else if (!file.jobs.empty()) {
    jobs = file.jobs;
    header.workload = io::Thousands(static_cast<int64_t>(jobs.size())) + " listed job(s)";
  } else if (!file.synthetic) {
    return Fail(opt.file + ": no workload: add spec.workload, or give --trace");
  } else {
    Rng rng(file.seed);
    Result<std::vector<sim::SimJob>> gen = sim::Generate(*file.synthetic, rng);
    if (!gen.ok()) return Fail(gen.status().message());
    jobs = std::move(gen).value();
    header.workload = "synthetic (" + io::Thousands(static_cast<int64_t>(jobs.size())) + " jobs)";
  }

  ProgressBar bar(opt.progress && opt.output == "text");
  std::vector<sim::SimOutput> outputs;
  std::vector<io::SimRun> runs;
  outputs.reserve(file.policies.size());
  for (const sim::PolicyConfig& policy : file.policies) {
    sim::SimHooks hooks;
    if (opt.timing) {
      hooks.wall_clock_ns = [] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
      };
    }
    hooks.progress = [&bar, &policy](double done) { bar.Show(policy.name, done); };
    bar.Restart();
    Rng rng(file.seed ^ 0x5eed5eedULL);  // failures: the same for every policy
    Result<sim::SimOutput> out =
        sim::Simulator(*file.topology, file.config, policy, hooks).Run(jobs, rng);
    if (!out.ok()) return Fail(out.status().message());
    outputs.push_back(std::move(out).value());
  }
  for (const sim::SimOutput& o : outputs)
    runs.push_back(io::SimRun{sim::Summarize(o, file.config), &o});

  if (!opt.report.empty()) {
    Status st = WriteFile(opt.report, io::SimHtml(header, runs));
    if (!st.ok()) return Fail(st.message());
  }
  if (!opt.timeseries.empty()) {
    Status st = WriteFile(opt.timeseries, io::SimSeriesCsv(runs));
    if (!st.ok()) return Fail(st.message());
  }
  if (!opt.jobs.empty()) {
    std::vector<std::string> tiers, queues;
    for (int t = 0; t < file.topology->num_tiers(); ++t)
      tiers.push_back(file.topology->tier(t).name);
    for (const sim::QueueConfig& q : file.config.queues) queues.push_back(q.spec.name);
    Status st = WriteFile(opt.jobs, io::SimJobsCsv(runs, tiers, queues));
    if (!st.ok()) return Fail(st.message());
  }
  if (opt.output == "json") {
    std::cout << io::SimJson(header, runs);
  } else {
    std::cout << io::SimText(header, runs);
    std::string tail;
    if (opt.timing) tail += "; peak RSS " + std::to_string(PeakRssBytes() / (1 << 20)) + " MiB";
    if (!opt.report.empty()) tail += "; report " + opt.report;
    if (!opt.timeseries.empty()) tail += "; time series " + opt.timeseries;
    if (!opt.jobs.empty()) tail += "; jobs " + opt.jobs;
    if (!tail.empty()) std::cout << "\n" << tail.substr(2) << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddSimCommand(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<SimOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Simulate a cluster, workload and failures with the real scheduler; compare policies");
  cmd->add_option("FILE", opt->file, "simulation file (YAML, kind: Simulation)");
  cmd->add_option("--cluster", opt->cluster, "cluster file (overrides the simulation file's)");
  cmd->add_option("--trace", opt->trace, "replay a trace in the common CSV format");
  cmd->add_option("--queue-from", opt->queue_from, "trace column that names the queue")
      ->check(CLI::IsMember({"queue", "user", "none"}));
  cmd->add_option("--policies", opt->policies,
                  "comma-separated policies: the file's, or presets default, fifo, no-preemption, "
                  "first-fit, young-daly, fixed-1h, no-checkpoint");
  cmd->add_option("--seed", opt->seed, "random seed (default: the file's, else 1)");
  cmd->add_option("--horizon", opt->horizon, "stop after this much simulated time (e.g. 30d)");
  cmd->add_option("-o,--output", opt->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--report", opt->report, "write a self-contained HTML report here");
  cmd->add_option("--timeseries", opt->timeseries, "write the time series as CSV here");
  cmd->add_option("--jobs", opt->jobs,
                  "write every job's fate as CSV here: submit, start, end, wait, GPUs, nodes, "
                  "groups per tier, failures, preemptions, lost work (a row per job and policy)");
  cmd->add_flag("!--no-progress", opt->progress, "no progress bar on stderr");
  cmd->add_flag("--timing", opt->timing,
                "also report the scheduler's wall time per cycle and peak memory (these vary "
                "from run to run; everything else is byte-identical for the same seed)");
  cmd->callback([opt, &exit_code] { exit_code = RunSim(*opt); });
}

}  // namespace unipool::cli
