// `unipool bench placement`: how compactly the scheduler places gangs
// under load, on one fixed workload (testdata/bench/README.md): 800 gang
// jobs of 1-64 nodes released at once on 1,024 nodes in 64 leaves. The
// workload runs through the simulator (the same scheduler the server runs)
// or, with --live, on a server without agents that the command drives as
// its agents would; it prints the makespan, the mean wait, the node-time
// used and the placement figures, each beside its lower bound.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/bench_placement.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "core/sim/simulator.h"
#include "core/sim/summary.h"
#include "io/cluster_reader.h"
#include "io/resource_tables.h"
#include "io/sim_writer.h"
#include "io/table.h"
#include "io/text.h"
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
  bool live = false;       // drive a server instead of the simulator
  ClientConfig client;
  std::string queue = "default";
};

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A run's figures, and what the output says about where they came from.
struct Outcome {
  placement::Figures f;
  nlohmann::ordered_json extra;  // mode-specific fields, after the figures in JSON
  std::string how;               // the text header's tail
};

Result<Outcome> RunSimulated(const PlacementBenchOptions& opt, const Topology& topo,
                             const std::vector<placement::GangJob>& work) {
  const int32_t k = static_cast<int32_t>(topo.node_gpus(NodeId(0)).value());
  std::vector<sim::SimJob> jobs;
  for (size_t i = 0; i < work.size(); ++i) {
    sim::SimJob j;
    j.id = static_cast<int64_t>(i) + 1;
    j.name = "gang-" + std::to_string(i + 1);
    j.submit = Time(0);
    j.gpus = Gpus(work[i].nodes * k);
    j.task_gpus = k;
    j.work = Seconds(work[i].seconds);
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
      return InvalidArgument("--max-wait: expected a duration (0s, 10s, 1m), got '" + opt.max_wait +
                             "'");
    }
    policy.scheduler.compact_max_wait = d;
  }
  if (opt.comm_share >= 0) policy.scheduler.comm_share = opt.comm_share;
  sim::Simulator simulator(topo, config, policy);
  Rng rng(1);
  Result<sim::SimOutput> out = simulator.Run(jobs, rng);
  if (!out.ok()) return out.status();
  if (!opt.jobs_csv.empty()) {
    std::vector<std::string> tiers;
    for (int t = 0; t < topo.num_tiers(); ++t) tiers.push_back(topo.tier(t).name);
    std::ofstream csv(opt.jobs_csv, std::ios::binary);
    csv << io::SimJobsCsv({io::SimRun{sim::Summarize(*out, config), &*out}}, tiers, {"bench"});
    if (!csv) return Unavailable("--jobs " + opt.jobs_csv + ": cannot write");
  }
  const std::string max_wait = opt.max_wait == "default"
                                   ? io::HumanDuration(static_cast<int64_t>(
                                         ToSeconds(sched::SchedulerOptions{}.compact_max_wait)))
                                   : opt.max_wait;
  Outcome o;
  o.f = placement::Measure(topo, work, out->jobs);
  o.extra = {{"mode", "sim"},
             {"maxWait", max_wait},
             {"estimates", opt.estimates},
             {"cycles", out->cycles},
             {"decisions", out->decisions}};
  o.how =
      "simulated, compact wait up to " + max_wait + (opt.estimates ? "" : ", no runtime estimates");
  return o;
}

Result<Outcome> RunOnServer(PlacementBenchOptions& opt, const Topology& topo,
                            const std::vector<placement::GangJob>& work) {
  if (opt.max_wait != "default" || opt.comm_share >= 0 || !opt.estimates || !opt.jobs_csv.empty()) {
    return InvalidArgument(
        "--live: --max-wait, --comm-share, --no-estimates and --jobs are for the simulator; the "
        "server schedules with its own settings");
  }
  if (Status st = ResolveClientConfig(&opt.client); !st.ok()) return st;
  placement::LiveOptions live;
  live.queue = opt.queue;
  Result<placement::LiveRun> run = placement::RunLive(opt.client, topo, work, live);
  if (!run.ok()) return run.status();
  Outcome o;
  o.f = placement::Measure(topo, work, run->jobs);
  o.extra = {{"mode", "live"},
             {"server", opt.client.server},
             {"submitMilliseconds", run->submit_ms},
             {"endedByTimeLimit", run->late}};
  o.how = "live on " + opt.client.server + " (submitted in " + std::to_string(run->submit_ms) +
          " ms; " + std::to_string(run->late) + " ended by their time limit)";
  return o;
}

