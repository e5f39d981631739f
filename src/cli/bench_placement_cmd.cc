// `unipool bench placement`: how compactly the scheduler places gangs
// under load, on one fixed workload (testdata/bench/README.md): 800 gang
// jobs of 1-64 nodes released at once on 1,024 nodes in 64 leaves. The
// workload runs through the simulator (the same scheduler the server runs)
// and the command prints the makespan, the mean wait, the node-time used
// and the placement figures, each beside its lower bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/sim/simulator.h"
#include "core/sim/summary.h"
#include "io/cluster_reader.h"
#include "io/resource_tables.h"
#include "io/sim_writer.h"
#include "io/table.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

struct PlacementBenchOptions {
  std::string workload = "testdata/bench/gang_workload800.txt";
  std::string cluster = "bench/clusters/gang-1024.yaml";
  std::string max_wait = "default";  // the scheduler's compact_max_wait
  bool estimates = true;
  std::string output = "text";
  std::string jobs_csv;    // every job's fate, when given
  double comm_share = -1;  // the scheduler's default
};

struct GangJob {
  int64_t nodes = 0;
  int64_t seconds = 0;
};

// `NODES SECONDS` per line; '#' starts a comment.
Result<std::vector<GangJob>> ReadWorkload(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open");
  std::vector<GangJob> jobs;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string a, b, extra;
    if (!(fields >> a)) continue;
    GangJob j;
    if (!(fields >> b) || (fields >> extra) || !io::ParseInt64(a, &j.nodes) ||
        !io::ParseInt64(b, &j.seconds) || j.nodes < 1 || j.seconds < 1) {
      return InvalidArgument(path + ":" + std::to_string(line_no) +
                             ": expected 'NODES SECONDS' (two positive integers), got '" + line +
                             "'");
    }
    jobs.push_back(j);
  }
  if (jobs.empty()) return InvalidArgument(path + ": no jobs");
  return jobs;
}

// What the run shows, and its bounds.
struct Figures {
  double makespan_s = 0, makespan_bound_s = 0, mean_wait_s = 0, node_time_used = 0;
  int64_t gangs = 0, fewest_leaves = 0, small = 0, small_spread = 0, multi_spine = 0;
  double leaves_per_gang = 0, leaves_bound = 0;
  int64_t decisions = 0, cycles = 0;
};

