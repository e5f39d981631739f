// The simulator: setup, failures and maintenance, stragglers, the
// scheduler's decisions, and the main loop (simulator_internal.h).
#include "core/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>

#include "core/sim/simulator_internal.h"

namespace unipool::sim {

// ---- Setup -----------------------------------------------------------------

Status Simulator::Impl::Setup(std::vector<SimJob> input) {
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

int64_t Simulator::Impl::Instances(const FailureProcess& p) const {
  return p.tier < 0 ? topo.num_nodes() : topo.num_groups(p.tier);
}

double Simulator::Impl::RatePerSecond(const FailureProcess& p) const {
  if (p.mtbf.value() > 0) return static_cast<double>(Instances(p)) / ToSeconds(p.mtbf);
  return p.per_1000_node_days * topo.num_nodes() / 1000.0 / 86400.0;
}

void Simulator::Impl::ScheduleFailure(int64_t p, Time after) {
  const FailureProcess& fp = config.failures[p];
  const double rate = RatePerSecond(fp);
  if (rate <= 0) return;
  const double gap = fp.weibull_shape == 1.0 ? rng.Exponential(1.0 / rate)
                                             : rng.Weibull(1.0 / rate, fp.weibull_shape);
  Push(after + Nanoseconds(std::llround(gap * 1e9)), Ev::kFailure, p);
}

std::pair<int32_t, int32_t> Simulator::Impl::NodesOf(const FailureProcess& fp,
                                                     int64_t instance) const {
  if (fp.tier < 0) return {static_cast<int32_t>(instance), 1};
  const GroupId g(static_cast<int32_t>(instance));
  return {topo.group_first_node(fp.tier, g).value(), topo.group_num_nodes(fp.tier, g)};
}

void Simulator::Impl::OnFailure(int64_t p) {
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
      if (s.phase == Phase::kDead || s.phase == Phase::kQueued || s.phase == Phase::kDone) continue;
      if (s.phase == Phase::kComputing) s.seg_done = SegmentProgress(s);  // held in memory
      s.dead_phase = s.phase;
      s.dead_at = now;
      s.phase = Phase::kDead;
      s.epoch++;
      CancelTransfer(i);  // the failed node's share of it is gone
      // The survivors of an elastic continue job hold that work in memory
      // (Resize drains it again); a restart loses it (Start).
      const sched::JobInfo* info = sched.Find(id);
      if (!info || !info->spec.continue_on_resize) s.undrained = Duration(0);
      out.jobs[i].failures++;
      rec.jobs_hit++;
    }
  }
  out.failures.push_back(rec);
  failures_so_far++;
  Push(now + fp.detection, Ev::kDetect, p, instance);
  ScheduleFailure(p, now);
}

void Simulator::Impl::OnDetect(int64_t p, int64_t instance) {
  const FailureProcess& fp = config.failures[p];
  const auto [first, count] = NodesOf(fp, instance);
  std::vector<NodeId> down;
  for (int32_t n = first; n < first + count; ++n) {
    if (down_count[n] > 0 && sched.node_state(NodeId(n)) != NodeState::kDown)
      down.push_back(NodeId(n));
  }
  (void)sched.SetNodeStates(down, NodeState::kDown, now);
  const Duration repair =
      fp.repair.value() > 0 ? Nanoseconds(std::llround(rng.Exponential(ToSeconds(fp.repair)) * 1e9))
                            : Duration(0);
  Push(now + repair, Ev::kRepair, p, instance);
  dirty = true;
}

void Simulator::Impl::OnRepair(int64_t p, int64_t instance) {
  const auto [first, count] = NodesOf(config.failures[p], instance);
  for (int32_t n = first; n < first + count; ++n) {
    if (--down_count[n] > 0) continue;
    nodes_down--;
    down_gpus -= topo.node_gpus(NodeId(n)).value();
    if (in_maintenance[n]) drained_gpus += topo.node_gpus(NodeId(n)).value();
    if (sched.node_state(NodeId(n)) == NodeState::kDown) {  // back, or back to its maintenance
      (void)sched.SetNodeState(NodeId(n), in_maintenance[n] ? NodeState::kDrained : NodeState::kUp,
                               now);
    }
  }
  dirty = true;
}

// drained_gpus counts the nodes in a maintenance window that have not
// failed (a failed one counts in down_gpus).
void Simulator::Impl::SetInMaintenance(int32_t n, bool in) {
  if (in_maintenance[n] == in) return;
  in_maintenance[n] = in;
  if (down_count[n] == 0) drained_gpus += (in ? 1 : -1) * topo.node_gpus(NodeId(n)).value();
}

