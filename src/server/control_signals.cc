// The control plane's watch on training signals: what agents forward of
// the ranks' step times and of rank 0's loss and gradient norm goes through
// the job's train::SignalWindow, and so does each rank's resident memory as
// the agent reads it; its findings become events ("Straggler",
// "DataStraggler", "NonFiniteLoss", "GradientSpike", "MemoryGrowth"),
// unipool_training_anomalies_total, and for a straggler of a job with
// onStraggler: replace, a cordon of its node and a restart without it.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/quote.h"
#include "io/report_line.h"
#include "server/control.h"
#include "server/control_internal.h"
#include "server/records.h"

namespace unipool::server {

using sched::JobId;
using store::Txn;

namespace {
constexpr size_t kMaxRanksPerReport = 4096;

// A rank's resident memory and the step it was read at, when the entry
// has both (rssBytes, step) in range.
std::optional<std::pair<int64_t, Bytes>> RankMemory(const Json& r) {
  if (!r.contains("rssBytes") || !r.contains("step")) return std::nullopt;
  const Json& rss = r["rssBytes"];
  const Json& step = r["step"];
  if (!rss.is_number_integer() || !step.is_number_integer()) return std::nullopt;
  const int64_t bytes = rss.get<int64_t>(), at = step.get<int64_t>();
  if (bytes < 0 || bytes > (int64_t{1} << 50) || at < 0 || r["rank"].get<int64_t>() < 0 ||
      r["rank"].get<int64_t>() > (1 << 24)) {
    return std::nullopt;
  }
  return std::pair{at, Bytes(bytes)};
}

std::string Times(double factor) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", factor);
  return buf;
}
}  // namespace

train::SignalWindow& ControlPlane::WindowLocked(const JobRecord& job) {
  JobSignals& s = signals_[job.id];
  if (s.generation != job.generation || s.membership != job.membership) {
    s = JobSignals{job.generation, job.membership, train::SignalWindow()};
  }
  return s.window;
}

void ControlPlane::SignalsLocked(JobRecord& job, const std::string& data, Time now, Txn& txn) {
  if (job.state != JobState::kRunning) return;
  const Json d = Json::parse(data, nullptr, false);
  if (!d.is_object() || !d.contains("ranks") || !d["ranks"].is_array()) return;
  train::SignalWindow& window = WindowLocked(job);
  size_t n = 0;
  for (const Json& r : d["ranks"]) {
    if (++n > kMaxRanksPerReport) break;
    if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer()) continue;
    const std::string node = r.contains("node") && r["node"].is_string() ? r["node"] : "";
    // Only the job's own nodes: a rank is where the scheduler put it.
    if (!std::any_of(job.tasks.begin(), job.tasks.end(),
                     [&](const TaskView& t) { return t.node == node; })) {
      continue;
    }
    std::vector<train::Finding> found;
    if (std::optional<train::RankSample> s = io::RankSignals(r, 0)) {
      if (r.contains("steps") && r["steps"].is_number_integer()) {
        s->steps = static_cast<int32_t>(std::clamp<int64_t>(r["steps"].get<int64_t>(), 1, 1 << 20));
      }
      s->node = node;
      found = window.AddRank(*s);
    }
    if (std::optional<std::pair<int64_t, Bytes>> m = RankMemory(r)) {
      for (train::Finding& f : window.AddMemory(static_cast<int32_t>(r["rank"].get<int64_t>()),
                                                node, m->first, m->second)) {
        found.push_back(std::move(f));
      }
    }
    for (const train::Finding& f : found) ActOnFinding(job, f, now, txn);
    if (job.state != JobState::kRunning) return;
  }
}

void ControlPlane::LossLocked(JobRecord& job, const std::string& progress, Time now, Txn& txn) {
  if (job.state != JobState::kRunning) return;
  const Json p = Json::parse(progress, nullptr, false);
  if (!p.is_object() || !p.contains("loss")) return;
  const std::optional<double> loss = io::ReportNumber(p["loss"]);
  if (!loss) return;
  const int64_t step =
      p.contains("step") && p["step"].is_number_integer() ? p["step"].get<int64_t>() : 0;
  std::optional<double> norm;
  if (p.contains("gradNorm")) norm = io::ReportNumber(p["gradNorm"]);
  for (const train::Finding& f : WindowLocked(job).AddLoss(step, *loss, norm)) {
    ActOnFinding(job, f, now, txn);
  }
}

std::map<int32_t, train::SignalWindow::RankState> ControlPlane::RankSignals(int64_t id) const {
  std::lock_guard lock(mu_);
  auto job = jobs_.find(id);
  auto it = signals_.find(id);
  if (job == jobs_.end() || it == signals_.end() ||
      it->second.generation != job->second.generation ||
      it->second.membership != job->second.membership) {
    return {};
  }
  return it->second.window.ranks();
}

