#include "core/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/sim/summary.h"
#include "core/sim/workload.h"
#include "core/sim/young_daly.h"
#include "core/topology/test_clusters.h"

namespace unipool::sim {
namespace {

Topology Cluster(int64_t gpus) {
  ClusterSpec spec = unipool::testing::ThreeTier(gpus);
  spec.generator->partition_tier.clear();
  return Topology::Build(spec).value();
}

SimConfig OneQueue() {
  SimConfig c;
  QueueConfig q;
  q.spec.name = "train";
  c.queues.push_back(q);
  return c;
}

PolicyConfig NoFlaky() {
  PolicyConfig p;
  p.scheduler.flaky_failures = 1 << 30;
  return p;
}

// One job using the whole cluster for ever, node failures at `rate` per
// 1,000 node-days, swapped at once; checkpoints every `interval`.
SimOutput LongJob(const Topology& topo, double rate, Duration horizon, Duration ckpt_cost,
                  Duration restart, Duration interval, uint64_t seed) {
  SimConfig c = OneQueue();
  c.horizon = horizon;
  FailureProcess f;
  f.component = Component::kNode;
  f.per_1000_node_days = rate;
  c.failures.push_back(f);
  SimJob j;
  j.id = 1;
  j.name = "pretrain";
  j.gpus = topo.num_gpus();
  j.work = Seconds(1000LL * 86400);
  j.checkpoint = CheckpointMode::kFixed;
  j.checkpoint_interval = interval;
  j.checkpoint_cost = ckpt_cost;
  j.restart_cost = restart;
  Rng rng(seed);
  Result<SimOutput> out = Simulator(topo, c, NoFlaky()).Run({j}, rng);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return std::move(out).value();
}

double Ettr(const SimOutput& o) { return ToSeconds(o.jobs[0].committed) / ToSeconds(o.end); }

// Llama 3 405B pre-training (Meta, "The Llama 3 Herd of Models", 3.3.4):
// 16,384 H100 on 2,048 nodes for 54 days, 419 unexpected interruptions,
// i.e. 3.79 per 1,000 node-days.
TEST(SimCalibrationTest, Llama3InterruptionsAndEttr) {
  const Topology topo = Cluster(16384);
  const double rate = 419.0 / (2048 * 54) * 1000;
  const Duration m = JobMtbf(rate, 2048);
  const Duration tau = YoungInterval(Seconds(30), m);
  double ettr5 = 0, ettr10 = 0, failures = 0;
  const int seeds = 6;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimOutput o = LongJob(topo, rate, Seconds(54 * 86400), Seconds(30), Seconds(300), tau, seed);
    std::printf("seed %d: %zu interruptions\n", static_cast<int>(seed), o.failures.size());
    failures += static_cast<double>(o.failures.size()) / seeds;
    // Poisson with mean 419: a single run stays within 4 sigma (+-82).
    EXPECT_NEAR(static_cast<double>(o.failures.size()), 419, 82) << "seed " << seed;
    EXPECT_EQ(o.jobs[0].failures, static_cast<int32_t>(o.failures.size()));
    ettr5 += Ettr(o) / seeds;
    ettr10 += Ettr(LongJob(topo, rate, Seconds(54 * 86400), Seconds(30), Seconds(600), tau, seed)) /
              seeds;
  }
  EXPECT_NEAR(failures, 419, 60);
  const double model5 = FirstOrderEttr(Seconds(30), m, Seconds(300));
  const double model10 = FirstOrderEttr(Seconds(30), m, Seconds(600));
  std::printf("ETTR restart 5 min: sim %.4f model %.4f; restart 10 min: sim %.4f model %.4f\n",
              ettr5, model5, ettr10, model10);
  // The first-order model counts failures per unit of useful time and
  // ignores work lost during checkpoint writes; the simulation counts both,
  // so it sits slightly below the model.
  EXPECT_GT(ettr5, 0.90);
  EXPECT_NEAR(ettr5, model5, 0.015);
  EXPECT_NEAR(ettr10, model10, 0.015);
  EXPECT_NEAR(ettr5 - ettr10, model5 - model10, 0.005);
}

// A sweep of fixed checkpoint intervals peaks at Young's interval.
TEST(SimCalibrationTest, BestFixedIntervalIsNearYoung) {
  const Topology topo = Cluster(2048);  // 256 nodes
  const double rate = 50;               // per 1,000 node-days: M = 6,750 s
  const Duration m = JobMtbf(rate, 256);
  const Duration tau = YoungInterval(Seconds(60), m);  // 900 s
  EXPECT_NEAR(ToSeconds(tau), 900, 1);
  const double factors[] = {0.25, 0.5, 1, 2, 4};
  double best = 0;
  int best_at = -1;
  for (int k = 0; k < 5; ++k) {
    double ettr = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      ettr += Ettr(LongJob(topo, rate, Seconds(200 * 86400), Seconds(60), Seconds(120),
                           Nanoseconds(static_cast<int64_t>(tau.value() * factors[k])), seed));
    }
    std::printf("interval %.0f s: ETTR %.4f\n", ToSeconds(tau) * factors[k], ettr / 3);
    if (ettr > best) best = ettr, best_at = k;
  }
  EXPECT_EQ(best_at, 2);
}

