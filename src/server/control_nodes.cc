// ControlPlane, nodes and queues: admin states, heartbeats and leases' input,
// joins, assignments; queue definitions and their limits.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/sim/young_daly.h"
#include "io/quote.h"
#include "server/control.h"
#include "server/control_internal.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

// ---- Nodes -----------------------------------------------------------------

std::vector<NodeRecord> ControlPlane::Nodes() const {
  std::lock_guard lock(mu_);
  return nodes_;
}

Result<NodeRecord> ControlPlane::Node(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto n = topo_.FindNode(name);
  if (!n) return NotFound("node '" + name + "' not found");
  return nodes_[n->value()];
}

void ControlPlane::SetSchedNodeState(NodeRecord& n, Time now) {
  NodeState s = NodeState::kUp;
  if (!n.alive)
    s = NodeState::kDown;
  else if (n.admin == "drained")
    s = NodeState::kDrained;
  else if (n.admin == "cordoned" || n.not_responding)
    s = NodeState::kCordoned;
  else if (n.admin == "flaky")
    s = NodeState::kFlaky;
  if (s == n.state) return;
  n.state = s;
  (void)sched_->SetNodeState(*topo_.FindNode(n.name), s, now);
  dirty_ = true;
}

Result<NodeRecord> ControlPlane::SetNodeAdmin(const std::string& name, const std::string& action,
                                              const std::string& why) {
  int64_t rev = 0;
  NodeRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' not found");
    NodeRecord& n = nodes_[id->value()];
    if (action == "cordon")
      n.admin = "cordoned";
    else if (action == "drain")
      n.admin = "drained";
    else if (action == "uncordon")
      n.admin = "";
    else
      return InvalidArgument("action: expected cordon, drain or uncordon, got " +
                             io::Quote(action));
    n.why = action == "uncordon" ? "" : why;
    SetSchedNodeState(n, Now());
    Txn txn;
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    copy = n;
    log_.Info("control", "node " + action, {{"node", name}, {"why", why}});
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return copy;
}

std::vector<std::pair<std::string, std::string>> ControlPlane::Peers(const std::string& name,
                                                                     size_t limit,
                                                                     int64_t* live) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  *live = 0;
  for (const NodeRecord& n : nodes_) {
    if (!n.alive) continue;
    ++*live;
    if (n.name != name && !n.agent_url.empty() && out.size() < limit) {
      out.emplace_back(n.name, n.agent_url);
    }
  }
  return out;
}

bool ControlPlane::BeatChanges(const NodeRecord& n, const HeartbeatInfo& info) {
  return !n.alive || n.not_responding || n.health != info.health || n.address != info.address ||
         n.agent_url != info.agent_url;
}

bool ControlPlane::RenewLease(const std::string& name, const HeartbeatInfo& info) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  auto id = topo_.FindNode(name);
  if (!id) return false;
  NodeRecord& n = nodes_[id->value()];
  if (info.health != "ok" || BeatChanges(n, info)) return false;
  n.last_heartbeat = Now();
  n.agent_secret = info.agent_secret;
  n.gpu_samples = info.gpus;
  n.gpu_xids = info.xids;
  NoteClockLocked(n, info.clock_offset_s);
  return true;
}

