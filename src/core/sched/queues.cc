#include "core/sched/queues.h"

#include <algorithm>

namespace unipool::sched {

const char* QueuePolicyName(QueuePolicy p) {
  return p == QueuePolicy::kFifo ? "fifo" : "best-effort";
}

const char* QueueOrderName(QueueOrder o) {
  switch (o) {
    case QueueOrder::kShortestFirst:
      return "sjf";
    case QueueOrder::kLeastAttained:
      return "las";
    case QueueOrder::kSubmission:
      break;
  }
  return "submission";
}

bool ParseQueueOrder(const std::string& name, QueueOrder* out) {
  for (QueueOrder o :
       {QueueOrder::kSubmission, QueueOrder::kShortestFirst, QueueOrder::kLeastAttained}) {
    if (name == QueueOrderName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

static Status CheckSpec(const QueueSpec& spec) {
  if (spec.weight < 1) return InvalidArgument("queue '" + spec.name + "': weight must be >= 1");
  if (spec.guarantee.value() < 0 || spec.limit.value() < 0) {
    return InvalidArgument("queue '" + spec.name + "': guarantee and limit must be >= 0");
  }
  if (spec.limit.value() > 0 && spec.guarantee > spec.limit) {
    return InvalidArgument("queue '" + spec.name + "': guarantee " +
                           std::to_string(spec.guarantee.value()) + " exceeds limit " +
                           std::to_string(spec.limit.value()));
  }
  if (spec.grace.value() < 0) return InvalidArgument("queue '" + spec.name + "': negative grace");
  return Status::Ok();
}

Result<QueueId> QueueTree::Add(const QueueSpec& spec) {
  if (spec.name.empty()) return InvalidArgument("queue name must not be empty");
  if (Find(spec.name)) return AlreadyExists("queue '" + spec.name + "' already exists");
  UNIPOOL_RETURN_IF_ERROR(CheckSpec(spec));
  QueueId parent;
  if (!spec.parent.empty()) {
    std::optional<QueueId> p = Find(spec.parent);
    if (!p) return NotFound("queue '" + spec.name + "': no parent queue '" + spec.parent + "'");
    parent = *p;
    queues_[parent.value()].children++;
  }
  queues_.push_back(Node{spec, parent, 0, Gpus(0)});
  if (spec.guarantee.value() > 0) ++with_guarantee_;
  return QueueId(static_cast<int32_t>(queues_.size() - 1));
}

Status QueueTree::Update(QueueId q, const QueueSpec& spec) {
  Node& n = queues_[q.value()];
  QueueSpec next = spec;
  next.name = n.spec.name;
  next.parent = n.spec.parent;
  UNIPOOL_RETURN_IF_ERROR(CheckSpec(next));
  with_guarantee_ += (next.guarantee.value() > 0) - (n.spec.guarantee.value() > 0);
  n.spec = next;
  return Status::Ok();
}

std::optional<QueueId> QueueTree::Find(const std::string& name) const {
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (queues_[i].spec.name == name) return QueueId(static_cast<int32_t>(i));
  }
  return std::nullopt;
}

void QueueTree::Charge(QueueId q, Gpus delta) {
  for (QueueId a = q; a.valid(); a = parent(a)) queues_[a.value()].used += delta;
}

std::optional<QueueId> QueueTree::LimitExceededBy(QueueId q, Gpus more) const {
  for (QueueId a = q; a.valid(); a = parent(a)) {
    const QueueSpec& s = spec(a);
    if (s.limit.value() > 0 && used(a) + more > s.limit) return a;
  }
  return std::nullopt;
}

bool QueueTree::WithinGuarantee(QueueId q, Gpus more) const {
  bool any = false;
  for (QueueId a = q; a.valid(); a = parent(a)) {
    const Gpus g = spec(a).guarantee;
    if (g.value() == 0) continue;
    any = true;
    if (used(a) + more > g) return false;
  }
  return any;
}

bool QueueTree::Borrows(QueueId q, Gpus more) const {
  if (with_guarantee_ == 0) return false;
  return !WithinGuarantee(q, more);
}

Gpus QueueTree::Borrowed(QueueId q) const {
  if (with_guarantee_ == 0) return Gpus(0);
  Gpus least = used(q);
  for (QueueId a = q; a.valid(); a = parent(a)) {
    const Gpus g = spec(a).guarantee;
    if (g.value() == 0) continue;
    least = std::min(least, used(a) > g ? used(a) - g : Gpus(0));
  }
  return least;
}

double QueueTree::ShareKey(QueueId q) const {
  const QueueSpec& s = spec(q);
  const double u = static_cast<double>(used(q).value());
  if (s.guarantee.value() > 0 && used(q) < s.guarantee) {
    return -1.0 + u / static_cast<double>(s.guarantee.value());  // in [-1, 0)
  }
  return u / static_cast<double>(s.weight);
}

}  // namespace unipool::sched