void Simulator::Impl::OnMaintenance(int64_t m, int64_t group, bool start) {
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

void Simulator::Impl::ScheduleSlow(int64_t p, Time after) {
  const double rate = config.stragglers[p].per_1000_node_days * topo.num_nodes() / 1000.0 / 86400.0;
  if (rate <= 0) return;
  const double gap = rng.Exponential(1.0 / rate);
  Push(after + Nanoseconds(std::llround(gap * 1e9)), Ev::kSlowStart, p);
}

// A node slows down: the jobs on it go at its pace until it recovers or,
// with onStraggler: replace, the watch names it and they leave it.
void Simulator::Impl::OnSlowStart(int64_t p) {
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

void Simulator::Impl::OnSlowEnd(int32_t n, int64_t token) {
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
// cordoned and the job leaves it (in place when elastic continue), when
// it has room without it.
void Simulator::Impl::OnSlowDetect(int64_t i, int32_t n) {
  const Phase ph = state[i].phase;
  if (slow[n] <= 1 || !policy.replace_stragglers || ph == Phase::kQueued || ph == Phase::kDone ||
      ph == Phase::kDead || ph == Phase::kStopping || !sched.HasRoomWithout(Sid(i), NodeId(n))) {
    return;  // (a slow node beats no node: the server's rule too)
  }
  if (sched.node_state(NodeId(n)) == NodeState::kUp) {
    (void)sched.SetNodeState(NodeId(n), NodeState::kCordoned, now);
    cordoned_slow[n] = true;
  }
  if (sched.Replace(Sid(i), NodeId(n), "straggler", now).ok()) out.straggler_replacements++;
  dirty = true;
}

void Simulator::Impl::RerateJobsOn(int32_t n) {
  const std::vector<JobId> on = sched.JobsOn(NodeId(n));  // (a copy: Rerate may replace)
  for (JobId id : on) Rerate(Index(id));
}

// ---- Scheduler -----------------------------------------------------------------

void Simulator::Impl::Submit(int64_t i) {
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

void Simulator::Impl::Cycle() {
  const int64_t t0 = hooks.wall_clock_ns ? hooks.wall_clock_ns() : 0;
  std::vector<sched::Decision> decisions = sched.Schedule(now);
  if (hooks.wall_clock_ns) out.cycle_wall_ns.push_back(hooks.wall_clock_ns() - t0);
  out.cycles++;
  out.decisions += static_cast<int64_t>(decisions.size());
  for (const sched::Decision& d : decisions) Apply(d);
}

void Simulator::Impl::Apply(const sched::Decision& d) {
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

void Simulator::Impl::TakeSample() {
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

void Simulator::Impl::Handle(const Event& e) {
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
bool Simulator::Impl::Stuck() const {
  return config.horizon.value() == 0 && open_jobs > 0 && sched.running_count() == 0 &&
         next_arrival >= jobs.size() && nodes_down == 0 && config.maintenance.empty();
}

// GPU time and energy since the last instant, at the levels that held
// until `t`.
void Simulator::Impl::Integrate(Time t) {
  const double dt = ToSeconds(t - last_integrated);
  const int64_t watts = sched.power().draw().value();
  out.allocated_gpu_seconds += dt * sched.allocated_gpus().value();
  out.down_gpu_seconds += dt * static_cast<double>(down_gpus);
  out.it_energy_joules += dt * static_cast<double>(watts);
  out.peak_it_watts = std::max(out.peak_it_watts, watts);
  last_integrated = t;
}

void Simulator::Impl::Loop() {
  out.pue = topo.pue();
  double flops = 0;
  for (int32_t n = 0; n < topo.num_nodes(); ++n) {
    flops += static_cast<double>(topo.node_gpus(NodeId(n)).value()) *
             static_cast<double>(topo.node_model(NodeId(n)).peak_bf16.value()) * 1e9;
  }
  out.peak_flops_per_gpu =
      topo.num_gpus().value() > 0 ? flops / static_cast<double>(topo.num_gpus().value()) : 0;
  const Time horizon = config.horizon.value() > 0 ? config.horizon : Time(INT64_MAX);
  const double span = config.horizon.value() > 0
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
    if (p != Phase::kQueued && p != Phase::kDone) out.jobs[i].held += out.end - state[i].run_start;
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
