// What a simulation is made of, as plain data: jobs (from a trace or the
// synthetic generator), failure processes, maintenance windows, and the
// policies to compare. The io layer builds these from files; the Simulator
// runs them. No I/O here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/units.h"
#include "core/sched/scheduler.h"

namespace unipool::sim {

enum class CheckpointMode {
  kNone,       // never checkpoints: an interruption loses everything
  kFixed,      // every `interval` of compute
  kYoungDaly,  // Daly's interval from the job's own MTBF and checkpoint cost
};

// One job to simulate. `work` is compute time at full size.
struct SimJob {
  int64_t id = 0;
  std::string name;  // e.g. the trace's job id
  Time submit;
  Gpus gpus;
  Gpus min_gpus;  // elastic when > 0: progress is proportional to GPUs held
  int32_t task_gpus = 0;
  Duration work;
  int32_t queue = 0;  // index into SimConfig::queues
  int32_t priority = 0;
  bool preemptible = true;
  bool span_partitions = false;  // may use several partitions at once
  int32_t job_class = 0;  // index into the class table, for reports
  CheckpointMode checkpoint = CheckpointMode::kNone;
  Duration checkpoint_interval;  // kFixed
  Duration checkpoint_cost;      // time to write one
  // With a storage system in the cluster file (Topology::storage): the
  // state a checkpoint writes, bytes. Its write then takes what the shared
  // storage gives at that moment (SharedBandwidth), and each restart reads
  // it back; `checkpoint_cost` is not used.
  double checkpoint_bytes = 0;
  // Two-stage: write to the nodes' fast tier (host memory or NVMe) and go
  // on training while it drains to storage; a failure before the drain
  // ends falls back to the checkpoint before.
  bool two_stage = false;
  Duration restart_cost;         // from start to useful work, every start
  Duration runtime_estimate;     // given to the scheduler; 0 = none
};

// A class of synthetic jobs.
struct JobClass {
  std::string name;
  double share = 1;  // relative share of arrivals
  std::vector<std::pair<int64_t, double>> sizes;  // (GPUs, weight)
  Duration duration_median;                        // log-normal
  double duration_sigma = 1.0;
  Duration duration_max;                           // 0 = none
  int32_t queue = 0;
  int32_t priority = 0;
  bool preemptible = true;
  bool span_partitions = false;
  double elastic_min = 0;  // > 0: min GPUs = share of GPUs (rounded to tasks)
  CheckpointMode checkpoint = CheckpointMode::kNone;
  Duration checkpoint_interval;
  // Checkpoint write cost from model state and storage bandwidth:
  // state_bytes_per_gpu x GPUs / storage_bytes_per_s, plus a fixed part.
  double state_bytes_per_gpu = 0;
  double storage_bytes_per_s = 0;
  Duration checkpoint_fixed;
  bool two_stage = false;  // SimJob::two_stage
  Duration restart_cost;
  bool estimate = true;  // give the scheduler its true runtime as estimate
};

struct SyntheticSpec {
  Duration horizon;              // arrivals from 0 to horizon
  double arrivals_per_hour = 0;  // Poisson
  std::vector<JobClass> classes;
};

enum class Component { kGpu, kNode, kNic, kLeafSwitch, kSpineSwitch, kPowerDomain };
const char* ComponentName(Component c);

// Failures of one kind of component. The rate is per 1,000 node-days of the
// whole cluster (as the Llama 3 report gives it) or, when mtbf > 0, per
// component instance. A failure takes down every node under the instance.
struct FailureProcess {
  Component component = Component::kNode;
  std::string cause;                 // label in reports; default: component
  double per_1000_node_days = 0;
  Duration mtbf;                     // per instance; overrides the rate
  double weibull_shape = 1.0;        // 1 = exponential
  int tier = -1;                     // instances: nodes (-1) or groups of a tier
  Duration detection;                // heartbeat timeout before the scheduler knows
  Duration repair;                   // mean time to repair (exponential); 0 = swap at once
};

// Nodes that slow down without failing (a throttled or degraded GPU, a
// flapping link, a noisy neighbour: the stragglers of M20): a gang runs at
// the pace of its slowest node. Onsets per 1,000 node-days of the cluster;
// each lasts an exponential time of mean `duration`.
struct StragglerProcess {
  double per_1000_node_days = 0;
  double slowdown = 2;  // the node's step time, x
  Duration duration = Seconds(6 * 3600);
  // The platform's straggler watch (core/train/signals.h: 10 slow steps)
  // takes this long to name the node; then onStraggler: replace acts.
  Duration detection = Seconds(600);
};

// Planned maintenance: drains one group of `tier` at a time, each for
// `length`, one after another from `start`, repeating every `every`.
struct Maintenance {
  int tier = 1;
  Time start;
  Duration length;
  Duration every;
};

struct QueueConfig {
  sched::QueueSpec spec;
};

struct PolicyConfig {
  std::string name = "default";
  sched::SchedulerOptions scheduler;
  // Overrides the jobs' own checkpoint mode when set.
  bool override_checkpoint = false;
  CheckpointMode checkpoint = CheckpointMode::kYoungDaly;
  Duration checkpoint_interval;
  // Orders every queue's pending jobs this way, whatever the queues say
  // (the "sjf" and "las" presets).
  bool override_queue_order = false;
  sched::QueueOrder queue_order = sched::QueueOrder::kSubmission;
  // Overrides the jobs' two_stage when set.
  bool override_two_stage = false;
  bool two_stage = false;
  // Elastic continue (JobSpec::continue_on_resize): a lost node shrinks a
  // job in place, its survivors resume from memory after `rejoin_cost`
  // (detect, re-rendezvous, re-form the process groups), and it grows
  // back; every in-place resize pauses it that long. `elastic_min_share`
  // > 0 gives every job an elastic range down to that share of its GPUs.
  bool elastic_continue = false;
  double elastic_min_share = 0;
  // The GPUs an elastic job grows and shrinks by (0: the 1/16 rule of
  // Simulator's Submit): one data-parallel replica, as a replica is the
  // smallest part a TP x PP job can lose and go on.
  Gpus elastic_step;
  Duration rejoin_cost = Seconds(30);
  // onStraggler: replace: a straggler node named by the watch is cordoned
  // and the job leaves it (Scheduler::Replace); off: it runs slow (warn).
  bool replace_stragglers = false;
};

struct SimConfig {
  Duration horizon;                  // stop here; 0 = when every job is done
  Duration cycle_interval;           // 0: a cycle at every event time
  Duration sample_interval = Seconds(3600);
  std::vector<QueueConfig> queues;   // at least one
  std::vector<FailureProcess> failures;
  std::vector<StragglerProcess> stragglers;
  std::vector<Maintenance> maintenance;
};

}  // namespace unipool::sim
