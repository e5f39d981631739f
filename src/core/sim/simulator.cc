#include "core/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>

#include "core/sim/simulator_internal.h"
#include "core/sim/storage.h"
#include "core/sim/young_daly.h"

namespace unipool::sim {
namespace {

using sched::JobId;
using namespace internal;  // NOLINT: the engine's own event and run state

// The fewest groups per tier that `nodes` nodes fit in, by the size of a
// tier's first group.
std::vector<int32_t> GroupsNeeded(const Topology& topo, int32_t nodes) {
  std::vector<int32_t> need;
  for (int t = 0; t < topo.num_tiers(); ++t) {
    const int32_t per = std::max<int32_t>(1, topo.group_num_nodes(t, GroupId(0)));
    need.push_back((nodes + per - 1) / per);
  }
  return need;
}

}  // namespace

struct Simulator::Impl {
  Impl(const Topology& topo, const SimConfig& config, const PolicyConfig& policy,
       const SimHooks& hooks, Rng& rng)
      : topo(topo),
        config(config),
        policy(policy),
        hooks(hooks),
        rng(rng),
        sched(topo, policy.scheduler) {
    if (!topo.storage().empty()) {
      storage = &topo.storage()[0];
      traffic.emplace(storage->write_bytes_per_s);
    }
  }

  const Topology& topo;
  const SimConfig& config;
  const PolicyConfig& policy;
  const SimHooks& hooks;
  Rng& rng;
  sched::Scheduler sched;

  std::vector<SimJob> jobs;
  std::vector<JobState> state;
  SimOutput out;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue;
  uint64_t seq = 0;
  Time now;
  Time last_integrated;
  bool dirty = false;
  int64_t open_jobs = 0;
  std::vector<int32_t> down_count;  // per node: failures not yet repaired
  std::vector<int32_t> node_cause;  // per node: process of its last failure
  int64_t failures_so_far = 0;
  int64_t nodes_down = 0;
  int64_t down_gpus = 0;
  std::vector<bool> in_maintenance;  // per node: in a maintenance window
  // Stragglers, per node: its step-time factor (1: healthy), the onset
  // now in force, the watch's delay for it, and whether it was cordoned
  // as one (uncordoned when it recovers).
  std::vector<double> slow;
  std::vector<int64_t> slow_token;
  std::vector<Duration> slow_detection;
  std::vector<bool> cordoned_slow;
  int64_t drained_gpus = 0;          // by maintenance (see SetInMaintenance)
  const StorageSpec* storage = nullptr;               // where checkpoints go; null: none
  std::optional<CheckpointTraffic> traffic;           // on its write bandwidth
  int64_t storage_epoch = 0;                          // the live kStorage event's

  void Push(Time t, Ev kind, int64_t a = 0, int64_t b = 0) {
    queue.push(Event{t, seq++, kind, a, b});
  }

  // ---- Setup -----------------------------------------------------------------

  Status Setup(std::vector<SimJob> input) {
    if (config.queues.empty()) return InvalidArgument("simulation: at least one queue is required");
    for (const QueueConfig& q : config.queues) {
      sched::QueueSpec spec = q.spec;
      if (policy.override_queue_order) spec.order = policy.queue_order;
      Result<sched::QueueId> id = sched.queues().Add(spec);
      if (!id.ok()) return id.status();
    }
    std::stable_sort(input.begin(), input.end(), [](const SimJob& a, const SimJob& b) {
      return std::tie(a.submit, a.id) < std::tie(b.submit, b.id);
    });
    jobs = std::move(input);
    state.resize(jobs.size());
    out.jobs.resize(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SimJob& j = jobs[i];
      if (j.queue < 0 || j.queue >= static_cast<int32_t>(config.queues.size())) {
        return InvalidArgument("job " + j.name + ": unknown queue " + std::to_string(j.queue));
      }
      JobRecord& r = out.jobs[i];
      r.id = j.id;
      r.name = j.name;
      r.job_class = j.job_class;
      r.queue = j.queue;
      r.gpus = j.gpus;
      r.submit = j.submit;
      r.work = j.work;
      Push(j.submit, Ev::kArrival, static_cast<int64_t>(i));
    }
    open_jobs = static_cast<int64_t>(jobs.size());
    down_count.assign(topo.num_nodes(), 0);
    in_maintenance.assign(topo.num_nodes(), false);
    node_cause.assign(topo.num_nodes(), 0);
    out.lost_by_process.assign(config.failures.size(), 0);
    for (size_t p = 0; p < config.failures.size(); ++p)
      ScheduleFailure(static_cast<int64_t>(p), Time(0));
    slow.assign(topo.num_nodes(), 1.0);
    slow_token.assign(topo.num_nodes(), 0);
    slow_detection.assign(topo.num_nodes(), Duration(0));
    cordoned_slow.assign(topo.num_nodes(), false);
    for (size_t p = 0; p < config.stragglers.size(); ++p)
      ScheduleSlow(static_cast<int64_t>(p), Time(0));
    for (size_t m = 0; m < config.maintenance.size(); ++m) {
      Push(config.maintenance[m].start, Ev::kMaintStart, static_cast<int64_t>(m), 0);
    }
    Push(Time(0), Ev::kSample);
    out.cluster_gpus = topo.num_gpus().value();
    for (int t = 0; t < topo.num_tiers() && out.gang_tier < 0; ++t) {
      if (topo.group_num_nodes(t, GroupId(0)) > 1) {
        out.gang_tier = t;
        out.gang_tier_name = topo.tier(t).name;
      }
    }
    out.policy = policy.name;
    return Status::Ok();
  }

