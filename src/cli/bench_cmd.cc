// `unipool bench sched`: the scheduler's speed and placement quality on a
// large cluster, reproducible with one command. Fills the cluster to the
// target occupancy with a job mix, then replays "one job ends, one arrives,
// schedule" and times every cycle; then times large gangs; then repeats the
// workload with a topology-unaware first-fit placer to compare placements.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/process_info.h"
#include "core/sched/scheduler.h"
#include "io/cluster_reader.h"
#include "io/summary_writer.h"
#include "io/table.h"

namespace unipool::cli {
namespace {

using sched::Decision;
using sched::JobId;
using sched::JobSpec;
using sched::Scheduler;
using sched::StartJob;
using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string cluster = "examples/clusters/super-1m.yaml";
  double occupancy = 0.9;
  int64_t decisions = 20000;
  std::string mix = "1:40,2:12,4:15,8:22,16:6,32:3,64:1,128:0.5,256:0.3,512:0.12,1024:0.08";
  uint64_t seed = 1;
  int64_t gang = 65536;
  int gang_samples = 5;
  bool first_fit = true;
  int64_t first_fit_decisions = 2000;
  std::string output = "text";
};

struct MixEntry {
  int64_t gpus;
  double weight;
};

Result<std::vector<MixEntry>> ParseMix(const std::string& text) {
  std::vector<MixEntry> mix;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.find(':');
    MixEntry e{0, 0};
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      size_t used = 0;
      e.gpus = std::stoll(item.substr(0, colon), &used);
      e.weight = std::stod(item.substr(colon + 1));
    } catch (const std::exception&) {
      return InvalidArgument("--mix: expected GPUS:WEIGHT[,GPUS:WEIGHT...], got '" + item + "'");
    }
    if (e.gpus < 1 || e.weight <= 0) {
      return InvalidArgument("--mix: '" + item + "' needs GPUs >= 1 and a weight > 0");
    }
    mix.push_back(e);
  }
  if (mix.empty()) return InvalidArgument("--mix: empty");
  return mix;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

// One run of the workload against one placer.
class Workload {
 public:
  Workload(const Topology& topo, const BenchOptions& opt, const std::vector<MixEntry>& mix,
           sched::PlacerKind placer)
      : topo_(topo), opt_(opt), mix_(mix), rng_(opt.seed) {
    sched::SchedulerOptions so;
    so.placer = placer;
    s_ = std::make_unique<Scheduler>(topo, so);
    sched::QueueSpec q;
    q.name = "bench";
    queue_ = s_->queues().Add(q).value();
    for (const MixEntry& e : mix) total_weight_ += e.weight;
  }

  Scheduler& scheduler() { return *s_; }

  JobSpec NextJob() {
    std::uniform_real_distribution<double> pick(0, total_weight_);
    double x = pick(rng_);
    int64_t gpus = mix_.back().gpus;
    for (const MixEntry& e : mix_) {
      if ((x -= e.weight) < 0) {
        gpus = e.gpus;
        break;
      }
    }
    JobSpec j;
    j.id = JobId(next_id_++);
    j.queue = queue_;
    j.gpus = Gpus(gpus);
    j.runtime_estimate = Seconds(600 + static_cast<int64_t>(rng_() % 86400));
    return j;
  }

  void Absorb(const std::vector<Decision>& ds) {
    for (const Decision& d : ds) {
      if (const auto* st = std::get_if<StartJob>(&d)) {
        running_.push_back(st->job);
        Record(st->placement);
      }
    }
  }

  // Submits jobs until the target occupancy is reached.
  void Fill() {
    const int64_t target = static_cast<int64_t>(opt_.occupancy * topo_.num_gpus().value());
    int64_t stuck = 0;
    while (s_->allocated_gpus().value() < target && stuck < 50) {
      const int64_t before = s_->allocated_gpus().value();
      for (int i = 0; i < 1000; ++i) (void)s_->Submit(NextJob(), now_);
      Absorb(s_->Schedule(now_));
      stuck = s_->allocated_gpus().value() == before ? stuck + 1 : 0;
    }
  }

