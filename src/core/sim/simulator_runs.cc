// The simulator's job runs: a start and its restart cost, compute
// segments and checkpoints (to storage, direct or two-stage), preemption,
// resizes and each run's rate (simulator_internal.h).
#include <algorithm>
#include <cmath>

#include "core/sim/simulator_internal.h"
#include "core/sim/young_daly.h"

namespace unipool::sim {
namespace {

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

// ---- Stragglers ----------------------------------------------------------------

// Progress per wall second: the share of its GPUs it holds, at the pace
// of its slowest node; the watch is told of each slow node.
double Simulator::Impl::RateOf(int64_t i) {
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
void Simulator::Impl::Rerate(int64_t i, Duration pause) {
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

Duration Simulator::Impl::Interval(const SimJob& j, Gpus alloc, Duration cost) const {
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

void Simulator::Impl::Start(int64_t i, const sched::Placement& placement) {
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

bool Simulator::Impl::TwoStage(int64_t i) const {
  const bool asked = policy.override_two_stage ? policy.two_stage : jobs[i].two_stage;
  return Stored(i) && asked && storage->local_bytes_per_s > 0;
}

// `bytes` at the lesser of `aggregate` and the run's client links.
Duration Simulator::Impl::Transfer(double bytes, double aggregate, const JobState& s) const {
  const double rate = std::min(aggregate, s.nodes * storage->client_bytes_per_s);
  return Nanoseconds(std::llround(bytes / rate * 1e9));
}

// What one checkpoint stalls training: the last one seen, or by the
// model alone on storage (to the fast tier for two-stage).
Duration Simulator::Impl::StallCost(int64_t i) const {
  const JobState& s = state[i];
  if (!Stored(i)) return jobs[i].checkpoint_cost;
  if (TwoStage(i)) {
    return Nanoseconds(
        std::llround(jobs[i].checkpoint_bytes / (s.nodes * storage->local_bytes_per_s) * 1e9));
  }
  if (s.observed_stall.value() > 0) return s.observed_stall;
  return Transfer(jobs[i].checkpoint_bytes, storage->write_bytes_per_s, s);
}

void Simulator::Impl::StartTransfer(int64_t i, bool drain) {
  JobState& s = state[i];
  s.transfer = traffic->Start(now, i, drain, jobs[i].checkpoint_bytes,
                              s.nodes * storage->client_bytes_per_s);
  s.draining = drain;
  RescheduleStorage();
}

void Simulator::Impl::CancelTransfer(int64_t i) {
  JobState& s = state[i];
  s.wait_drain = false;
  if (s.transfer == 0) return;
  if (s.draining) out.drains_lost++;
  traffic->Cancel(now, s.transfer);
  s.transfer = 0;
  s.draining = false;
  RescheduleStorage();
}

void Simulator::Impl::RescheduleStorage() {
  ++storage_epoch;
  if (const std::optional<Time> next = traffic->NextEnd()) {
    Push(std::max(*next, now), Ev::kStorage, 0, storage_epoch);
  }
}

// The transfer due now, if any, is done: a write ends the checkpoint, a
// drain makes the fast copy durable.
void Simulator::Impl::OnStorage(int64_t epoch) {
  if (epoch != storage_epoch) return;
  const std::optional<CheckpointTraffic::Ended> ended = traffic->TakeEnded(now);
  RescheduleStorage();
  if (!ended) return;
  JobState& s = state[ended->job];
  s.transfer = 0;
  s.draining = false;
  ended->drain ? EndDrain(ended->job) : EndWrite(ended->job);
}

void Simulator::Impl::EndDrain(int64_t i) {
  JobState& s = state[i];
  Commit(i, s.undrained);
  s.undrained = Duration(0);
  (void)sched.Checkpointed(Sid(i), s.snapshot_at);
  if (s.wait_drain) {
    s.wait_drain = false;
    Push(now + StallCost(i), Ev::kEndWrite, i, s.epoch);
  }
}

void Simulator::Impl::BeginSegment(int64_t i) {
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

Duration Simulator::Impl::SegmentProgress(const JobState& s) const {
  // (A segment resumed after a pause starts in the future: nothing yet.)
  const double done =
      static_cast<double>(std::max<int64_t>(0, (now - s.seg_start).value())) * s.rate;
  return std::min(s.seg_target, s.seg_done + Nanoseconds(static_cast<int64_t>(done)));
}

void Simulator::Impl::Commit(int64_t i, Duration work) {
  out.jobs[i].committed += work;
  out.useful_gpu_seconds += ToSeconds(work) * static_cast<double>(jobs[i].gpus.value());
}

void Simulator::Impl::EndCompute(int64_t i) {
  const SimJob& j = jobs[i];
  JobState& s = state[i];
  if (out.jobs[i].committed + s.undrained + s.seg_target >= j.work) {  // done
    const sched::JobInfo* info = sched.Find(Sid(i));
    if (info) out.jobs[i].energy_joules = sched.EnergyJoules(*info, now);
    if (!sched.Finish(Sid(i), now).ok()) return;  // not running as the scheduler sees it
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

void Simulator::Impl::EndWrite(int64_t i) {
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
void Simulator::Impl::Preempt(int64_t i, Time deadline) {
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

void Simulator::Impl::StopDone(int64_t i) {
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

void Simulator::Impl::Resize(const sched::ResizeJob& r) {
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
    // A fast copy not yet drained lost the failed node's share: the
    // survivors drain what they hold again.
    if (s.undrained.value() > 0 && s.transfer == 0) StartTransfer(i, /*drain=*/true);
    return Rerate(i, pause);
  }
  s.undrained = Duration(0);
  s.phase = Phase::kRestarting;  // it had not begun: it starts again
  s.rate = RateOf(i);
  Push(now + pause + jobs[i].restart_cost, Ev::kBeginCompute, i, s.epoch);
}

}  // namespace unipool::sim