  // ---- Failures ----------------------------------------------------------------

  int64_t Instances(const FailureProcess& p) const {
    return p.tier < 0 ? topo.num_nodes() : topo.num_groups(p.tier);
  }

  double RatePerSecond(const FailureProcess& p) const {
    if (p.mtbf.value() > 0) return static_cast<double>(Instances(p)) / ToSeconds(p.mtbf);
    return p.per_1000_node_days * topo.num_nodes() / 1000.0 / 86400.0;
  }

  void ScheduleFailure(int64_t p, Time after) {
    const FailureProcess& fp = config.failures[p];
    const double rate = RatePerSecond(fp);
    if (rate <= 0) return;
    const double gap = fp.weibull_shape == 1.0 ? rng.Exponential(1.0 / rate)
                                               : rng.Weibull(1.0 / rate, fp.weibull_shape);
    Push(after + Nanoseconds(std::llround(gap * 1e9)), Ev::kFailure, p);
  }

  std::pair<int32_t, int32_t> NodesOf(const FailureProcess& fp, int64_t instance) const {
    if (fp.tier < 0) return {static_cast<int32_t>(instance), 1};
    const GroupId g(static_cast<int32_t>(instance));
    return {topo.group_first_node(fp.tier, g).value(), topo.group_num_nodes(fp.tier, g)};
  }