SimOutput Mixed(uint64_t seed) {
  const Topology topo = Cluster(192);
  SimConfig c = OneQueue();
  QueueConfig urgent;
  urgent.spec.name = "urgent";
  urgent.spec.guarantee = Gpus(128);
  c.queues.push_back(urgent);
  FailureProcess f;
  f.per_1000_node_days = 2000;
  f.detection = Seconds(30);
  f.repair = Seconds(3600);
  c.failures.push_back(f);
  SyntheticSpec w;
  w.horizon = Seconds(3 * 86400);
  w.arrivals_per_hour = 6;
  JobClass small{"small", 3, {{1, 1}, {4, 1}, {8, 2}}, Seconds(1800), 1.0};
  small.checkpoint = CheckpointMode::kYoungDaly;
  small.checkpoint_fixed = Seconds(20);
  JobClass big{"big", 1, {{64, 1}, {128, 1}}, Seconds(6 * 3600), 0.5};
  big.queue = 1;
  big.priority = 5;
  big.checkpoint = CheckpointMode::kFixed;
  big.checkpoint_interval = Seconds(1800);
  big.checkpoint_fixed = Seconds(60);
  big.restart_cost = Seconds(120);
  w.classes = {small, big};
  Rng rng(seed);
  std::vector<SimJob> jobs = Generate(w, rng).value();
  Result<SimOutput> out = Simulator(topo, c, NoFlaky()).Run(jobs, rng);
  EXPECT_TRUE(out.ok());
  return std::move(out).value();
}

TEST(SimulatorTest, SameSeedSameRun) {
  const SimOutput a = Mixed(3), b = Mixed(3);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].end, b.jobs[i].end);
    EXPECT_EQ(a.jobs[i].committed, b.jobs[i].committed);
  }
  EXPECT_EQ(a.failures.size(), b.failures.size());
  EXPECT_EQ(a.decisions, b.decisions);
  EXPECT_NE(Mixed(4).decisions, a.decisions);
}

TEST(SimulatorTest, EveryJobIsAccountedFor) {
  const SimOutput o = Mixed(5);
  SimConfig c = OneQueue();
  const Summary s = Summarize(o, c);
  EXPECT_EQ(s.jobs, static_cast<int64_t>(o.jobs.size()));
  EXPECT_EQ(s.done + s.infeasible + s.unfinished, s.jobs);
  EXPECT_EQ(s.unfinished, 0);  // no horizon: runs until all are done
  EXPECT_GT(o.preemptions, 0);
  EXPECT_GT(o.failures.size(), 0u);
  for (const JobRecord& j : o.jobs) {
    if (j.end.value() >= 0) {
      EXPECT_EQ(j.committed, j.work) << j.name;
    }
  }
  EXPECT_GT(s.utilization_allocated, s.utilization_useful);
  EXPECT_LE(s.goodput, 1.0);
}