  // One job ends, one arrives, one cycle; returns seconds per cycle.
  std::vector<double> Churn(int64_t cycles, std::map<int64_t, std::vector<double>>* by_size) {
    std::vector<double> times;
    const int64_t target = static_cast<int64_t>(opt_.occupancy * topo_.num_gpus().value());
    for (int64_t i = 0; i < cycles; ++i) {
      now_ += Seconds(1);
      const auto t0 = Clock::now();
      if (s_->allocated_gpus().value() >= target && !running_.empty()) {
        const size_t k = rng_() % running_.size();
        std::swap(running_[k], running_.back());
        (void)s_->Finish(running_.back(), now_);
        running_.pop_back();
      }
      const JobSpec j = NextJob();
      (void)s_->Submit(j, now_);
      std::vector<Decision> ds = s_->Schedule(now_);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      times.push_back(dt);
      if (by_size) (*by_size)[j.gpus.value()].push_back(dt);
      decisions_ += static_cast<int64_t>(ds.size());
      Absorb(ds);
    }
    return times;
  }

  // Frees one partition's jobs, places a gang of `gpus` there; returns seconds.
  std::optional<double> Gang(int64_t gpus, int32_t partition) {
    std::vector<JobId> keep;
    for (JobId id : running_) {
      const sched::JobInfo* info = s_->Find(id);
      if (info && info->partition == partition) {
        (void)s_->Finish(id, now_);
      } else {
        keep.push_back(id);
      }
    }
    running_ = keep;
    JobSpec j;
    j.id = JobId(next_id_++);
    j.queue = queue_;
    j.gpus = Gpus(gpus);
    j.partition = partition;
    j.priority = 1000;
    now_ += Seconds(1);
    (void)s_->Submit(j, now_);
    const auto t0 = Clock::now();
    std::vector<Decision> ds = s_->Schedule(now_);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    bool placed = false;
    for (const Decision& d : ds) {
      if (const auto* st = std::get_if<StartJob>(&d)) placed |= st->job == j.id;
    }
    Absorb(ds);
    if (!placed) return std::nullopt;
    (void)s_->Finish(j.id, now_);
    running_.erase(std::remove(running_.begin(), running_.end(), j.id), running_.end());
    return dt;
  }

  int64_t decisions() const { return decisions_; }

  // Placement quality of multi-node gangs.
  struct Quality {
    int64_t gangs = 0;
    double span_tier_sum = 0;  // tiers crossed: span tier + 1
    double leaves_sum = 0;     // groups used at tier 1
    int64_t ideal = 0;         // used the fewest leaves possible
  };
  const Quality& quality() const { return quality_; }

 private:
  void Record(const sched::Placement& p) {
    if (p.tasks.size() < 2) return;
    quality_.gangs++;
    quality_.span_tier_sum += p.score.span_tier + 1;
    const int leaf = std::min(1, topo_.num_tiers() - 1);
    quality_.leaves_sum += p.score.groups_used[leaf];
    const int64_t leaf_gpus = topo_.group_gpus(leaf, GroupId(0)).value();
    const int64_t fewest = (p.gpus().value() + leaf_gpus - 1) / leaf_gpus;
    quality_.ideal += p.score.groups_used[leaf] <= fewest;
  }

  const Topology& topo_;
  const BenchOptions& opt_;
  const std::vector<MixEntry>& mix_;
  std::mt19937_64 rng_;
  std::unique_ptr<Scheduler> s_;
  sched::QueueId queue_;
  double total_weight_ = 0;
  int64_t next_id_ = 1;
  Time now_ = Seconds(0);
  std::vector<JobId> running_;
  int64_t decisions_ = 0;
  Quality quality_;
};

// Fragmentation: the share of free GPUs in wholly free nodes, and the
// largest free block (whole nodes) within one group of each tier.
nlohmann::ordered_json Fragmentation(const Scheduler& s) {
  const sched::Pool& pool = s.pool();
  const Topology& topo = pool.topology();
  const int top = topo.top_tier();
  const int64_t free = pool.Free(top, GroupId(0));
  const int64_t whole = pool.Whole(top, GroupId(0)) * pool.max_node_gpus();
  nlohmann::ordered_json j;
  j["freeGpus"] = free;
  j["freeInWholeNodes"] = free > 0 ? double(whole) / free : 0.0;
  for (int t = 0; t <= top; ++t) {
    j["largestBlock"][topo.tier(t).name] = sched::LargestBlock(pool, t + 1, pool.max_node_gpus());
  }
  return j;
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  return buf;
}