void Print(const PlacementBenchOptions& opt, const Topology& topo, size_t jobs, const Outcome& o) {
  const placement::Figures& f = o.f;
  if (opt.output == "json") {
    nlohmann::ordered_json j{{"cluster", topo.name()},
                             {"jobs", jobs},
                             {"makespanSeconds", io::Tidy(f.makespan_s)},
                             {"makespanBoundSeconds", io::Tidy(f.makespan_bound_s)},
                             {"meanWaitSeconds", io::Tidy(f.mean_wait_s)},
                             {"nodeTimeUsed", io::Tidy(f.node_time_used)},
                             {"multiNodeGangs", f.gangs},
                             {"leavesPerGang", io::Tidy(f.leaves_per_gang)},
                             {"leavesPerGangBound", io::Tidy(f.leaves_bound)},
                             {"fewestLeaves", f.fewest_leaves},
                             {"leafSizedJobs", f.small},
                             {"leafSizedJobsSpread", f.small_spread},
                             {"gangsOverOneSpine", f.multi_spine}};
    j.update(o.extra);
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "workload " << opt.workload << ": " << jobs << " gangs on cluster " << topo.name()
            << " (" << topo.num_nodes() << " nodes), " << o.how << "\n";
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
}

int RunBenchPlacement(PlacementBenchOptions& opt) {
  Result<Topology> topo = io::LoadTopology(opt.cluster);
  if (!topo.ok()) {
    std::cerr << "error: " << topo.status().message() << "\n";
    return kExitBadInput;
  }
  Result<std::vector<placement::GangJob>> work = placement::ReadWorkload(opt.workload);
  if (!work.ok()) {
    std::cerr << "error: " << work.status().message() << "\n";
    return kExitBadInput;
  }
  for (size_t i = 0; i < work->size(); ++i) {
    if ((*work)[i].nodes > topo->num_nodes()) {
      std::cerr << "error: " << opt.workload << ": job " << i + 1 << " wants " << (*work)[i].nodes
                << " nodes; the cluster has " << topo->num_nodes() << "\n";
      return kExitBadInput;
    }
  }
  Result<Outcome> o = opt.live ? RunOnServer(opt, *topo, *work) : RunSimulated(opt, *topo, *work);
  if (!o.ok()) {
    std::cerr << "error: " << o.status().message() << "\n";
    return o.status().code() == StatusCode::kInvalidArgument ? kExitBadInput
           : opt.live                                        ? ExitCodeFor(o.status())
                                                             : kExitFailed;
  }
  Print(opt, *topo, work->size(), *o);
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
      "  unipool bench placement --max-wait 0s -o json\n"
      "  unipool server --cluster bench/clusters/gang-1024.yaml --assume-nodes-up --init ... &\n"
      "  unipool bench placement --live --server http://127.0.0.1:8460");
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
  cmd->add_flag(
      "--live", opt->live,
      "run the workload on a server (--server, else $UNIPOOL_SERVER) that runs the same "
      "cluster without agents (--assume-nodes-up) and nothing else: submit every job, end "
      "each by report its run length after it starts");
  cmd->add_option("--server", opt->client.server, "with --live: the server's URL");
  cmd->add_option("--token", opt->client.token,
                  "with --live: an admin token (else $UNIPOOL_TOKEN)");
  cmd->add_option("--queue", opt->queue, "with --live: the queue to submit to")
      ->capture_default_str();
  cmd->add_option("-o,--output", opt->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([opt, &exit_code] { exit_code = RunBenchPlacement(*opt); });
}

}  // namespace unipool::cli