TEST(WorkloadTest, FitClassRecoversTheDistributions) {
  SyntheticSpec spec;
  spec.horizon = Seconds(200 * 86400);
  spec.arrivals_per_hour = 30;
  spec.classes = {JobClass{"c", 1, {{1, 3}, {8, 1}}, Seconds(1200), 1.5}};
  Rng rng(9);
  std::vector<SimJob> jobs = Generate(spec, rng).value();
  FittedClass fit = FitClass(jobs, "fitted").value();
  EXPECT_NEAR(fit.arrivals_per_hour, 30, 0.5);
  EXPECT_NEAR(ToSeconds(fit.job_class.duration_median), 1200, 40);
  EXPECT_NEAR(fit.job_class.duration_sigma, 1.5, 0.03);
  ASSERT_EQ(fit.job_class.sizes.size(), 2u);
  const double share1 = fit.job_class.sizes[0].second /
                        (fit.job_class.sizes[0].second + fit.job_class.sizes[1].second);
  EXPECT_NEAR(share1, 0.75, 0.01);
  EXPECT_FALSE(FitClass({jobs[0]}, "x").ok());
}

TEST(SimulatorTest, PreemptedJobCheckpointsWithinGrace) {
  const Topology topo = Cluster(64);
  SimConfig c = OneQueue();
  c.queues[0].spec.grace = Seconds(120);
  SimJob low{1, "low", Seconds(0), Gpus(64)};
  low.work = Seconds(10000);
  low.checkpoint = CheckpointMode::kFixed;
  low.checkpoint_interval = Seconds(100000);  // never on its own
  low.checkpoint_cost = Seconds(60);
  SimJob high{2, "high", Seconds(1000), Gpus(64)};
  high.work = Seconds(500);
  high.priority = 10;
  Rng rng(1);
  PolicyConfig p;
  p.scheduler.min_runtime = Seconds(0);
  SimOutput o = Simulator(topo, c, p).Run({low, high}, rng).value();
  ASSERT_EQ(o.preemptions, 1);
  // low: computed 1,000 s, wrote a checkpoint in 60 s, then resumed after
  // high (500 s): it ends at 1060 + 500 + 9000 = 10,560 s, no work lost.
  EXPECT_EQ(o.jobs[1].end, Seconds(1060 + 500));
  EXPECT_EQ(o.jobs[0].end, Seconds(10560));
  EXPECT_EQ(o.jobs[0].committed, Seconds(10000));
}

// An elastic job's steps are whole tasks of the size the scheduler gives it,
// whatever the node size (they were taken as 8 GPUs on any node).
TEST(SimulatorTest, ElasticStepsAreWholeTasksOnNodesOfSixteenGpus) {
  ClusterSpec spec = unipool::testing::ThreeTier(128);
  spec.generator->partition_tier.clear();
  spec.generator->gpus_per_node = 16;
  const Topology topo = Topology::Build(spec).value();
  SimJob big{1, "big", Seconds(0), Gpus(128)};
  big.min_gpus = Gpus(32);
  big.work = Seconds(1000);
  SimJob other{2, "other", Seconds(0), Gpus(64)};
  other.work = Seconds(100);
  Rng rng(1);
  Result<SimOutput> o = Simulator(topo, OneQueue(), NoFlaky()).Run({other, big}, rng);
  ASSERT_TRUE(o.ok()) << o.status().message();
  for (const JobRecord& r : o->jobs) {
    EXPECT_FALSE(r.infeasible) << r.name;
    EXPECT_GE(r.end.value(), 0) << r.name << " never ended";
    EXPECT_EQ(r.committed, r.work) << r.name;
  }
}