int RunBenchSched(const BenchOptions& opt) {
  Result<Topology> topo = io::LoadTopology(opt.cluster);
  if (!topo.ok()) {
    std::cerr << "error: " << topo.status().message() << "\n";
    return kExitBadInput;
  }
  Result<std::vector<MixEntry>> mix = ParseMix(opt.mix);
  if (!mix.ok()) {
    std::cerr << "error: " << mix.status().message() << "\n";
    return kExitBadInput;
  }
  const bool tty = opt.output == "text";
  auto say = [&](const std::string& s) {
    if (tty) std::cerr << s << std::flush;
  };
  nlohmann::ordered_json out;
  out["cluster"] = topo->name();
  out["gpus"] = topo->num_gpus().value();
  out["seed"] = opt.seed;
  out["occupancyTarget"] = opt.occupancy;

  // 1. Topology-aware scheduler.
  say("filling to " + std::to_string(static_cast<int>(opt.occupancy * 100)) + "%... ");
  Workload w(*topo, opt, *mix, sched::PlacerKind::kTopology);
  const auto fill0 = Clock::now();
  w.Fill();
  const double fill_s = std::chrono::duration<double>(Clock::now() - fill0).count();
  Scheduler& s = w.scheduler();
  say("done in " + std::to_string(fill_s) + " s\n");
  out["fill"] = {{"seconds", fill_s},
                 {"runningJobs", s.running_count()},
                 {"pendingJobs", s.pending_count()},
                 {"allocatedGpus", s.allocated_gpus().value()},
                 {"occupancy", double(s.allocated_gpus().value()) / topo->num_gpus().value()}};

  say("churn: " + std::to_string(opt.decisions) + " cycles... ");
  std::map<int64_t, std::vector<double>> by_size;
  const std::vector<double> times = w.Churn(opt.decisions, &by_size);
  double total = 0;
  for (double t : times) total += t;
  say("done\n");
  out["churn"] = {{"cycles", opt.decisions},
                  {"decisions", w.decisions()},
                  {"seconds", total},
                  {"decisionsPerSecond", w.decisions() / total},
                  {"cyclesPerSecond", opt.decisions / total},
                  {"cycleP50Ms", Percentile(times, 0.5) * 1e3},
                  {"cycleP99Ms", Percentile(times, 0.99) * 1e3},
                  {"runningJobs", s.running_count()},
                  {"occupancy", double(s.allocated_gpus().value()) / topo->num_gpus().value()}};
  nlohmann::ordered_json classes = nlohmann::ordered_json::array();
  for (const auto& [gpus, v] : by_size) {
    classes.push_back({{"gpus", gpus},
                       {"cycles", v.size()},
                       {"p50Ms", Percentile(v, 0.5) * 1e3},
                       {"p99Ms", Percentile(v, 0.99) * 1e3}});
  }
  out["bySize"] = classes;

  out["fragmentation"]["topology"] = Fragmentation(s);

  // 2. Large gangs, one partition freed at a time.
  std::vector<double> gang_times;
  const int32_t parts = static_cast<int32_t>(topo->partitions().size());
  for (int i = 0; i < opt.gang_samples && opt.gang > 0; ++i) {
    say("gang of " + std::to_string(opt.gang) + " GPUs, sample " + std::to_string(i + 1) + "\n");
    if (std::optional<double> t = w.Gang(opt.gang, parts > 1 ? i % parts : -1))
      gang_times.push_back(*t);
  }
  out["gang"] = {
      {"gpus", opt.gang},
      {"placed", gang_times.size()},
      {"p50Ms", Percentile(gang_times, 0.5) * 1e3},
      {"maxMs",
       gang_times.empty() ? 0 : *std::max_element(gang_times.begin(), gang_times.end()) * 1e3}};
  const Workload::Quality& q = w.quality();
  out["quality"]["topology"] = {
      {"gangs", q.gangs},
      {"meanTiersCrossed", q.span_tier_sum / std::max<int64_t>(1, q.gangs)},
      {"meanLeavesPerGang", q.leaves_sum / std::max<int64_t>(1, q.gangs)},
      {"fewestLeavesShare", double(q.ideal) / std::max<int64_t>(1, q.gangs)}};
  out["peakRssBytes"] = PeakRssBytes();

  // 3. The same workload with first-fit placement.
  if (opt.first_fit) {
    say("first-fit baseline... ");
    Workload base(*topo, opt, *mix, sched::PlacerKind::kFirstFit);
    base.Fill();
    base.Churn(opt.first_fit_decisions, nullptr);
    const Workload::Quality& b = base.quality();
    out["quality"]["firstFit"] = {
        {"gangs", b.gangs},
        {"meanTiersCrossed", b.span_tier_sum / std::max<int64_t>(1, b.gangs)},
        {"meanLeavesPerGang", b.leaves_sum / std::max<int64_t>(1, b.gangs)},
        {"fewestLeavesShare", double(b.ideal) / std::max<int64_t>(1, b.gangs)}};
    out["fragmentation"]["firstFit"] = Fragmentation(base.scheduler());
    say("done\n");
  }

  if (opt.output == "json") {
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << "cluster " << topo->name() << ": " << io::Thousands(topo->num_gpus().value())
            << " GPUs; seed " << opt.seed << "\n";
  std::cout << "fill: " << io::Thousands(out["fill"]["runningJobs"]) << " running jobs, occupancy "
            << out["fill"]["occupancy"].get<double>() * 100 << "%\n";
  std::cout << "churn: " << opt.decisions << " cycles, "
            << static_cast<int64_t>(out["churn"]["decisionsPerSecond"].get<double>())
            << " decisions/s, cycle p50 " << Ms(Percentile(times, 0.5)) << ", p99 "
            << Ms(Percentile(times, 0.99)) << "\n\n";
  io::Table t({"JOB GPUS", "CYCLES", "P50", "P99"});
  for (const auto& c : classes) {
    t.Add({std::to_string(c["gpus"].get<int64_t>()), std::to_string(c["cycles"].get<size_t>()),
           Ms(c["p50Ms"].get<double>() / 1e3), Ms(c["p99Ms"].get<double>() / 1e3)});
  }
  std::cout << t.Render() << "\n";
  std::cout << "gang of " << opt.gang << " GPUs: " << gang_times.size() << " placed, max "
            << Ms(out["gang"]["maxMs"].get<double>() / 1e3) << "\n";
  io::Table qt({"PLACER", "GANGS", "TIERS CROSSED", "LEAVES/GANG", "FEWEST LEAVES"});
  for (const char* k : {"topology", "firstFit"}) {
    if (!out["quality"].contains(k)) continue;
    const auto& x = out["quality"][k];
    char a[32], b[32], c[32];
    std::snprintf(a, sizeof a, "%.2f", x["meanTiersCrossed"].get<double>());
    std::snprintf(b, sizeof b, "%.2f", x["meanLeavesPerGang"].get<double>());
    std::snprintf(c, sizeof c, "%.1f%%", x["fewestLeavesShare"].get<double>() * 100);
    qt.Add({k, io::Thousands(x["gangs"].get<int64_t>()), a, b, c});
  }
  std::cout << qt.Render();
  for (const char* k : {"topology", "firstFit"}) {
    if (!out["fragmentation"].contains(k)) continue;
    const auto& f = out["fragmentation"][k];
    std::cout << k << ": " << io::Thousands(f["freeGpus"].get<int64_t>()) << " free GPUs, "
              << static_cast<int>(f["freeInWholeNodes"].get<double>() * 100)
              << "% in whole nodes; largest free block";
    for (const auto& [tier, gpus] : f["largestBlock"].items()) {
      std::cout << " " << tier << " " << io::Thousands(gpus.get<int64_t>());
    }
    std::cout << "\n";
  }
  std::cout << "peak RSS " << out["peakRssBytes"].get<int64_t>() / (1 << 20) << " MiB\n";
  return kExitOk;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Reproducible benchmarks of unipool's own parts");
  bench->require_subcommand(1);
  AddBenchApiCommand(*bench, exit_code);
  AddBenchPlacementCommand(*bench, exit_code);
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "sched", "Scheduler speed and placement quality at ~90% occupancy of a large cluster");
  cmd->add_option("--cluster", opt->cluster, "cluster file")->capture_default_str();
  cmd->add_option("--occupancy", opt->occupancy, "target share of GPUs in use")
      ->check(CLI::Range(0.01, 0.99))
      ->capture_default_str();
  cmd->add_option("--decisions", opt->decisions,
                  "churn cycles to time (one end + one arrival each)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  cmd->add_option("--mix", opt->mix, "job sizes and weights, GPUS:WEIGHT,...")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "random seed")->capture_default_str();
  cmd->add_option("--gang", opt->gang, "GPUs of the large gang to time (0: skip)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--gang-samples", opt->gang_samples, "large gangs to time")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--first-fit-decisions", opt->first_fit_decisions,
                  "churn cycles for the first-fit baseline")
      ->capture_default_str();
  cmd->add_flag("!--no-first-fit", opt->first_fit, "skip the first-fit baseline");
  cmd->add_option("-o,--output", opt->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([opt, &exit_code] { exit_code = RunBenchSched(*opt); });
}

}  // namespace unipool::cli