Status ControlPlane::Heartbeat(const std::string& name, const HeartbeatInfo& info) {
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    (void)WritableLocked();  // catch up first: `n` below must be current
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' not found");
    NodeRecord& n = nodes_[id->value()];
    const Time now = Now();
    n.last_heartbeat = now;
    n.agent_secret = info.agent_secret;
    n.gpu_samples = info.gpus;
    n.gpu_xids = info.xids;
    NoteClockLocked(n, info.clock_offset_s);
    const bool sick = info.health != "ok" && n.admin.empty();
    if (!sick && !BeatChanges(n, info)) return Status::Ok();  // the common case: memory only
    // A change is written; while the store is read-only, the lease above
    // is renewed all the same and the change waits for the next beat.
    UNIPOOL_RETURN_IF_ERROR(store_.Writable());
    // At most one durable change a second per node: an agent that flips
    // its address on every beat cannot flood the store and its watchers.
    if (n.alive && !sick && !n.not_responding && now - n.last_written < Seconds(1)) {
      return ResourceExhausted("node " + name +
                               ": its heartbeat changes state more than once a second; the "
                               "lease is renewed, send the change again later");
    }
    n.last_written = now;
    n.health = info.health;
    if (!info.address.empty()) n.address = info.address;
    if (!info.agent_url.empty()) n.agent_url = info.agent_url;
    n.not_responding = false;
    if (sick) {
      n.admin = "drained";
      n.why = "health check: " + info.health;
      metrics_.Add("unipool_node_failures_total", {{"partition", n.partition}});
      log_.Warn("control", "node drained by its health check",
                {{"node", name}, {"health", info.health}});
    }
    if (!n.alive) log_.Info("control", "node up", {{"node", name}});
    n.alive = true;
    SetSchedNodeState(n, now);
    Txn txn;
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  work_.notify_one();
  return SyncOrRebuild(rev);
}

Status ControlPlane::Register(const std::string& name, const std::string& token_hash,
                              bool live_ok) {
  int64_t rev = 0;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    auto id = topo_.FindNode(name);
    if (!id) return NotFound("node '" + name + "' is not in the cluster file");
    NodeRecord& n = nodes_[id->value()];
    const Duration since = Now() - n.last_heartbeat;
    if (!live_ok && n.registered && n.alive && n.last_heartbeat.value() > 0 &&
        since < options_.node_lease) {
      return FailedPrecondition(
          "node " + name + " has a live agent (last heartbeat " +
          std::to_string(ToSeconds(since)).substr(0, 4) +
          " s ago): a join token registers only a node without one; re-join with the node's "
          "own token (a restarted agent does) or an admin token, or wait until its lease (" +
          std::to_string(options_.node_lease.value() / 1000000000) + " s) lapses");
    }
    n.registered = true;
    std::erase_if(node_tokens_, [&](const auto& kv) { return kv.second == name; });
    node_tokens_[token_hash] = name;
    Txn txn;
    txn.Put(AgentKey(name), Json{{"sha256", token_hash}}.dump());
    WriteNode(n, txn);
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
  }
  return SyncOrRebuild(rev);
}

std::optional<std::string> ControlPlane::NodeOfToken(const std::string& token_hash) const {
  std::lock_guard lock(mu_);
  auto it = node_tokens_.find(token_hash);
  if (it == node_tokens_.end()) return std::nullopt;
  return it->second;
}