// The samples a report draws: GPUs drained by maintenance (not counted as
// failed), each queue's GPUs adding up to the allocated ones, and useful
// work that only grows and ends at the run's total.
TEST(SimulatorTest, SamplesShowMaintenanceQueuesAndUsefulWork) {
  const Topology topo = Cluster(128);
  SimConfig c = OneQueue();
  QueueConfig second;
  second.spec.name = "eval";
  c.queues.push_back(second);
  c.sample_interval = Seconds(600);
  Maintenance m;
  m.tier = 1;
  m.start = Seconds(3600);
  m.length = Seconds(1800);
  c.maintenance.push_back(m);
  std::vector<SimJob> jobs;
  for (int i = 0; i < 6; ++i) {
    SimJob j{i + 1, "j" + std::to_string(i), Seconds(60 * i), Gpus(16)};
    j.work = Seconds(4 * 3600);
    j.queue = i % 2;
    j.checkpoint = CheckpointMode::kFixed;
    j.checkpoint_interval = Seconds(1200);
    j.checkpoint_cost = Seconds(30);
    jobs.push_back(j);
  }
  Rng rng(2);
  const SimOutput o = Simulator(topo, c, NoFlaky()).Run(jobs, rng).value();
  ASSERT_GT(o.series.size(), 10u);
  int64_t drained_max = 0;
  double useful = 0;
  for (const Sample& s : o.series) {
    ASSERT_EQ(s.queue_gpus.size(), 2u);
    EXPECT_EQ(s.queue_gpus[0] + s.queue_gpus[1], s.allocated_gpus) << ToSeconds(s.t);
    EXPECT_GE(s.useful_gpu_seconds, useful);
    useful = s.useful_gpu_seconds;
    drained_max = std::max(drained_max, s.drained_gpus);
    if (s.t < m.start) {
      EXPECT_EQ(s.drained_gpus, 0);
    }
    EXPECT_EQ(s.down_gpus, 0);  // no failure process: maintenance is not a failure
  }
  // One group at a time: never more than the largest group's GPUs.
  int64_t group_max = 0;
  for (int32_t g = 0; g < topo.num_groups(1); ++g) {
    const NodeId first = topo.group_first_node(1, GroupId(g));
    group_max = std::max<int64_t>(
        group_max, topo.group_num_nodes(1, GroupId(g)) * topo.node_gpus(first).value());
  }
  EXPECT_GT(drained_max, 0);
  EXPECT_LE(drained_max, group_max);
  EXPECT_LE(useful, o.useful_gpu_seconds);
  EXPECT_GT(useful, 0);
}

// One 10-hour whole-cluster job, then nine of 1 hour, all at time 0: in
// submission order every short job waits for the long one; shortest first
// (the "sjf" preset) runs them first, and the mean JCT falls from 14.5 h
// to 6.4 h. LAS orders new jobs as they came (none has run yet).
TEST(SimulatorTest, ShortestJobFirstCutsTheMeanCompletionTime) {
  const Topology topo = Cluster(64);
  std::vector<SimJob> jobs;
  for (int64_t i = 1; i <= 10; ++i) {
    SimJob j;
    j.id = i;
    j.name = "j" + std::to_string(i);
    j.gpus = topo.num_gpus();
    j.work = Seconds(i == 1 ? 36000 : 3600);
    j.runtime_estimate = j.work;
    j.checkpoint = CheckpointMode::kNone;
    jobs.push_back(j);
  }
  auto mean_jct_hours = [&](bool override, sched::QueueOrder order) {
    PolicyConfig p = NoFlaky();
    p.override_queue_order = override;
    p.queue_order = order;
    Rng rng(1);
    Result<SimOutput> out = Simulator(topo, OneQueue(), p).Run(jobs, rng);
    EXPECT_TRUE(out.ok()) << out.status().message();
    double sum = 0;
    for (const JobRecord& r : out->jobs) sum += ToSeconds(r.end - r.submit) / 3600;
    return sum / static_cast<double>(out->jobs.size());
  };
  // Submission: 10, 11, ..., 19 h; shortest first: 1, ..., 9, then 19 h.
  EXPECT_DOUBLE_EQ(mean_jct_hours(false, sched::QueueOrder::kSubmission), 14.5);
  EXPECT_DOUBLE_EQ(mean_jct_hours(true, sched::QueueOrder::kShortestFirst), 6.4);
  EXPECT_DOUBLE_EQ(mean_jct_hours(true, sched::QueueOrder::kLeastAttained), 14.5);
}