std::string ControlPlane::Unblock(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != JobState::kPending) return "";
  if (it->second.retry_at.value() > 0) {
    return "nothing: it restarts at " + FormatTime(it->second.retry_at) +
           " (backoff after a failure)";
  }
  const sched::JobInfo* info = sched_->Find(JobId(id));
  return info ? sched_->Unblock(info->reason, info->spec) : "";
}

void ControlPlane::ActOnFinding(JobRecord& job, const train::Finding& f, Time now, Txn& txn) {
  const std::string kind = train::FindingName(f.kind);
  metrics_.Add("unipool_training_anomalies_total", {{"queue", job.request.queue}, {"kind", kind}});
  const bool straggler =
      f.kind == train::FindingKind::kStraggler || f.kind == train::FindingKind::kDataStraggler;
  std::string message = f.Describe();
  auto node = straggler ? topo_.FindNode(f.node) : std::nullopt;
  const bool asked = straggler && node && job.request.on_straggler == "replace";
  // A slow node beats no node: replace only where the job fits without it.
  const bool replace = asked && sched_->HasRoomWithout(JobId(job.id), *node);
  if (asked && !replace) {
    message += "; onStraggler: replace, but the job has no room without " + f.node +
               ": it stays (free GPUs elsewhere, or cordon " + f.node + " when they are)";
  } else if (straggler && !replace) {
    message += "; onStraggler: warn (cordon " + f.node + ", or set onStraggler: replace)";
  }
  if (f.kind == train::FindingKind::kMemoryGrowth) {
    message += "; the run fails when the node's memory or the job's limit runs out";
  }
  if (replace) {
    message +=
        "; onStraggler: replace: cordoning " + f.node +
        (job.request.elastic_continue ? " and swapping it out" : " and restarting without it");
  }
  Write(job, kind, message, txn);
  log_.Info("control", "training anomaly", {{"job", job.id}, {"kind", kind}, {"what", message}});
  if (!replace) return;
  NodeRecord& n = nodes_[node->value()];
  if (n.admin.empty()) {
    n.admin = "cordoned";
    n.why = "straggler: job " + std::to_string(job.id) + " rank " + std::to_string(f.rank) +
            " ran " + Times(f.factor) + " slower than the median rank here";
    SetSchedNodeState(n, now);
    WriteNode(n, txn);
  }
  const Status st =
      sched_->Replace(JobId(job.id), *node,
                      "rank " + std::to_string(f.rank) + " on " + f.node + " straggled (" +
                          Times(f.factor) + " the median); moved off the node",
                      now);
  if (!st.ok())
    log_.Error("control", "cannot replace a straggler: " + st.message(), {{"job", job.id}});
  dirty_ = true;
}

// ---- Clock skew --------------------------------------------------------------

// A heartbeat's clock offset: kept, and a node that goes past the bound is
// noted for the next reconcile (it clears under half the bound).
void ControlPlane::NoteClockLocked(NodeRecord& n, double offset_s) {
  if (std::isnan(offset_s)) return;
  n.clock_offset_s = offset_s;
  const double bound = ToSeconds(options_.max_clock_offset);
  if (!n.clock_skewed && std::abs(offset_s) > bound) {
    n.clock_skewed = true;
    if (auto id = topo_.FindNode(n.name)) clock_onsets_.push_back(id->value());
    dirty_ = true;
  } else if (n.clock_skewed && std::abs(offset_s) < bound / 2) {
    n.clock_skewed = false;
  }
}

// Each node newly skewed: a warning, and an event and an anomaly on every
// job running there (its timestamps, timeouts and leases disagree).
void ControlPlane::ReportClockSkew(Txn& txn) {
  for (int32_t i : clock_onsets_) {
    const NodeRecord& n = nodes_[i];
    if (!n.clock_skewed) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%+.3f s from the server's (bound %.3g s)", n.clock_offset_s,
                  ToSeconds(options_.max_clock_offset));
    const std::string what = "node " + n.name + "'s clock is " + buf;
    log_.Warn("control", "clock skew: " + what, {{"node", n.name}});
    for (JobId id : sched_->JobsOn(NodeId(i))) {
      auto it = jobs_.find(id.value());
      if (it == jobs_.end() || it->second.state != JobState::kRunning) continue;
      metrics_.Add("unipool_training_anomalies_total",
                   {{"queue", it->second.request.queue}, {"kind", "ClockSkew"}});
      Write(it->second, "ClockSkew",
            what +
                ": its timestamps, timeouts and leases disagree with the others'; sync it "
                "(chrony or NTP)",
            txn);
    }
  }
  clock_onsets_.clear();
}

}  // namespace unipool::server
