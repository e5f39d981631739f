// Simulator: a deterministic discrete-event simulation of a cluster that
// drives the real scheduler (sched::Scheduler, the same code the server
// runs) with a virtual clock.
//
// Events are ordered by time, and FIFO among equal times. After the events
// of one instant the scheduler runs a cycle and its decisions are applied:
// jobs start (restart cost, then compute in segments, each followed by a
// checkpoint write), are preempted (they checkpoint on SIGTERM if the grace
// period allows), resize, or are requeued after failures (the work since
// their last checkpoint is lost). Failure processes take components down;
// after the detection delay the scheduler is told; after the repair time the
// nodes come back. Identical inputs and seed give identical outputs.
//
// No I/O and no clock: a wall-clock function may be injected only to
// measure the scheduler's own cost, and a progress callback to report
// progress; neither changes the simulation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/base/rng.h"
#include "core/base/status.h"
#include "core/sched/scheduler.h"
#include "core/sim/model.h"
#include "core/topology/topology.h"

namespace unipool::sim {

// The fate of one job.
struct JobRecord {
  int64_t id = 0;
  std::string name;
  int32_t job_class = 0;
  int32_t queue = 0;
  Gpus gpus;
  Time submit;
  Time first_start = Time(-1);
  Time end = Time(-1);  // completion; -1: not done
  Duration work;
  Duration committed;    // work saved by checkpoints or completion
  int32_t failures = 0;  // interruptions by failures
  int32_t preemptions = 0;
  int64_t lost_gpu_seconds = 0;
  Duration held;                 // wall time holding GPUs
  Duration checkpoint_interval;  // of its last run (Young-Daly's, a fixed one); 0: none
  double energy_joules = 0;      // IT energy of its runs (sched::Scheduler::EnergyJoules)
  // Checkpoints it wrote to storage (SimJob::checkpoint_bytes) and the time
  // its training stood still for them.
  int32_t checkpoints = 0;
  Duration checkpoint_stall;
  bool infeasible = false;
  // Its first placement: nodes, and groups used at each tier (leaves,
  // spines...); 0 and empty until it starts.
  int32_t nodes = 0;
  std::vector<int32_t> groups_used;
  // The fewest groups per tier its nodes could fit in (its nodes over a
  // group's), for comparison with groups_used.
  std::vector<int32_t> groups_needed;
};

struct Sample {
  Time t;
  int64_t allocated_gpus = 0;
  int64_t down_gpus = 0;
  int64_t running_jobs = 0;
  int64_t pending_jobs = 0;
  int64_t failures = 0;             // so far
  int64_t lost_gpu_seconds = 0;     // so far, failures and preemptions
  double useful_gpu_seconds = 0;    // so far: work kept (checkpointed or done) x its GPUs
  int64_t drained_gpus = 0;         // drained for maintenance (down_gpus: failed)
  int64_t it_watts = 0;             // IT power the cluster draws (sched::PowerBudget)
  std::vector<int64_t> queue_gpus;  // allocated, per queue of SimConfig::queues
};

struct FailureRecord {
  Time t;
  int32_t process = 0;  // index into SimConfig::failures
  int64_t nodes = 0;
  int64_t jobs_hit = 0;
};

struct SimOutput {
  std::string policy;
  Time end;  // simulated time reached
  int64_t cluster_gpus = 0;
  // The lowest tier whose groups hold more than one node ("leaf", "rack"),
  // where the summary counts gangs' groups; -1 when there is none.
  int32_t gang_tier = -1;
  std::string gang_tier_name;
  std::vector<JobRecord> jobs;  // in job order
  std::vector<Sample> series;
  std::vector<FailureRecord> failures;
  int64_t preemptions = 0;
  int64_t preempted_lost_gpu_seconds = 0;
  int64_t failed_lost_gpu_seconds = 0;
  double allocated_gpu_seconds = 0;
  double useful_gpu_seconds = 0;
  int64_t cycles = 0;
  int64_t decisions = 0;
  std::vector<int64_t> cycle_wall_ns;  // when a clock was injected
  int64_t cordoned_nodes = 0;
  int64_t events = 0;
  double down_gpu_seconds = 0;
  // IT power: energy over the run (the cluster's draw integrated), its
  // peak, and the facility's overhead factor (Topology::pue).
  double it_energy_joules = 0;
  int64_t peak_it_watts = 0;
  double pue = 1;
  // Dense BF16 peak of the cluster's GPUs, FLOP/s, averaged over its GPUs
  // (exact for a cluster of one part): what a useful GPU-second is worth.
  double peak_flops_per_gpu = 0;
  // How long each checkpoint to storage stalled its job (SimJob::
  // checkpoint_bytes), in ns; and two-stage drains that a failure cut off.
  std::vector<int64_t> checkpoint_stall_ns;
  int64_t drains_lost = 0;
  int64_t stragglers = 0;                // slow-node onsets
  int64_t straggler_replacements = 0;    // jobs moved off a slow node
  sched::SchedulerStats scheduler;       // the scheduler's own counters
  std::vector<int64_t> lost_by_process;  // failure lost work per process
};

struct SimHooks {
  std::function<int64_t()> wall_clock_ns;     // optional
  std::function<void(double done)> progress;  // optional, 0..1
};

class Simulator {
 public:
  // `topo` must outlive the simulator.
  Simulator(const Topology& topo, SimConfig config, PolicyConfig policy, SimHooks hooks = {});

  // Runs the jobs (sorted by submit time, then id) to the horizon or until
  // every job is done. Errors: no queues, a job naming an unknown queue.
  Result<SimOutput> Run(std::vector<SimJob> jobs, Rng& rng);

 private:
  struct Impl;
  const Topology& topo_;
  SimConfig config_;
  PolicyConfig policy_;
  SimHooks hooks_;
};

}  // namespace unipool::sim