// Four pods ("halls") of 64 H100s, each capped at the IT power of 32
// training GPUs; sixteen 1-hour jobs of 32 GPUs at time 0. Uncapped they
// run in two waves of eight (mean JCT 1.5 h); capped, four at a time, one
// per hall, in four waves (mean JCT 2.5 h, makespan 4 h). The energy of
// each job is the same either way, 32 GPUs x (600 + 375) W x 1 h; the
// capped run costs two more hours of the cluster's idle draw.
TEST(SimulatorTest, AHallPowerCapHoldsBackWorkAndCostsJct) {
  auto run = [](bool capped) {
    ClusterSpec spec = unipool::testing::ThreeTier(256);
    spec.generator->partition_tier.clear();
    constexpr int64_t kHallIdle = 8 * 8 * (70 + 375), kBusy = 32 * (600 - 70);
    if (capped) spec.power.caps.push_back(PowerCapSpec{"pod", "", Watts(kHallIdle + kBusy), {}});
    spec.power.pue = 1.2;
    const Topology topo = Topology::Build(spec).value();
    std::vector<SimJob> jobs;
    for (int64_t i = 1; i <= 16; ++i) {
      SimJob j;
      j.id = i;
      j.name = "j" + std::to_string(i);
      j.gpus = Gpus(32);
      j.work = Seconds(3600);
      j.checkpoint = CheckpointMode::kNone;
      jobs.push_back(j);
    }
    Rng rng(1);
    Result<SimOutput> out = Simulator(topo, OneQueue(), NoFlaky()).Run(jobs, rng);
    EXPECT_TRUE(out.ok()) << out.status().message();
    const Summary s = Summarize(*out, OneQueue());
    EXPECT_EQ(s.done, 16);
    EXPECT_NEAR(s.job_energy_kwh.p50, 32 * 975.0 / 1000, 1e-6);
    EXPECT_NEAR(s.facility_energy_mwh, s.it_energy_mwh * 1.2, 1e-9);
    if (capped) {  // never more than the four halls' caps together
      EXPECT_LE(out->peak_it_watts, 4 * (kHallIdle + kBusy));
    }
    return s;
  };
  const Summary free = run(false), capped = run(true);
  EXPECT_DOUBLE_EQ(free.jct.mean, 1.5 * 3600);
  EXPECT_DOUBLE_EQ(capped.jct.mean, 2.5 * 3600);
  EXPECT_DOUBLE_EQ(capped.makespan_seconds, 4 * 3600);
  EXPECT_GT(free.peak_it_mw, capped.peak_it_mw);
  // The same work, and two more hours of the whole cluster's idle draw.
  EXPECT_NEAR(capped.it_energy_mwh - free.it_energy_mwh, 32 * 8 * 445 * 7200 / 3.6e9, 1e-6);
  // FLOPs/W: 16 x 32 GPU-hours of useful work at the H100's 989.4 TFLOP/s
  // dense BF16 peak, per IT joule; the cap's idle hours cost efficiency.
  const double flop = 16 * 32 * 3600 * 989.4e12;
  EXPECT_NEAR(free.peak_gflops_per_watt, flop / 1e9 / (free.it_energy_mwh * 3.6e9), 1e-6);
  EXPECT_LT(capped.peak_gflops_per_watt, free.peak_gflops_per_watt);
}

// A cluster of 80 8-GPU nodes on one storage system: 100 GB/s of writes
// in all, 25 GB/s per node; nodes with 10 GB/s of fast tier each.
Topology StorageCluster() {
  ClusterSpec spec = unipool::testing::ThreeTier(640);
  spec.generator->partition_tier.clear();
  StorageSpec st;
  st.name = "lustre";
  st.write_bytes_per_s = 100e9;
  st.client_bytes_per_s = 25e9;
  st.local_bytes_per_s = 10e9;
  spec.storage.push_back(st);
  return Topology::Build(spec).value();
}

// `n` jobs of 64 GPUs (8 nodes: 200 GB/s of client links) writing a 1 TB
// checkpoint after their first hour of two, all started at time 0.
SimOutput Checkpointers(const Topology& topo, int n, bool two_stage) {
  std::vector<SimJob> jobs;
  for (int64_t i = 1; i <= n; ++i) {
    SimJob j;
    j.id = i;
    j.name = "j" + std::to_string(i);
    j.gpus = Gpus(64);
    j.work = Seconds(7200);
    j.checkpoint = CheckpointMode::kFixed;
    j.checkpoint_interval = Seconds(3600);
    j.checkpoint_bytes = 1e12;
    j.two_stage = two_stage;
    jobs.push_back(j);
  }
  Rng rng(1);
  Result<SimOutput> out = Simulator(topo, OneQueue(), NoFlaky()).Run(jobs, rng);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return std::move(out).value();
}