std::vector<JobRecord> ControlPlane::Assignments(const std::string& name) const {
  std::lock_guard lock(mu_);
  std::vector<JobRecord> out;
  auto id = topo_.FindNode(name);
  if (!id) return out;
  std::set<int64_t> seen;
  for (JobId j : sched_->JobsOn(*id)) {
    out.push_back(jobs_.at(j.value()));
    seen.insert(j.value());
  }
  for (int64_t j : clearing_) {
    const JobRecord& job = jobs_.at(j);
    if (job.clearing.contains(name) && !seen.contains(j)) out.push_back(job);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

std::vector<int64_t> ControlPlane::JobsOn(const std::string& name, const Scope& scope) const {
  std::vector<int64_t> out;
  for (const JobRecord& j : Assignments(name)) {
    if (scope.Sees(j.request.queue)) out.push_back(j.id);
  }
  return out;
}

std::vector<ControlPlane::NodeUsage> ControlPlane::UsageLocked() const {
  std::vector<NodeUsage> out(topo_.num_nodes());
  for (int64_t id : active_) {
    const JobRecord& job = jobs_.at(id);
    if (job.state != JobState::kRunning && job.state != JobState::kPreempting) continue;
    for (const TaskView& t : job.tasks) {
      if (auto n = topo_.FindNode(t.node)) {
        NodeUsage& u = out[n->value()];
        u.allocated += static_cast<int32_t>(t.gpus.size());
        if (u.jobs.empty() || u.jobs.back().first != id) u.jobs.emplace_back(id, job.request.queue);
      }
    }
  }
  for (int32_t i = 0; i < topo_.num_nodes(); ++i) {
    out[i].free = static_cast<int32_t>(sched_->pool().free(NodeId(i)));
  }
  return out;
}

Result<std::vector<ControlPlane::GroupUsage>> ControlPlane::GroupView(int tier, int32_t group,
                                                                      int64_t job) const {
  if (tier < 0 || tier >= topo_.num_tiers()) {
    return NotFound("tier " + std::to_string(tier) + ": the cluster has tiers 0 to " +
                    std::to_string(topo_.top_tier()));
  }
  if (group < 0 || group >= topo_.num_groups(tier)) {
    return NotFound("group " + std::to_string(group) + " of tier " + topo_.tier(tier).name +
                    ": it has " + std::to_string(topo_.num_groups(tier)) + " groups");
  }
  std::lock_guard lock(mu_);
  const std::vector<NodeUsage> usage = UsageLocked();
  std::map<int32_t, int64_t> job_gpus;  // by node index
  if (auto it = jobs_.find(job); job > 0 && it != jobs_.end()) {
    for (const TaskView& t : it->second.tasks) {
      if (auto n = topo_.FindNode(t.node)) job_gpus[n->value()] += t.gpus.size();
    }
  }
  // The sums over a contiguous range of nodes.
  auto sum = [&](GroupUsage& g, int32_t first, int32_t count) {
    for (int32_t i = first; i < first + count; ++i) {
      ++g.nodes;
      g.gpus += nodes_[i].gpus;
      g.allocated += usage[i].allocated;
      g.free += usage[i].free;
      if (nodes_[i].state == NodeState::kDown) ++g.nodes_down;
      for (const GpuSample& gpu : nodes_[i].gpu_samples) {
        if (gpu.power_w < 0) continue;
        g.power_w += gpu.power_w;
        ++g.power_gpus;
      }
      if (auto j = job_gpus.find(i); j != job_gpus.end()) g.job_gpus += j->second;
    }
  };
  const GroupId g(group);
  std::vector<GroupUsage> out(1);
  out[0].name = topo_.group_name(tier, g);
  out[0].tier = tier;
  out[0].index = group;
  sum(out[0], topo_.group_first_node(tier, g).value(), topo_.group_num_nodes(tier, g));
  const int32_t first = topo_.group_first_child(tier, g);
  for (int32_t c = first; c < first + topo_.group_num_children(tier, g); ++c) {
    GroupUsage child;
    child.index = c;
    if (tier == 0) {
      child.name = nodes_[c].name;
      child.state = NodeStateName(nodes_[c].state);
      sum(child, c, 1);
    } else {
      child.tier = tier - 1;
      child.name = topo_.group_name(tier - 1, GroupId(c));
      sum(child, topo_.group_first_node(tier - 1, GroupId(c)).value(),
          topo_.group_num_nodes(tier - 1, GroupId(c)));
    }
    out.push_back(std::move(child));
  }
  return out;
}

std::map<std::string, ControlPlane::NodeUsage> ControlPlane::Usage() const {
  std::lock_guard lock(mu_);
  const std::vector<NodeUsage> usage = UsageLocked();
  std::map<std::string, NodeUsage> out;
  for (int32_t i = 0; i < topo_.num_nodes(); ++i) out.emplace(nodes_[i].name, usage[i]);
  return out;
}

// ---- Queues ----------------------------------------------------------------

std::vector<QueueRecord> ControlPlane::Queues(const Scope& scope) const {
  std::lock_guard lock(mu_);
  const sched::QueueTree& tree = sched_->queues();
  std::vector<QueueRecord> out(tree.size());
  for (int32_t i = 0; i < tree.size(); ++i) {
    out[i].spec = tree.spec(sched::QueueId(i));
    out[i].used = tree.used(sched::QueueId(i));
    if (auto l = limits_.find(out[i].spec.name); l != limits_.end()) out[i].limits = l->second;
  }
  for (int64_t id : active_) {
    const JobRecord& j = jobs_.at(id);
    auto q = tree.Find(j.request.queue);
    if (!q) continue;
    if (j.state == JobState::kPending) {
      out[q->value()].pending++;
      out[q->value()].pending_gpus += Gpus(j.request.gpus);
    } else {
      out[q->value()].running++;
    }
  }
  // Fair share among siblings (top-level queues are siblings of each other).
  std::map<std::string, std::pair<double, int64_t>> siblings;  // parent -> (usage, weight)
  for (QueueRecord& q : out) {
    auto u = usage_.find(q.spec.name);
    q.usage_gpu_hours = u == usage_.end() ? 0 : u->second / 3600.0;
    siblings[q.spec.parent].first += q.usage_gpu_hours;
    siblings[q.spec.parent].second += q.spec.weight;
  }
  for (QueueRecord& q : out) {
    const auto& [usage, weight] = siblings[q.spec.parent];
    q.usage_share = usage > 0 ? q.usage_gpu_hours / usage : 0;
    q.weight_share = weight > 0 ? static_cast<double>(q.spec.weight) / weight : 0;
    q.fair_share = q.weight_share > 0 ? std::exp2(-q.usage_share / q.weight_share) : 0;
  }
  std::erase_if(out, [&](const QueueRecord& q) { return !scope.Sees(q.spec.name); });
  return out;
}

Result<QueueRecord> ControlPlane::SetQueue(const sched::QueueSpec& spec,
                                           const SubmitLimits& limits) {
  int64_t rev = 0;
  QueueRecord copy;
  {
    std::lock_guard lock(mu_);
    UNIPOOL_RETURN_IF_ERROR(WritableLocked());  // read-only: change nothing
    sched::QueueTree& tree = sched_->queues();
    if (spec.name.empty() || spec.name.size() > 63) {
      return InvalidArgument("name: a queue needs a name of 1 to 63 characters");
    }
    if (auto q = tree.Find(spec.name)) {
      if (tree.spec(*q).parent != spec.parent) {
        return InvalidArgument("parent: queue '" + spec.name + "' has parent '" +
                               tree.spec(*q).parent + "'; a parent cannot change");
      }
      UNIPOOL_RETURN_IF_ERROR(tree.Update(*q, spec));
    } else {
      if (!spec.parent.empty() && !tree.Find(spec.parent)) {
        return InvalidArgument("parent: no queue named '" + spec.parent + "'");
      }
      Result<sched::QueueId> added = tree.Add(spec);
      if (!added.ok()) return added.status();
    }
    copy.spec = spec;
    copy.limits = limits;
    copy.used = tree.used(*tree.Find(spec.name));
    limits_[spec.name] = limits;
    Txn txn;
    txn.Put(QueueKey(spec.name), QueueToJson(QueueRecord{spec, limits}).dump());
    Result<int64_t> r = ApplyLocked(txn);
    if (!r.ok()) return r.status();
    rev = *r;
    dirty_ = true;
  }
  work_.notify_one();
  UNIPOOL_RETURN_IF_ERROR(SyncOrRebuild(rev));
  return copy;
}

int64_t ControlPlane::GraceSeconds(const std::string& queue) const {
  std::lock_guard lock(mu_);
  auto q = sched_->queues().Find(queue);
  return q ? sched_->queues().spec(*q).grace.value() / 1000000000 : 120;
}

double ControlPlane::CheckpointIntervalSeconds(const JobRecord& job) const {
  if (job.request.checkpoint_interval.value() > 0)
    return ToSeconds(job.request.checkpoint_interval);
  const double rate = options_.node_failures_per_1000_days;
  if (job.checkpoint_seconds <= 0 || rate <= 0) return 0;
  const double nodes = static_cast<double>(std::max<size_t>(1, job.tasks.size()));
  const double mtbf = 1000 * 86400 / (rate * nodes);
  const auto nanos = [](double s) { return Nanoseconds(static_cast<int64_t>(s * 1e9)); };
  return ToSeconds(sim::DalyInterval(nanos(job.checkpoint_seconds), nanos(mtbf)));
}

}  // namespace unipool::server
