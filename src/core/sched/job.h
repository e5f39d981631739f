// Jobs as the scheduler sees them: the request (JobSpec), why one waits
// (PendingReason), and what the scheduler decides (Decision). Plain data.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/base/units.h"
#include "core/sched/placement.h"
#include "core/sched/queues.h"

namespace unipool::sched {

class JobId {
 public:
  constexpr JobId() = default;
  constexpr explicit JobId(int64_t v) : v_(v) {}
  constexpr int64_t value() const { return v_; }
  constexpr auto operator<=>(const JobId&) const = default;

 private:
  int64_t v_ = -1;
};

// A gang request. All-or-nothing: gpus / task_gpus tasks of task_gpus GPUs,
// each task on one node (a node may host several of the job's tasks).
struct JobSpec {
  JobId id;
  std::string name;
  QueueId queue;         // a leaf queue
  int32_t priority = 0;  // higher goes first within a queue
  bool preemptible = true;
  Gpus gpus;              // requested; the maximum for elastic jobs
  int32_t task_gpus = 0;  // GPUs per task; 0 = the largest divisor of gpus
                          // that fits the largest node
  // 0: a node may host several of the job's tasks (pack); 1: each task on a
  // node of its own (GPUs per node, spread). Such jobs restart from scratch
  // when a node fails without a hot spare, and do not grow.
  int32_t max_tasks_per_node = 0;
  // Elastic: runs with any multiple of `step` from min_gpus to gpus.
  Gpus min_gpus;                     // 0 = not elastic
  Gpus step;                         // 0 = task_gpus
  // Elastic continue: a resize (a lost node, a shrink for another job,
  // growth) keeps the job's processes running at the new membership; the
  // survivors keep their in-memory state and lose no work (ResizeJob
  // in_place). A lost node shrinks such a job to its survivors instead of
  // requeueing it, while they are at least min_gpus. Off: a resize
  // restarts every process from the checkpoint at the new size.
  bool continue_on_resize = false;
  Duration runtime_estimate;         // 0 = unknown
  Duration checkpoint_cost;          // time to write a checkpoint; 0 = unknown
  Duration restart_cost;             // time from start to useful work
  // It writes a checkpoint when told to stop (SIGTERM), within its queue's
  // grace when checkpoint_cost fits in it: preempting it then loses the
  // write and the restart, not the work since its last checkpoint.
  bool saves_on_stop = false;
  int required_tier = -1;            // the gang must fit in one group of it; -1 none
  // Compactness, soft (SchedulerOptions::compact_max_wait): a gang that
  // fits now only across more than one group of `preferred_tier` (-1: the
  // lowest tier whose group could hold it) may wait up to `compact_max_wait`
  // (-1: the scheduler's; 0: never waits) for a place inside one, when the
  // expected wait is shorter than what spreading would cost it.
  // `comm_share`: the share of its step spent in collectives placed
  // compactly (-1: the scheduler's default), for that cost.
  int preferred_tier = -1;
  Duration compact_max_wait = Duration(-1);
  double comm_share = -1;
  int32_t partition = -1;            // -1: the global level chooses
  bool span_partitions = false;      // may use several partitions at once
  int32_t preferred_partition = -1;  // data-locality hint
};

// Why a job is pending. Closed: every pending job has exactly one.
namespace reason {
struct New {};  // not yet considered
struct OverLimit {
  QueueId queue;
  Gpus used;
  Gpus limit;
};
struct NoBorrowing {
  QueueId queue;
};  // non-preemptible jobs need guarantee
struct NotEnoughGpus {
  Gpus need;
  Gpus free;
};
struct NoContiguousBlock {
  Gpus need;
  int tier;
  Gpus largest;
};  // largest block at tier
struct BehindFifoHead {
  JobId head;
};
struct WaitingForReservation {
  JobId holder;
  Time at;
};
struct HoldsReservation {
  Time at;
  int tier;
  GroupId group;
};  // at < 0: unknown
struct WaitingForPreemption {
  std::vector<JobId> victims;
};
struct Infeasible {
  std::string why;
};  // can never run as asked
// It fits now only over more groups of `tier` than it needs; its fewest
// groups free enough for it at `at`, sooner than the spread would cost. It
// starts spread at `until` at the latest.
struct WaitingForCompact {
  int tier;        // where it would use more groups than it needs
  int held_tier;   // the group reserved for it: one of `tier`, or their parent
  GroupId group;
  Time at;
  Time until;
  double slowdown;  // of its steps, placed spread
};
// Enough GPUs are free, but starting it would take a power domain (`tier`,
// `group`) over its cap: it waits for running work to end there.
struct WaitingForPower {
  Gpus need;
  int tier;
  GroupId group;
  Watts draw;
  Watts cap;
};
}  // namespace reason

using PendingReason =
    std::variant<reason::New, reason::OverLimit, reason::NoBorrowing, reason::NotEnoughGpus,
                 reason::NoContiguousBlock, reason::BehindFifoHead, reason::WaitingForReservation,
                 reason::HoldsReservation, reason::WaitingForPreemption, reason::Infeasible,
                 reason::WaitingForCompact, reason::WaitingForPower>;

// Decisions the scheduler hands to its driver (server or simulator).
struct StartJob {
  JobId job;
  Placement placement;
  int32_t partition = -1;  // -1: spans partitions
};
struct PreemptJob {
  JobId job;
  JobId for_job;
  Time deadline;                 // SIGTERM now; kill at the deadline if still running
  int64_t lost_gpu_seconds = 0;  // work since the last checkpoint + restart
};
struct ResizeJob {
  JobId job;
  Placement placement;  // the whole new placement
  Gpus from;
  // The processes on kept slices go on at the new membership (an elastic
  // continue job); else every process restarts from the checkpoint.
  bool in_place = false;
  NodeId lost_node;  // the lost node it shrank off, if that was the cause
};
struct RequeueJob {
  JobId job;
  NodeId failed_node;  // lost (down), or the node it left (Scheduler::Replace)
  Time from_checkpoint;
  int64_t lost_gpu_seconds = 0;
  std::string why;  // "": failed_node was lost; else why the job left it
};
struct FailJob {
  JobId job;
  std::string why;  // infeasible, will never run
};
struct CordonNode {
  NodeId node;
  std::string why;
};
using Decision = std::variant<StartJob, PreemptJob, ResizeJob, RequeueJob, FailJob, CordonNode>;

enum class JobPhase { kPending, kRunning, kPreempting, kDone };
const char* JobPhaseName(JobPhase p);

}  // namespace unipool::sched

template <>
struct std::hash<unipool::sched::JobId> {
  size_t operator()(unipool::sched::JobId id) const { return std::hash<int64_t>()(id.value()); }
};