Figures Measure(const Topology& topo, const std::vector<GangJob>& work, const sim::SimOutput& out) {
  Figures f;
  const int leaf = std::min(1, topo.num_tiers() - 1), spine = std::min(2, topo.num_tiers() - 1);
  const int64_t leaf_nodes = topo.group_num_nodes(leaf, GroupId(0));
  double node_seconds = 0, wait = 0, leaves = 0, bound = 0;
  for (size_t i = 0; i < out.jobs.size(); ++i) {
    const sim::JobRecord& r = out.jobs[i];
    node_seconds += static_cast<double>(work[i].nodes * work[i].seconds);
    f.makespan_s = std::max(f.makespan_s, ToSeconds(r.end));
    wait += ToSeconds(r.first_start - r.submit);
    const int64_t fewest = (work[i].nodes + leaf_nodes - 1) / leaf_nodes;
    const int32_t used = r.groups_used.empty() ? 0 : r.groups_used[leaf];
    if (work[i].nodes <= leaf_nodes) {
      ++f.small;
      f.small_spread += used > 1;
    }
    if (!r.groups_used.empty()) f.multi_spine += r.groups_used[spine] > 1;
    if (work[i].nodes < 2) continue;
    ++f.gangs;
    leaves += used;
    bound += static_cast<double>(fewest);
    f.fewest_leaves += used <= fewest;
  }
  const double n = static_cast<double>(out.jobs.size());
  f.mean_wait_s = wait / n;
  f.makespan_bound_s = node_seconds / topo.num_nodes();
  f.node_time_used = node_seconds / (topo.num_nodes() * f.makespan_s);
  f.leaves_per_gang = leaves / std::max<int64_t>(1, f.gangs);
  f.leaves_bound = bound / std::max<int64_t>(1, f.gangs);
  f.decisions = out.decisions;
  f.cycles = out.cycles;
  return f;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

int RunBenchPlacement(const PlacementBenchOptions& opt) {
  Result<Topology> topo = io::LoadTopology(opt.cluster);
  if (!topo.ok()) {
    std::cerr << "error: " << topo.status().message() << "\n";
    return kExitBadInput;
  }
  Result<std::vector<GangJob>> work = ReadWorkload(opt.workload);
  if (!work.ok()) {
    std::cerr << "error: " << work.status().message() << "\n";
    return kExitBadInput;
  }
  const int32_t k = static_cast<int32_t>(topo->node_gpus(NodeId(0)).value());
  std::vector<sim::SimJob> jobs;
  for (size_t i = 0; i < work->size(); ++i) {
    const GangJob& g = (*work)[i];
    if (g.nodes > topo->num_nodes()) {
      std::cerr << "error: " << opt.workload << ": job " << i + 1 << " wants " << g.nodes
                << " nodes; the cluster has " << topo->num_nodes() << "\n";
      return kExitBadInput;
    }
    sim::SimJob j;
    j.id = static_cast<int64_t>(i) + 1;
    j.name = "gang-" + std::to_string(i + 1);
    j.submit = Time(0);
    j.gpus = Gpus(g.nodes * k);
    j.task_gpus = k;
    j.work = Seconds(g.seconds);
    if (opt.estimates) j.runtime_estimate = j.work;
    jobs.push_back(j);
  }
  sim::SimConfig config;
  config.sample_interval = Seconds(3600);
  sim::QueueConfig q;
  q.spec.name = "bench";
  config.queues.push_back(q);
  sim::PolicyConfig policy;
  policy.name = "maxWait " + opt.max_wait;
  if (opt.max_wait != "default") {
    Duration d;
    if (!io::ParseDuration(opt.max_wait, &d) || d.value() < 0) {
      std::cerr << "error: --max-wait: expected a duration (0s, 10s, 1m), got '" << opt.max_wait
                << "'\n";
      return kExitBadInput;
    }
    policy.scheduler.compact_max_wait = d;
  }
  if (opt.comm_share >= 0) policy.scheduler.comm_share = opt.comm_share;
  sim::Simulator simulator(*topo, config, policy);
  Rng rng(1);
  Result<sim::SimOutput> out = simulator.Run(jobs, rng);
  if (!out.ok()) {
    std::cerr << "error: " << out.status().message() << "\n";
    return kExitFailed;
  }
  const Figures f = Measure(*topo, *work, *out);
  if (!opt.jobs_csv.empty()) {
    std::vector<std::string> tiers;
    for (int t = 0; t < topo->num_tiers(); ++t) tiers.push_back(topo->tier(t).name);
    std::ofstream csv(opt.jobs_csv, std::ios::binary);
    csv << io::SimJobsCsv({io::SimRun{sim::Summarize(*out, config), &*out}}, tiers, {"bench"});
    if (!csv) {
      std::cerr << "error: --jobs " << opt.jobs_csv << ": cannot write\n";
      return kExitFailed;
    }
  }
  const std::string max_wait = opt.max_wait == "default"
                                   ? io::HumanDuration(static_cast<int64_t>(
                                         ToSeconds(sched::SchedulerOptions{}.compact_max_wait)))
                                   : opt.max_wait;
  if (opt.output == "json") {
    nlohmann::ordered_json j{{"cluster", topo->name()},
                             {"jobs", jobs.size()},
                             {"maxWait", max_wait},
                             {"estimates", opt.estimates},
                             {"makespanSeconds", f.makespan_s},
                             {"makespanBoundSeconds", f.makespan_bound_s},
                             {"meanWaitSeconds", f.mean_wait_s},
                             {"nodeTimeUsed", f.node_time_used},
                             {"multiNodeGangs", f.gangs},
                             {"leavesPerGang", f.leaves_per_gang},
                             {"leavesPerGangBound", f.leaves_bound},
                             {"fewestLeaves", f.fewest_leaves},
                             {"leafSizedJobs", f.small},
                             {"leafSizedJobsSpread", f.small_spread},
                             {"gangsOverOneSpine", f.multi_spine},
                             {"cycles", f.cycles},
                             {"decisions", f.decisions}};
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "workload " << opt.workload << ": " << jobs.size() << " gangs on cluster "
            << topo->name() << " (" << topo->num_nodes() << " nodes); compact wait up to "
            << max_wait << (opt.estimates ? "" : ", no runtime estimates") << "\n";
  io::Table t({"FIGURE", "UNIPOOL", "BOUND"});
  t.Add({"makespan", Fixed(f.makespan_s, 1) + " s", Fixed(f.makespan_bound_s, 1) + " s"});
  t.Add({"mean wait", Fixed(f.mean_wait_s, 1) + " s", ""});
  t.Add({"node-time used", Fixed(f.node_time_used * 100, 1) + "%", "100%"});
  t.Add({"leaves per multi-node gang", Fixed(f.leaves_per_gang, 3), Fixed(f.leaves_bound, 3)});
  t.Add({"gangs on the fewest leaves",
         std::to_string(f.fewest_leaves) + " of " + std::to_string(f.gangs),
         std::to_string(f.gangs)});
  t.Add({"leaf-sized jobs over > 1 leaf",
         std::to_string(f.small_spread) + " of " + std::to_string(f.small), "0"});
  t.Add({"gangs over > 1 spine", std::to_string(f.multi_spine), ""});
  std::cout << t.Render();
  return kExitOk;
}

}  // namespace

void AddBenchPlacementCommand(CLI::App& bench, int& exit_code) {
  auto opt = std::make_shared<PlacementBenchOptions>();
  CLI::App* cmd = AddSubcommand(
      bench, "placement",
      "Gang placement under load: 800 gangs released at once on 1,024 nodes (leaves per gang, "
      "makespan, node-time used)\n"
      "  unipool bench placement\n"
      "  unipool bench placement --max-wait 0s -o json");
  cmd->add_option("--workload", opt->workload, "jobs, one 'NODES SECONDS' per line")
      ->capture_default_str();
  cmd->add_option("--cluster", opt->cluster, "cluster file")->capture_default_str();
  cmd->add_option("--max-wait", opt->max_wait,
                  "how long a gang may wait for a compact placement (the scheduler's default, or "
                  "a duration; 0s: start as soon as it fits anywhere)")
      ->capture_default_str();
  cmd->add_option("--comm-share", opt->comm_share,
                  "share of a gang's step in collectives, for the cost of a spread start (default: "
                  "the scheduler's)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--jobs", opt->jobs_csv,
                  "write every job's start, end and groups used per tier to this CSV");
  cmd->add_flag("!--no-estimates", opt->estimates,
                "give the scheduler no runtime estimates (no reservations, no expected waits)");
  cmd->add_option("-o,--output", opt->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([opt, &exit_code] { exit_code = RunBenchPlacement(*opt); });
}

}  // namespace unipool::cli