// Alone, a job's checkpoint gets the whole 100 GB/s: 10 s. Ten at once
// share it, 10 GB/s each: every one takes 100 s and its job ends 100 s
// after its two hours. Two-stage, each writes its 1 TB to its nodes' fast
// tier (8 x 10 GB/s: 12.5 s) and trains on while the ten drains share the
// storage; they end before the jobs do, so nothing is lost.
TEST(SimulatorTest, CheckpointsWrittenAtOnceShareTheStorageBandwidth) {
  const Topology topo = StorageCluster();
  const SimOutput alone = Checkpointers(topo, 1, false);
  ASSERT_EQ(alone.checkpoint_stall_ns.size(), 1u);
  EXPECT_EQ(alone.checkpoint_stall_ns[0], Seconds(10).value());
  const SimOutput ten = Checkpointers(topo, 10, false);
  ASSERT_EQ(ten.checkpoint_stall_ns.size(), 10u);
  for (int64_t ns : ten.checkpoint_stall_ns) EXPECT_EQ(ns, Seconds(100).value());
  for (const JobRecord& r : ten.jobs) {
    EXPECT_EQ(r.end, Seconds(7200 + 100)) << r.name;
    EXPECT_EQ(r.checkpoints, 1);
  }
  const SimOutput staged = Checkpointers(topo, 10, true);
  for (int64_t ns : staged.checkpoint_stall_ns) EXPECT_EQ(ns, Milliseconds(12500).value());
  for (const JobRecord& r : staged.jobs) EXPECT_EQ(r.end, Seconds(7200) + Milliseconds(12500));
  EXPECT_EQ(staged.drains_lost, 0);
}

// Elastic continue with two-stage checkpoints: a failure while a fast copy
// is still draining loses none of it (the survivors hold it in memory and
// drain it again), so every GPU-second the job held is useful work, a
// checkpoint stall, or the failures' counted loss (detection, rejoin).
TEST(SimulatorTest, ElasticContinueKeepsUndrainedWorkThroughAFailure) {
  ClusterSpec spec = unipool::testing::ThreeTier(640);
  spec.generator->partition_tier.clear();
  StorageSpec st;
  st.name = "slow";
  st.write_bytes_per_s = 4e9;  // a 1 TB drain takes 250 s of each 600 s segment
  st.client_bytes_per_s = 25e9;
  st.local_bytes_per_s = 10e9;
  spec.storage.push_back(st);
  const Topology topo = Topology::Build(spec).value();
  SimConfig c = OneQueue();
  FailureProcess f;
  f.mtbf = Seconds(20000);  // per node: ~40 failures of the job's 8 nodes
  f.detection = Seconds(60);
  c.failures.push_back(f);
  SimJob j;
  j.id = 1;
  j.name = "elastic";
  j.gpus = Gpus(64);
  j.min_gpus = Gpus(32);
  j.work = Seconds(100000);
  j.checkpoint = CheckpointMode::kFixed;
  j.checkpoint_interval = Seconds(600);
  j.checkpoint_bytes = 1e12;
  j.two_stage = true;
  PolicyConfig p = NoFlaky();
  p.elastic_continue = true;
  p.elastic_step = Gpus(8);
  Rng rng(7);
  Result<SimOutput> out = Simulator(topo, c, p).Run({j}, rng);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->jobs[0].committed, j.work);
  EXPECT_GT(out->drains_lost, 5) << "failures during drains";
  double stalls = 0;
  for (int64_t ns : out->checkpoint_stall_ns) stalls += ns * 1e-9 * 64;
  const double unaccounted = out->allocated_gpu_seconds - out->useful_gpu_seconds -
                             static_cast<double>(out->failed_lost_gpu_seconds) - stalls;
  EXPECT_LT(std::abs(unaccounted), 0.002 * out->allocated_gpu_seconds)
      << "allocated " << out->allocated_gpu_seconds << ", useful " << out->useful_gpu_seconds
      << ", lost " << out->failed_lost_gpu_seconds << ", stalls " << stalls;
}

TEST(SummaryTest, TheTablesQuantilesAreTheChartsQuantiles) {
  std::vector<double> v = {5, 1, 9, 3, 7, 2, 8};
  const Percentiles p = PercentilesOf(v);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(p.p50, QuantileOfSorted(v, 0.5));
  EXPECT_EQ(p.p90, QuantileOfSorted(v, 0.9));
  EXPECT_EQ(p.p99, QuantileOfSorted(v, 0.99));
  EXPECT_EQ(QuantileOfSorted(v, 0), 1);
  EXPECT_EQ(QuantileOfSorted(v, 1), 9);
}

}  // namespace
}  // namespace unipool::sim
