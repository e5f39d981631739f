// The scheduler's queries: a job's state, why it waits or runs where it
// does (in words), and the invariants check.
#include <cstdio>
#include <string>
#include <variant>

#include "core/sched/scheduler.h"

namespace unipool::sched {

// ---- Queries -------------------------------------------------------------------

const JobInfo* Scheduler::Find(JobId id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

static std::string At(Time t, const SchedulerOptions& o) {
  if (t.value() < 0) return "an unknown time (running jobs give no estimates)";
  return o.format_time ? o.format_time(t) : "t=" + std::to_string(t.value() / 1000000000) + "s";
}

// "38.4 kW", "1.92 MW".
static std::string Power(Watts w) {
  char buf[32];
  if (w.value() >= 1000000) {
    std::snprintf(buf, sizeof buf, "%.2f MW", w.value() / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f kW", w.value() / 1e3);
  }
  return buf;
}

std::string Scheduler::ExplainReason(const PendingReason& r) const {
  struct Visitor {
    const Scheduler& s;
    std::string operator()(const reason::New&) { return "waiting for the next scheduling cycle"; }
    std::string operator()(const reason::OverLimit& o) {
      return "queue '" + s.queues_.spec(o.queue).name +
             "' is at its limit: " + std::to_string(o.used.value()) + " of " +
             std::to_string(o.limit.value()) + " GPUs in use";
    }
    std::string operator()(const reason::NoBorrowing& o) {
      return "queue '" + s.queues_.spec(o.queue).name +
             "' has no guaranteed GPUs left and non-preemptible jobs may not borrow idle ones";
    }
    std::string operator()(const reason::NotEnoughGpus& o) {
      return "not enough free GPUs: needs " + std::to_string(o.need.value()) + ", " +
             std::to_string(o.free.value()) + " free";
    }
    std::string operator()(const reason::NoContiguousBlock& o) {
      return "no contiguous block: needs " + std::to_string(o.need.value()) + " GPUs within one " +
             s.topo_->tier(o.tier).name + ", the largest free block is " +
             std::to_string(o.largest.value());
    }
    std::string operator()(const reason::BehindFifoHead& o) {
      return "queue is strict FIFO: waiting behind job " + std::to_string(o.head.value());
    }
    std::string operator()(const reason::WaitingForReservation& o) {
      return "GPUs are reserved for job " + std::to_string(o.holder.value()) + " from " + At(o.at, s.options_) +
             "; this job would delay it (give a runtime estimate that ends before then, or make "
             "it preemptible, to backfill)";
    }
    std::string operator()(const reason::HoldsReservation& o) {
      std::string where = o.tier >= 0 ? " in " + s.topo_->tier(o.tier).name + " " +
                                            s.topo_->group_name(o.tier, o.group)
                                      : "";
      return "next to run: GPUs" + where + " are reserved for it from " + At(o.at, s.options_);
    }
    std::string operator()(const reason::WaitingForPreemption& o) {
      std::string ids;
      for (JobId v : o.victims) ids += (ids.empty() ? "" : ", ") + std::to_string(v.value());
      return "preempting job(s) " + ids +
             " to make room; they have their grace period to checkpoint";
    }
    std::string operator()(const reason::Infeasible& o) { return "can never run: " + o.why; }
    std::string operator()(const reason::WaitingForCompact& o) {
      char pct[16];
      std::snprintf(pct, sizeof pct, "%.0f%%", o.slowdown * 100);
      const std::string& tier = s.topo_->tier(o.tier).name;
      const std::string& held = s.topo_->tier(o.held_tier).name;
      return "waiting for room in " + held + " " + s.topo_->group_name(o.held_tier, o.group) +
             " from " + At(o.at, s.options_) + ": it fits now only across more " + tier +
             "s than it needs, which would cost ~" + pct + " of its step time; it starts anyway at " +
             At(o.until, s.options_) + " (spec.topology.maxWait; 0s starts at once)";
    }
    std::string operator()(const reason::WaitingForPower& o) {
      return "waiting for power: " + s.topo_->tier(o.tier).name + " " +
             s.topo_->group_name(o.tier, o.group) + " draws " + Power(o.draw) + " of its " +
             Power(o.cap) + " cap, and starting " + std::to_string(o.need.value()) +
             " more GPUs would exceed it; it starts when work there ends (spec.power.caps)";
    }
  };
  return std::visit(Visitor{*this}, r);
}

std::optional<std::string> Scheduler::WhyNever(const JobSpec& spec) const {
  return Infeasible(NewJob(spec, Time(0)));
}

std::string Scheduler::Unblock(const PendingReason& r, const JobSpec& spec) const {
  const bool elastic = spec.min_gpus.value() > 0;
  struct Visitor {
    const Scheduler& s;
    bool elastic;
    std::string operator()(const reason::New&) {
      return "nothing: it is decided at the next cycle";
    }
    std::string operator()(const reason::OverLimit& o) {
      const std::string q = s.queues_.spec(o.queue).name;
      return "it starts when queue '" + q + "' has " + std::to_string(o.limit.value()) +
             " GPUs' room again (its running jobs end), or when an admin raises the limit of '" +
             q + "'; or submit it to another queue";
    }
    std::string operator()(const reason::NoBorrowing& o) {
      return "make it preemptible (spec.preemptible: true) so that it may borrow idle GPUs, or "
             "raise the guarantee of queue '" +
             s.queues_.spec(o.queue).name + "'";
    }
    std::string operator()(const reason::NotEnoughGpus& o) {
      std::string out = "it starts when " + std::to_string(o.need.value() - o.free.value()) +
                        " more GPUs are free";
      if (o.free.value() > 0) {
        out += "; a request of at most " + std::to_string(o.free.value()) + " GPUs fits now";
        if (!elastic) out += " (or make it elastic with minGpus)";
      }
      return out;
    }
    std::string operator()(const reason::NoContiguousBlock& o) {
      return "a request of at most " + std::to_string(o.largest.value()) + " GPUs fits one " +
             s.topo_->tier(o.tier).name + " now; or relax spec.topology so that it may spread";
    }
    std::string operator()(const reason::BehindFifoHead& o) {
      return "it runs after job " + std::to_string(o.head.value()) +
             " (strict FIFO queue); raise its priority or use a non-FIFO queue";
    }
    std::string operator()(const reason::WaitingForReservation& o) {
      return "give a spec.timeLimit ending before " + At(o.at, s.options_) +
             " or make it preemptible, and it backfills now; else it waits for job " +
             std::to_string(o.holder.value());
    }
    std::string operator()(const reason::HoldsReservation& o) {
      return o.at.value() >= 0 ? "nothing: it starts at " + At(o.at, s.options_)
                               : "nothing: it is next, when running jobs end";
    }
    std::string operator()(const reason::WaitingForPreemption&) {
      return "nothing: it starts when the preempted jobs have stopped";
    }
    std::string operator()(const reason::Infeasible&) {
      return "resubmit asking for what exists (the numbers above: fewer GPUs, or without the "
             "spec.topology.within or partition that limits it), or add nodes; then `unipool "
             "cancel` this one";
    }
    std::string operator()(const reason::WaitingForCompact& o) {
      return "nothing: it starts by " + At(o.until, s.options_) +
             " at the latest; set spec.topology.maxWait: 0s to start spread at once";
    }
    std::string operator()(const reason::WaitingForPower&) {
      return "it starts when work under the power cap ends; or ask an admin to raise "
             "spec.power.caps";
    }
  };
  return std::visit(Visitor{*this, elastic}, r);
}

const char* Scheduler::ReasonCode(const PendingReason& r) {
  struct Visitor {
    const char* operator()(const reason::New&) { return "New"; }
    const char* operator()(const reason::OverLimit&) { return "QueueLimit"; }
    const char* operator()(const reason::NoBorrowing&) { return "NoGuarantee"; }
    const char* operator()(const reason::NotEnoughGpus&) { return "Resources"; }
    const char* operator()(const reason::NoContiguousBlock&) { return "Topology"; }
    const char* operator()(const reason::BehindFifoHead&) { return "Priority"; }
    const char* operator()(const reason::WaitingForReservation&) { return "Reserved"; }
    const char* operator()(const reason::HoldsReservation&) { return "Resources"; }
    const char* operator()(const reason::WaitingForPreemption&) { return "Preempting"; }
    const char* operator()(const reason::Infeasible&) { return "Infeasible"; }
    const char* operator()(const reason::WaitingForCompact&) { return "Topology"; }
    const char* operator()(const reason::WaitingForPower&) { return "Power"; }
  };
  return std::visit(Visitor{}, r);
}

Time Scheduler::EstimatedStart(const PendingReason& r) {
  if (const auto* compact = std::get_if<reason::WaitingForCompact>(&r)) return compact->at;
  const auto* held = std::get_if<reason::HoldsReservation>(&r);
  return held ? held->at : Time(-1);
}

std::string Scheduler::Explain(JobId id) const {
  const JobInfo* job = Find(id);
  if (!job) return "unknown job";
  switch (job->phase) {
    case JobPhase::kPending:
      return "pending: " + ExplainReason(job->reason);
    case JobPhase::kPreempting:
      return "preempting: must stop by " + At(job->preempt_deadline, options_);
    default:
      break;
  }
  std::string out = "running on " + DescribePlacement(*topo_, job->placement);
  if (job->partition >= 0 && topo_->partitions().size() > 1) {
    out += "; partition " + topo_->partitions()[job->partition];
  }
  out += "; the lowest tier with room, best-fit at each tier";
  if (job->borrowing) out += "; beyond its queue's guarantee, so other queues may reclaim it";
  return out;
}

Status Scheduler::CheckInvariants() const {
  std::vector<GpuMask> used(topo_->num_nodes(), 0);
  std::vector<int64_t> queue_used(queues_.size(), 0);
  for (JobId id : running_) {
    const JobInfo& j = jobs_.at(id);
    const int64_t gpus = j.allocated().value();
    const bool size_ok = j.spec.min_gpus.value() > 0
                             ? gpus >= j.spec.min_gpus.value() && gpus <= j.spec.gpus.value()
                             : gpus == j.spec.gpus.value();
    if (!size_ok)
      return Status(StatusCode::kInternal, "job " + std::to_string(id.value()) + " holds " +
                                               std::to_string(gpus) + " GPUs");
    for (const Task& t : j.placement.tasks) {
      if (used[t.node.value()] & t.gpus) {
        return Status(StatusCode::kInternal,
                      "a GPU on node " + topo_->node_name(t.node) + " is allocated twice");
      }
      used[t.node.value()] |= t.gpus;
      if (global_.free_mask(t.node) & t.gpus) {
        return Status(StatusCode::kInternal,
                      "node " + topo_->node_name(t.node) + " shows allocated GPUs as free");
      }
    }
    for (QueueId q = j.spec.queue; q.valid(); q = queues_.parent(q)) queue_used[q.value()] += gpus;
  }
  for (int32_t q = 0; q < queues_.size(); ++q) {
    const QueueSpec& spec = queues_.spec(QueueId(q));
    if (queue_used[q] != queues_.used(QueueId(q)).value()) {
      return Status(StatusCode::kInternal, "queue '" + spec.name + "' usage is out of step");
    }
    if (spec.limit.value() > 0 && queue_used[q] > spec.limit.value()) {
      return Status(StatusCode::kInternal, "queue '" + spec.name + "' is over its limit");
    }
  }
  size_t pending = 0;
  for (const auto& set : pending_) {
    for (const PendingKey& k : set) {
      if (jobs_.at(k.id).phase != JobPhase::kPending) {
        return Status(StatusCode::kInternal,
                      "job " + std::to_string(k.id.value()) + " is queued but not pending");
      }
      ++pending;
    }
  }
  if (pending != pending_count_)
    return Status(StatusCode::kInternal, "pending count is out of step");
  return Status::Ok();
}

}  // namespace unipool::sched