  void OnFailure(int64_t p) {
    const FailureProcess& fp = config.failures[p];
    const int64_t instance = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(Instances(fp))));
    const auto [first, count] = NodesOf(fp, instance);
    FailureRecord rec{now, static_cast<int32_t>(p), count, 0};
    for (int32_t n = first; n < first + count; ++n) {
      if (down_count[n]++ > 0) continue;  // already down
      node_cause[n] = static_cast<int32_t>(p);
      nodes_down++;
      down_gpus += topo.node_gpus(NodeId(n)).value();
      if (in_maintenance[n]) drained_gpus -= topo.node_gpus(NodeId(n)).value();
      // Jobs on the node stop making progress now; the scheduler learns of
      // it only after the detection delay.
      for (JobId id : sched.JobsOn(NodeId(n))) {
        const int64_t i = Index(id);
        JobState& s = state[i];
        if (s.phase == Phase::kDead || s.phase == Phase::kQueued || s.phase == Phase::kDone)
          continue;
        if (s.phase == Phase::kComputing) s.seg_done = SegmentProgress(s);  // held in memory
        s.dead_phase = s.phase;
        s.dead_at = now;
        s.phase = Phase::kDead;
        s.epoch++;
        CancelTransfer(i);  // the failed node's share of it is gone
        s.undrained = Duration(0);
        out.jobs[i].failures++;
        rec.jobs_hit++;
      }
    }
    out.failures.push_back(rec);
    failures_so_far++;
    Push(now + fp.detection, Ev::kDetect, p, instance);
    ScheduleFailure(p, now);
  }

  void OnDetect(int64_t p, int64_t instance) {
    const FailureProcess& fp = config.failures[p];
    const auto [first, count] = NodesOf(fp, instance);
    std::vector<NodeId> down;
    for (int32_t n = first; n < first + count; ++n) {
      if (down_count[n] > 0 && sched.node_state(NodeId(n)) != NodeState::kDown)
        down.push_back(NodeId(n));
    }
    (void)sched.SetNodeStates(down, NodeState::kDown, now);
    const Duration repair =
        fp.repair.value() > 0
            ? Nanoseconds(std::llround(rng.Exponential(ToSeconds(fp.repair)) * 1e9))
            : Duration(0);
    Push(now + repair, Ev::kRepair, p, instance);
    dirty = true;
  }

  void OnRepair(int64_t p, int64_t instance) {
    const auto [first, count] = NodesOf(config.failures[p], instance);
    for (int32_t n = first; n < first + count; ++n) {
      if (--down_count[n] > 0) continue;
      nodes_down--;
      down_gpus -= topo.node_gpus(NodeId(n)).value();
      if (in_maintenance[n]) drained_gpus += topo.node_gpus(NodeId(n)).value();
      if (sched.node_state(NodeId(n)) == NodeState::kDown) {  // back, or back to its maintenance
        (void)sched.SetNodeState(NodeId(n),
                                 in_maintenance[n] ? NodeState::kDrained : NodeState::kUp, now);
      }
    }
    dirty = true;
  }

  // drained_gpus counts the nodes in a maintenance window that have not
  // failed (a failed one counts in down_gpus).
  void SetInMaintenance(int32_t n, bool in) {
    if (in_maintenance[n] == in) return;
    in_maintenance[n] = in;
    if (down_count[n] == 0) drained_gpus += (in ? 1 : -1) * topo.node_gpus(NodeId(n)).value();
  }

  void OnMaintenance(int64_t m, int64_t group, bool start) {
    const Maintenance& mw = config.maintenance[m];
    const GroupId g(static_cast<int32_t>(group));
    const NodeId first = topo.group_first_node(mw.tier, g);
    for (int32_t n = first.value(); n < first.value() + topo.group_num_nodes(mw.tier, g); ++n) {
      const NodeState st = sched.node_state(NodeId(n));
      if (start && st == NodeState::kUp &&
          sched.SetNodeState(NodeId(n), NodeState::kDrained, now).ok()) {
        SetInMaintenance(n, true);
      }
      if (!start && st == NodeState::kDrained)
        (void)sched.SetNodeState(NodeId(n), NodeState::kUp, now);
      if (!start) SetInMaintenance(n, false);
    }
    if (start) {
      Push(now + mw.length, Ev::kMaintEnd, m, group);
    } else if (group + 1 < topo.num_groups(mw.tier)) {
      OnMaintenance(m, group + 1, true);  // the hand-over is one instant: nothing sees a gap
    } else if (mw.every.value() > 0) {
      Push(now + mw.every, Ev::kMaintStart, m, 0);
    }
    dirty = true;
  }

  // ---- Stragglers ----------------------------------------------------------------

  void ScheduleSlow(int64_t p, Time after) {
    const double rate =
        config.stragglers[p].per_1000_node_days * topo.num_nodes() / 1000.0 / 86400.0;
    if (rate <= 0) return;
    const double gap = rng.Exponential(1.0 / rate);
    Push(after + Nanoseconds(std::llround(gap * 1e9)), Ev::kSlowStart, p);
  }

  // A node slows down: the jobs on it go at its pace until it recovers or,
  // with onStraggler: replace, the watch names it and they leave it.
  void OnSlowStart(int64_t p) {
    const StragglerProcess& sp = config.stragglers[p];
    const auto n = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(topo.num_nodes())));
    const Duration lasts = Nanoseconds(std::llround(rng.Exponential(ToSeconds(sp.duration)) * 1e9));
    ScheduleSlow(p, now);
    if (slow[n] > 1 || down_count[n] > 0) return;  // already slow, or down
    slow[n] = sp.slowdown;
    slow_detection[n] = sp.detection;
    out.stragglers++;
    Push(now + lasts, Ev::kSlowEnd, n, ++slow_token[n]);
    RerateJobsOn(n);
  }

  void OnSlowEnd(int32_t n, int64_t token) {
    if (token != slow_token[n]) return;
    slow[n] = 1;
    RerateJobsOn(n);
    if (cordoned_slow[n]) {
      cordoned_slow[n] = false;
      if (sched.node_state(NodeId(n)) == NodeState::kCordoned) {
        (void)sched.SetNodeState(NodeId(n), NodeState::kUp, now);
        dirty = true;
      }
    }
  }

  // The watch names node n a straggler of job i: with replace, the node is
  // cordoned and the job leaves it (in place when elastic continue).
  void OnSlowDetect(int64_t i, int32_t n) {
    const Phase ph = state[i].phase;
    if (slow[n] <= 1 || !policy.replace_stragglers || ph == Phase::kQueued || ph == Phase::kDone ||
        ph == Phase::kDead || ph == Phase::kStopping) {
      return;
    }
    if (sched.node_state(NodeId(n)) == NodeState::kUp) {
      (void)sched.SetNodeState(NodeId(n), NodeState::kCordoned, now);
      cordoned_slow[n] = true;
    }
    if (sched.Replace(Sid(i), NodeId(n), "straggler", now).ok()) out.straggler_replacements++;
    dirty = true;
  }

  void RerateJobsOn(int32_t n) {
    const std::vector<JobId> on = sched.JobsOn(NodeId(n));  // (a copy: Rerate may replace)
    for (JobId id : on) Rerate(Index(id));
  }

  // Progress per wall second: the share of its GPUs it holds, at the pace
  // of its slowest node; the watch is told of each slow node.
  double RateOf(int64_t i) {
    const sched::JobInfo* info = sched.Find(Sid(i));
    double slowest = 1;
    if (info) {
      for (const sched::Task& t : info->placement.tasks) {
        const int32_t n = t.node.value();
        if (slow[n] <= 1) continue;
        slowest = std::max(slowest, slow[n]);
        if (policy.replace_stragglers) Push(now + slow_detection[n], Ev::kSlowDetect, i, n);
      }
    }
    return static_cast<double>(state[i].alloc.value()) / static_cast<double>(jobs[i].gpus.value()) /
           slowest;
  }

  // The rate changed (GPUs, a slow node): a segment under way goes on at
  // the new one, after `pause` (an in-place resize re-forming its groups).
  void Rerate(int64_t i, Duration pause = Duration(0)) {
    JobState& s = state[i];
    const bool computing = s.phase == Phase::kComputing;
    if (computing) {
      s.seg_done = SegmentProgress(s);
      s.seg_start = now + pause;
    }
    s.rate = RateOf(i);
    if (computing) {
      s.epoch++;
      Push(s.seg_start + WallFor(s.seg_target - s.seg_done, s.rate), Ev::kEndCompute, i, s.epoch);
    }
  }

  // ---- Job runs ------------------------------------------------------------------

  // The scheduler knows job i (in submit order) as id i + 1.
  static JobId Sid(int64_t i) { return JobId(i + 1); }
  static int64_t Index(JobId id) { return id.value() - 1; }

  Duration Interval(const SimJob& j, Gpus alloc, Duration cost) const {
    CheckpointMode mode = j.checkpoint;
    Duration fixed = j.checkpoint_interval;
    if (policy.override_checkpoint) {
      mode = policy.checkpoint;
      fixed = policy.checkpoint_interval;
    }
    switch (mode) {
      case CheckpointMode::kNone:
        return Duration(0);
      case CheckpointMode::kFixed:
        return fixed;
      case CheckpointMode::kYoungDaly: {
        // The job's MTBF from the node-level failure rates of its nodes.
        double per_node = 0;
        for (const FailureProcess& fp : config.failures) {
          per_node += RatePerSecond(fp) / std::max(1, topo.num_nodes());
        }
        const int64_t k = std::max<int64_t>(1, topo.node_gpus(NodeId(0)).value());
        const int64_t nodes = std::max<int64_t>(1, (alloc.value() + k - 1) / k);
        if (per_node <= 0 || cost.value() <= 0) return Duration(0);
        const Duration mtbf = Nanoseconds(std::llround(1e9 / (per_node * nodes)));
        return DalyInterval(cost, mtbf);
      }
    }
    return Duration(0);
  }

  void Start(int64_t i, const sched::Placement& placement) {
    const SimJob& j = jobs[i];
    JobState& s = state[i];
    const Gpus alloc = placement.gpus();
    s.phase = Phase::kRestarting;
    s.epoch++;
    s.alloc = alloc;
    s.rate = RateOf(i);
    CancelTransfer(i);
    s.undrained = Duration(0);
    s.nodes = std::max<int32_t>(1, static_cast<int32_t>(placement.tasks.size()));
    s.interval = Interval(j, alloc, StallCost(i));
    out.jobs[i].checkpoint_interval = s.interval;
    s.run_start = now;
    if (out.jobs[i].first_start.value() < 0) {
      out.jobs[i].first_start = now;
      out.jobs[i].nodes = static_cast<int32_t>(placement.tasks.size());
      out.jobs[i].groups_used = placement.score.groups_used;
      out.jobs[i].groups_needed = GroupsNeeded(topo, out.jobs[i].nodes);
    }
    // Placed on a node that failed but is not detected yet: it never runs.
    for (const sched::Task& t : placement.tasks) {
      if (down_count[t.node.value()] > 0) {
        s.phase = s.dead_phase = Phase::kDead;
        s.dead_at = now;
        return;
      }
    }
    // A restart reads the last checkpoint back (uncontended).
    const Duration read = Stored(i) && out.jobs[i].committed.value() > 0
                              ? Transfer(j.checkpoint_bytes, storage->read_bytes_per_s, s)
                              : Duration(0);
    Push(now + j.restart_cost + read, Ev::kBeginCompute, i, s.epoch);
  }

  // ---- Checkpoints to storage ------------------------------------------------

  bool Stored(int64_t i) const { return storage && jobs[i].checkpoint_bytes > 0; }
  bool TwoStage(int64_t i) const {
    const bool asked = policy.override_two_stage ? policy.two_stage : jobs[i].two_stage;
    return Stored(i) && asked && storage->local_bytes_per_s > 0;
  }
  // `bytes` at the lesser of `aggregate` and the run's client links.
  Duration Transfer(double bytes, double aggregate, const JobState& s) const {
    const double rate = std::min(aggregate, s.nodes * storage->client_bytes_per_s);
    return Nanoseconds(std::llround(bytes / rate * 1e9));
  }
  // What one checkpoint stalls training: the last one seen, or by the
  // model alone on storage (to the fast tier for two-stage).
  Duration StallCost(int64_t i) const {
    const JobState& s = state[i];
    if (!Stored(i)) return jobs[i].checkpoint_cost;
    if (TwoStage(i)) {
      return Nanoseconds(
          std::llround(jobs[i].checkpoint_bytes / (s.nodes * storage->local_bytes_per_s) * 1e9));
    }
    if (s.observed_stall.value() > 0) return s.observed_stall;
    return Transfer(jobs[i].checkpoint_bytes, storage->write_bytes_per_s, s);
  }

  void StartTransfer(int64_t i, bool drain) {
    JobState& s = state[i];
    s.transfer = traffic->Start(now, i, drain, jobs[i].checkpoint_bytes,
                                s.nodes * storage->client_bytes_per_s);
    s.draining = drain;
    RescheduleStorage();
  }

  void CancelTransfer(int64_t i) {
    JobState& s = state[i];
    s.wait_drain = false;
    if (s.transfer == 0) return;
    if (s.draining) out.drains_lost++;
    traffic->Cancel(now, s.transfer);
    s.transfer = 0;
    s.draining = false;
    RescheduleStorage();
  }

  void RescheduleStorage() {
    ++storage_epoch;
    if (const std::optional<Time> next = traffic->NextEnd()) {
      Push(std::max(*next, now), Ev::kStorage, 0, storage_epoch);
    }
  }

  // The transfer due now, if any, is done: a write ends the checkpoint, a
  // drain makes the fast copy durable.
  void OnStorage(int64_t epoch) {
    if (epoch != storage_epoch) return;
    const std::optional<CheckpointTraffic::Ended> ended = traffic->TakeEnded(now);
    RescheduleStorage();
    if (!ended) return;
    JobState& s = state[ended->job];
    s.transfer = 0;
    s.draining = false;
    ended->drain ? EndDrain(ended->job) : EndWrite(ended->job);
  }

  void EndDrain(int64_t i) {
    JobState& s = state[i];
    Commit(i, s.undrained);
    s.undrained = Duration(0);
    (void)sched.Checkpointed(Sid(i), s.snapshot_at);
    if (s.wait_drain) {
      s.wait_drain = false;
      Push(now + StallCost(i), Ev::kEndWrite, i, s.epoch);
    }
  }

  Duration WallFor(Duration work, double rate) const {
    return Nanoseconds(static_cast<int64_t>(std::ceil(static_cast<double>(work.value()) / rate)));
  }

  void BeginSegment(int64_t i) {
    const SimJob& j = jobs[i];
    JobState& s = state[i];
    if (Stored(i)) s.interval = Interval(j, s.alloc, StallCost(i));  // from the observed cost
    const Duration left = j.work - out.jobs[i].committed - s.undrained;
    s.seg_target = s.interval.value() > 0 ? std::min(s.interval, left) : left;
    s.seg_done = Duration(0);
    s.seg_start = now;
    s.phase = Phase::kComputing;
    Push(now + WallFor(s.seg_target, s.rate), Ev::kEndCompute, i, s.epoch);
  }

  Duration SegmentProgress(const JobState& s) const {
    // (A segment resumed after a pause starts in the future: nothing yet.)
    const double done =
        static_cast<double>(std::max<int64_t>(0, (now - s.seg_start).value())) * s.rate;
    return std::min(s.seg_target, s.seg_done + Nanoseconds(static_cast<int64_t>(done)));
  }

  void Commit(int64_t i, Duration work) {
    out.jobs[i].committed += work;
    out.useful_gpu_seconds += ToSeconds(work) * static_cast<double>(jobs[i].gpus.value());
  }

  void EndCompute(int64_t i) {
    const SimJob& j = jobs[i];
    JobState& s = state[i];
    if (out.jobs[i].committed + s.undrained + s.seg_target >= j.work) {  // done
      const sched::JobInfo* info = sched.Find(Sid(i));
      if (info) out.jobs[i].energy_joules = sched.EnergyJoules(*info, now);
      if (!sched.Finish(Sid(i), now).ok()) return;         // not running as the scheduler sees it
      CancelTransfer(i);
      Commit(i, s.undrained + s.seg_target);
      s.undrained = Duration(0);
      s.phase = Phase::kDone;
      out.jobs[i].end = now;
      out.jobs[i].held += now - s.run_start;
      --open_jobs;
      dirty = true;
      return;
    }
    s.phase = Phase::kWriting;
    s.write_start = now;
    if (!Stored(i)) {
      Push(now + j.checkpoint_cost, Ev::kEndWrite, i, s.epoch);
    } else if (!TwoStage(i)) {
      StartTransfer(i, /*drain=*/false);
    } else if (s.transfer != 0) {
      s.wait_drain = true;  // the fast tier holds one copy: the last must drain first
    } else {
      Push(now + StallCost(i), Ev::kEndWrite, i, s.epoch);
    }
  }

  void EndWrite(int64_t i) {
    JobState& s = state[i];
    if (Stored(i)) {
      s.observed_stall = now - s.write_start;
      out.checkpoint_stall_ns.push_back(s.observed_stall.value());
      out.jobs[i].checkpoints++;
      out.jobs[i].checkpoint_stall += s.observed_stall;
    }
    if (TwoStage(i)) {
      s.undrained += s.seg_target;
      s.snapshot_at = s.write_start;
      StartTransfer(i, /*drain=*/true);
    } else {
      Commit(i, s.seg_target);
      (void)sched.Checkpointed(Sid(i), now);
    }
    BeginSegment(i);
  }

  // SIGTERM: checkpoint if the grace period allows, then stop.
  void Preempt(int64_t i, Time deadline) {
    JobState& s = state[i];
    Duration saved(0);
    Time stop = now;
    // A fast copy not yet drained is saved with the rest, or lost with it.
    const Duration undrained = s.undrained;
    const Duration cost = Stored(i)
                              ? Transfer(jobs[i].checkpoint_bytes, storage->write_bytes_per_s, s)
                              : jobs[i].checkpoint_cost;
    if (s.phase == Phase::kComputing || s.phase == Phase::kWriting) {
      const Duration progress =
          (s.phase == Phase::kWriting ? s.seg_target : SegmentProgress(s)) + undrained;
      if (now + cost <= deadline && progress.value() > 0) {
        saved = progress;
        stop = now + cost;
      } else {
        stop = deadline;
      }
    } else if (s.phase != Phase::kRestarting) {
      return;  // a failure got there first, or the job already ended
    }
    stop = std::max(stop, now);
    // Lost: the work not saved, and the restart it will need.
    const Duration unsaved =
        s.phase == Phase::kComputing || s.phase == Phase::kWriting
            ? (s.phase == Phase::kWriting ? s.seg_target : SegmentProgress(s)) + undrained - saved
            : Duration(0);
    CancelTransfer(i);
    s.undrained = Duration(0);
    s.stop_loss = static_cast<int64_t>(ToSeconds(unsaved + jobs[i].restart_cost) *
                                       static_cast<double>(s.alloc.value()));
    out.jobs[i].preemptions++;
    out.preemptions++;
    s.phase = Phase::kStopping;
    s.epoch++;
    s.seg_target = saved;  // committed when the stop completes
    Push(stop, Ev::kStopDone, i, s.epoch);
  }

  void StopDone(int64_t i) {
    JobState& s = state[i];
    // Booked now: a failure during the grace period books its own loss.
    out.preempted_lost_gpu_seconds += s.stop_loss;
    out.jobs[i].lost_gpu_seconds += s.stop_loss;
    if (s.seg_target.value() > 0) {
      Commit(i, s.seg_target);
      (void)sched.Checkpointed(Sid(i), now);
    }
    out.jobs[i].held += now - s.run_start;
    s.phase = Phase::kQueued;
    s.epoch++;
    (void)sched.Stopped(Sid(i), now);
    dirty = true;
  }

  void Resize(const sched::ResizeJob& r) {
    const int64_t i = Index(r.job);
    JobState& s = state[i];
    if (!r.in_place) {
      s.alloc = r.placement.gpus();
      return Rerate(i);
    }
    // Elastic continue: the survivors (or the grown job) re-form first.
    const Duration pause = policy.rejoin_cost;
    if (s.phase != Phase::kDead) {
      s.alloc = r.placement.gpus();
      return Rerate(i, pause);
    }
    // After a failure: they resume what they held in memory; the lost time
    // is the wait for the detection and the re-forming.
    const int64_t lost =
        static_cast<int64_t>(ToSeconds(now - s.dead_at) * static_cast<double>(s.alloc.value()) +
                             ToSeconds(pause) * static_cast<double>(r.placement.gpus().value()));
    out.failed_lost_gpu_seconds += lost;
    out.jobs[i].lost_gpu_seconds += lost;
    if (r.lost_node.valid() && !out.lost_by_process.empty()) {
      out.lost_by_process[node_cause[r.lost_node.value()]] += lost;
    }
    s.alloc = r.placement.gpus();
    s.epoch++;
    if (s.dead_phase == Phase::kComputing || s.dead_phase == Phase::kWriting) {
      // A checkpoint cut short is written again: its segment is done.
      if (s.dead_phase == Phase::kWriting) s.seg_done = s.seg_target;
      s.phase = Phase::kComputing;
      s.seg_start = now;
      return Rerate(i, pause);
    }
    s.phase = Phase::kRestarting;  // it had not begun: it starts again
    s.rate = RateOf(i);
    Push(now + pause + jobs[i].restart_cost, Ev::kBeginCompute, i, s.epoch);
  }

  // ---- Scheduler -----------------------------------------------------------------

  void Submit(int64_t i) {
    const SimJob& j = jobs[i];
    sched::JobSpec spec;
    spec.id = Sid(i);
    spec.name = j.name;
    spec.queue = sched::QueueId(j.queue);
    spec.priority = j.priority;
    spec.preemptible = j.preemptible;
    spec.span_partitions = j.span_partitions;
    spec.gpus = j.gpus;
    spec.task_gpus = sched.TaskGpus(spec);  // what the scheduler would choose
    Gpus min = j.min_gpus;
    if (policy.elastic_min_share > 0 && min.value() == 0) {
      min = Gpus(std::llround(policy.elastic_min_share * static_cast<double>(j.gpus.value())));
    }
    if (min.value() > 0 && min < j.gpus) {
      const int64_t task = spec.task_gpus;
      spec.min_gpus = Gpus(std::max<int64_t>(task, min.value() / task * task));
      // Steps of about 1/16 of the range, in whole tasks dividing it.
      const int64_t range = (j.gpus.value() - spec.min_gpus.value()) / task;
      int64_t step = std::max<int64_t>(1, (range + 15) / 16);
      while (range > 0 && range % step != 0) ++step;
      spec.step = Gpus(step * task);
      if (policy.elastic_step.value() > 0) {  // whole steps down from the top
        spec.step = Gpus(std::max<int64_t>(task, policy.elastic_step.value() / task * task));
        spec.min_gpus = j.gpus - spec.step * ((j.gpus - spec.min_gpus) / spec.step);
        if (spec.min_gpus == j.gpus) spec.min_gpus = Gpus(0);
      }
      if ((j.gpus.value() - spec.min_gpus.value()) % task != 0 ||
          (j.gpus.value() - spec.min_gpus.value()) % spec.step.value() != 0) {
        spec.min_gpus = Gpus(0);
      }
      spec.continue_on_resize = policy.elastic_continue;
    }
    spec.runtime_estimate = j.runtime_estimate;
    spec.checkpoint_cost = j.checkpoint_cost;
    if (Stored(i)) {  // as alone on storage, over the nodes it would take
      JobState guess;
      guess.nodes = static_cast<int32_t>(std::max<int64_t>(
          1, j.gpus.value() / std::max<int64_t>(1, topo.node_gpus(NodeId(0)).value())));
      spec.checkpoint_cost = Transfer(j.checkpoint_bytes, storage->write_bytes_per_s, guess);
    }
    spec.restart_cost = j.restart_cost;
    Status st = sched.Submit(spec, now);
    if (!st.ok()) {  // a shape the cluster can never hold
      out.jobs[i].infeasible = true;
      --open_jobs;
    }
    dirty = true;
  }

  void Cycle() {
    const int64_t t0 = hooks.wall_clock_ns ? hooks.wall_clock_ns() : 0;
    std::vector<sched::Decision> decisions = sched.Schedule(now);
    if (hooks.wall_clock_ns) out.cycle_wall_ns.push_back(hooks.wall_clock_ns() - t0);
    out.cycles++;
    out.decisions += static_cast<int64_t>(decisions.size());
    for (const sched::Decision& d : decisions) Apply(d);
  }

  void Apply(const sched::Decision& d) {
    if (const auto* s = std::get_if<sched::StartJob>(&d)) {
      Start(Index(s->job), s->placement);
    } else if (const auto* p = std::get_if<sched::PreemptJob>(&d)) {
      Preempt(Index(p->job), p->deadline);
    } else if (const auto* r = std::get_if<sched::ResizeJob>(&d)) {
      Resize(*r);
    } else if (const auto* q = std::get_if<sched::RequeueJob>(&d)) {
      const int64_t i = Index(q->job);
      out.failed_lost_gpu_seconds += q->lost_gpu_seconds;
      if (q->failed_node.valid() && q->why.empty() && !out.lost_by_process.empty()) {
        out.lost_by_process[node_cause[q->failed_node.value()]] += q->lost_gpu_seconds;
      }
      out.jobs[i].lost_gpu_seconds += q->lost_gpu_seconds;
      out.jobs[i].held += now - state[i].run_start;
      CancelTransfer(i);  // a fast copy not drained is lost with the node
      state[i].undrained = Duration(0);
      state[i].phase = Phase::kQueued;
      state[i].epoch++;
    } else if (const auto* f = std::get_if<sched::FailJob>(&d)) {
      const int64_t i = Index(f->job);
      if (!out.jobs[i].infeasible) --open_jobs;
      out.jobs[i].infeasible = true;
    } else if (std::holds_alternative<sched::CordonNode>(d)) {
      out.cordoned_nodes++;
    }
  }

  void TakeSample() {
    Sample s;
    s.t = now;
    s.allocated_gpus = sched.allocated_gpus().value();
    s.down_gpus = down_gpus;
    s.running_jobs = sched.running_count();
    s.pending_jobs = sched.pending_count();
    s.failures = failures_so_far;
    s.lost_gpu_seconds = out.failed_lost_gpu_seconds + out.preempted_lost_gpu_seconds;
    s.useful_gpu_seconds = out.useful_gpu_seconds;
    s.drained_gpus = drained_gpus;
    s.it_watts = sched.power().draw().value();
    s.queue_gpus.reserve(config.queues.size());
    for (size_t q = 0; q < config.queues.size(); ++q) {
      s.queue_gpus.push_back(sched.queues().used(sched::QueueId(static_cast<int32_t>(q))).value());
    }
    out.series.push_back(s);
    Push(now + config.sample_interval, Ev::kSample);
  }

  // ---- Main loop -----------------------------------------------------------------

  void Handle(const Event& e) {
    const auto live = [&](int64_t i) { return state[i].epoch == e.b; };
    switch (e.kind) {
      case Ev::kArrival:
        Submit(e.a);
        break;
      case Ev::kBeginCompute:
        if (live(e.a)) BeginSegment(e.a);
        break;
      case Ev::kEndCompute:
        if (live(e.a)) EndCompute(e.a);
        break;
      case Ev::kEndWrite:
        if (live(e.a)) EndWrite(e.a);
        break;
      case Ev::kStopDone:
        if (live(e.a)) StopDone(e.a);
        break;
      case Ev::kFailure:
        OnFailure(e.a);
        break;
      case Ev::kDetect:
        OnDetect(e.a, e.b);
        break;
      case Ev::kRepair:
        OnRepair(e.a, e.b);
        break;
      case Ev::kMaintStart:
        OnMaintenance(e.a, e.b, true);
        break;
      case Ev::kMaintEnd:
        OnMaintenance(e.a, e.b, false);
        break;
      case Ev::kSample:
        TakeSample();
        break;
      case Ev::kCycle:
        cycle_pending = false;
        due = true;
        break;
      case Ev::kStorage:
        OnStorage(e.b);
        break;
      case Ev::kSlowStart:
        OnSlowStart(e.a);
        break;
      case Ev::kSlowEnd:
        OnSlowEnd(static_cast<int32_t>(e.a), e.b);
        break;
      case Ev::kSlowDetect:
        OnSlowDetect(e.a, static_cast<int32_t>(e.b));
        break;
    }
  }

  // Without a horizon: nothing runs, nothing more arrives, every node is up
  // and no maintenance is planned, yet jobs remain: they can never run.
  bool Stuck() const {
    return config.horizon.value() == 0 && open_jobs > 0 && sched.running_count() == 0 &&
           next_arrival >= jobs.size() && nodes_down == 0 && config.maintenance.empty();
  }

  size_t next_arrival = 0;
  bool cycle_pending = false;  // a kCycle event is queued
  bool due = false;            // a kCycle event fired at this instant

  // GPU time and energy since the last instant, at the levels that held
  // until `t`.
  void Integrate(Time t) {
    const double dt = ToSeconds(t - last_integrated);
    const int64_t watts = sched.power().draw().value();
    out.allocated_gpu_seconds += dt * sched.allocated_gpus().value();
    out.down_gpu_seconds += dt * static_cast<double>(down_gpus);
    out.it_energy_joules += dt * static_cast<double>(watts);
    out.peak_it_watts = std::max(out.peak_it_watts, watts);
    last_integrated = t;
  }

  void Loop() {
    out.pue = topo.pue();
    double flops = 0;
    for (int32_t n = 0; n < topo.num_nodes(); ++n) {
      flops += static_cast<double>(topo.node_gpus(NodeId(n)).value()) *
               static_cast<double>(topo.node_model(NodeId(n)).peak_bf16.value()) * 1e9;
    }
    out.peak_flops_per_gpu =
        topo.num_gpus().value() > 0 ? flops / static_cast<double>(topo.num_gpus().value()) : 0;
    const Time horizon = config.horizon.value() > 0 ? config.horizon : Time(INT64_MAX);
    const double span =
        config.horizon.value() > 0
            ? static_cast<double>(config.horizon.value())
            : static_cast<double>(jobs.empty() ? 1 : jobs.back().submit.value() + 1);
    while (!queue.empty()) {
      const Time t = queue.top().t;
      if (t > horizon) break;
      Integrate(t);
      now = t;
      while (!queue.empty() && queue.top().t == t) {
        const Event e = queue.top();
        queue.pop();
        if (e.kind == Ev::kArrival) next_arrival = static_cast<size_t>(e.a) + 1;
        Handle(e);
        out.events++;
      }
      // Cycles run after every instant with changes, or, with a cycle
      // interval, at the next multiple of it.
      const Duration every = config.cycle_interval;
      if (dirty && every.value() > 0 && !due && !cycle_pending) {
        Push(Time((now.value() / every.value() + 1) * every.value()), Ev::kCycle);
        cycle_pending = true;
      }
      if (dirty && (every.value() == 0 || due)) {
        Cycle();
        dirty = false;
        if (Stuck()) break;
      }
      due = false;
      if (open_jobs == 0 && config.horizon.value() == 0) break;
      if (hooks.progress && (out.events & 0xFFF) == 0) {
        hooks.progress(std::min(1.0, static_cast<double>(now.value()) / span));
      }
    }
    out.end = config.horizon.value() > 0 ? horizon : now;
    now = out.end;
    if (config.horizon.value() > 0) Integrate(horizon);
    for (size_t i = 0; i < state.size(); ++i) {
      const Phase p = state[i].phase;
      if (p != Phase::kQueued && p != Phase::kDone)
        out.jobs[i].held += out.end - state[i].run_start;
      // Work done but not yet saved when the horizon cuts the run counts as
      // done: it was not lost.
      if (p == Phase::kComputing || p == Phase::kWriting)
        Commit(static_cast<int64_t>(i), state[i].undrained);
      if (p == Phase::kComputing) Commit(static_cast<int64_t>(i), SegmentProgress(state[i]));
      if (p == Phase::kWriting) Commit(static_cast<int64_t>(i), state[i].seg_target);
      // Pending for ever: say so.
      const sched::JobInfo* info = sched.Find(Sid(static_cast<int64_t>(i)));
      if (info && p != Phase::kDone) out.jobs[i].energy_joules = sched.EnergyJoules(*info, out.end);
      if (info && info->phase == sched::JobPhase::kPending &&
          std::holds_alternative<sched::reason::Infeasible>(info->reason)) {
        out.jobs[i].infeasible = true;
      }
    }
    out.scheduler = sched.stats();
    if (hooks.progress) hooks.progress(1.0);
  }
};

Simulator::Simulator(const Topology& topo, SimConfig config, PolicyConfig policy, SimHooks hooks)
    : topo_(topo),
      config_(std::move(config)),
      policy_(std::move(policy)),
      hooks_(std::move(hooks)) {}

Result<SimOutput> Simulator::Run(std::vector<SimJob> jobs, Rng& rng) {
  Impl impl(topo_, config_, policy_, hooks_, rng);
  UNIPOOL_RETURN_IF_ERROR(impl.Setup(std::move(jobs)));
  impl.Loop();
  return std::move(impl.out);
}

}  // namespace unipool::sim
