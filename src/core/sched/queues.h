// QueueTree: hierarchical queues (org -> team -> project) with a guaranteed
// quota, a limit, a fair-share weight and a policy each. Jobs belong to leaf
// queues; usage is charged to the leaf and every ancestor.
//
// Guarantees and borrowing. A job runs "within guarantee" when every queue on
// its path that has a guarantee stays within it, and at least one does. A
// job that is not within guarantee borrows idle capacity; borrowed GPUs are
// reclaimed by preemption when a queue needs its guarantee back. Limits are
// hard: no queue on the path ever exceeds its limit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/base/ids.h"
#include "core/base/status.h"
#include "core/base/units.h"

namespace unipool::sched {

using QueueId = Id<struct QueueIdTag>;

enum class QueuePolicy {
  kBestEffort,  // a job that cannot start does not hold back those behind it
  kFifo,        // strict: nothing behind the head starts before it
};

// The order of a queue's pending jobs of the same priority (a higher
// priority always goes first; ties go to the earlier submission, then the
// lower id).
enum class QueueOrder {
  kSubmission,     // first come, first served
  kShortestFirst,  // SJF: shortest runtime estimate first; none given: last
  // LAS (Tiresias): least attained service first, the GPU-seconds a job's
  // runs have held so far; a new job has none. It orders the queue and
  // preempts nothing: a running job keeps its GPUs until it ends or is
  // preempted for the usual reasons (guarantees, priority).
  kLeastAttained,
};

struct QueueSpec {
  std::string name;    // unique
  std::string parent;  // "" for a top-level queue
  Gpus guarantee;      // 0 = none
  Gpus limit;          // 0 = no limit
  int64_t weight = 1;  // fair-share weight, >= 1
  QueuePolicy policy = QueuePolicy::kBestEffort;
  QueueOrder order = QueueOrder::kSubmission;
  Duration grace = Seconds(120);  // checkpoint grace given to its preempted jobs
};

class QueueTree {
 public:
  // Adds a queue. Errors: empty or duplicate name, unknown parent, a parent
  // that already holds jobs is fine (it stops being a leaf only for new
  // children), weight < 1, guarantee above limit.
  Result<QueueId> Add(const QueueSpec& spec);
  // Changes guarantee, limit, weight, policy, order or grace (not name or
  // parent).
  Status Update(QueueId q, const QueueSpec& spec);

  std::optional<QueueId> Find(const std::string& name) const;
  int32_t size() const { return static_cast<int32_t>(queues_.size()); }
  const QueueSpec& spec(QueueId q) const { return queues_[q.value()].spec; }
  QueueId parent(QueueId q) const { return queues_[q.value()].parent; }
  bool is_leaf(QueueId q) const { return queues_[q.value()].children == 0; }
  Gpus used(QueueId q) const { return queues_[q.value()].used; }

  // Adds `delta` (may be negative) to q and its ancestors.
  void Charge(QueueId q, Gpus delta);

  // The first queue on q's path (leaf first) that `more` GPUs would push
  // over its limit; nullopt when all stay within limits.
  std::optional<QueueId> LimitExceededBy(QueueId q, Gpus more) const;
  // Whether q's usage plus `more` is within guarantee (see above).
  bool WithinGuarantee(QueueId q, Gpus more) const;
  // Whether q's usage plus `more` would borrow: some queue on its path would
  // go over its guarantee, or none on its path has one while other queues
  // do (their owners may reclaim). In a tree without any guarantee nobody
  // borrows.
  bool Borrows(QueueId q, Gpus more) const;
  bool Borrowing(QueueId q) const { return Borrows(q, Gpus(0)); }
  // The GPUs q holds above the guarantees on its path: what reclaiming may
  // take from it while every queue on the path keeps its guarantee (the
  // least excess over the path's guarantees; all of q's usage when none on
  // its path has one while other queues do; 0 in a tree without any).
  // Taking more would put q below a guarantee, and q would take it back:
  // preemption would go round in circles.
  Gpus Borrowed(QueueId q) const;

  // Fair-share order key: queues within guarantee first (least used share
  // of guarantee first), then by usage per unit of weight. Smaller goes
  // first. Usage granted earlier in a cycle counts at once (Charge).
  double ShareKey(QueueId q) const;

 private:
  struct Node {
    QueueSpec spec;
    QueueId parent;
    int32_t children = 0;
    Gpus used;
  };
  std::vector<Node> queues_;
  int32_t with_guarantee_ = 0;  // queues whose guarantee is > 0
};

const char* QueuePolicyName(QueuePolicy p);
// "submission", "sjf" or "las", as the queue API and sim files spell them;
// ParseQueueOrder is the inverse (false for any other text).
const char* QueueOrderName(QueueOrder o);
bool ParseQueueOrder(const std::string& name, QueueOrder* out);

}  // namespace unipool::sched
