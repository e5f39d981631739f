// The rules, one per M21 trouble: each reads the input and adds a cause
// with its evidence. Phases: the events (failures by their log hint, the
// training watch's findings, lost nodes, hangs), the scheduler's reason
// when pending, the run's signals (communication share, throughput), and
// last a failure that no rule explains.
#include "server/diagnosis.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <map>

#include "io/text.h"
#include "io/time_format.h"

namespace unipool::server {
namespace {

bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string Percent(double share) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.0f%%", share * 100);
  return buf;
}

std::string Fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// What each cause says and what fixes it, by key (the kind, or the kind
// and a variant: out of memory on the GPU or on the host).
struct CauseText {
  const char* key;
  const char* kind;
  const char* summary;
  const char* fix;
};

constexpr CauseText kCauses[] = {
    {"GpuOutOfMemory", "OutOfMemory", "a rank ran out of GPU memory",
     "lower the micro-batch size, turn on activation checkpointing, or add tensor or pipeline "
     "parallelism (`unipool plan` prints the memory per GPU of each plan)"},
    {"HostOutOfMemory", "OutOfMemory", "a rank ran out of host memory",
     "raise spec.resources.memory (per task) where a limit is set; else use fewer data-loader "
     "workers, a smaller prefetch, or pinned memory only where needed"},
    {"NaNLoss", "NaNLoss", "the loss became NaN or Inf",
     "resume from the last checkpoint before it with a lower learning rate (or longer warm-up), "
     "gradient clipping, and the data around that step checked; in bf16/fp16 check the loss "
     "scaler"},
    {"CommTimeout", "CommTimeout", "a collective timed out: a rank stopped talking to its peers",
     "read the log of the rank that stopped (`unipool logs JOB --rank N`): a hang, a crash or a "
     "slow rank; check its node's network (`unipool describe node NODE`); raise the process "
     "group's timeout only for known long pauses (checkpoints)"},
    {"GradientSpike", "GradientSpike", "the gradient norm spiked, often the step before a NaN loss",
     "watch the loss; clip gradients (e.g. max norm 1.0) and check the data of that step"},
    {"Straggler", "Straggler", "one rank is slower than the others and the whole gang waits for it",
     "cordon its node (`unipool cordon NODE`) or set spec.onStraggler: replace; check the node's "
     "GPU clocks, temperature and other work on it"},
    {"DataStraggler", "DataStraggler",
     "one rank waits for its input data: slow storage or CPU contention on its node",
     "more data-loader workers or prefetch, a local copy of the data (spec.volumes), or cordon "
     "the node (`unipool cordon NODE`) or set spec.onStraggler: replace"},
    {"MemoryGrowth", "MemoryGrowth",
     "a rank's host memory keeps growing: a leak in the training loop, or fragmentation",
     "look for what the loop keeps across steps (a loss summed as a tensor, not with .item(); "
     "lists of outputs; a cache without a bound; data-loader workers that copy the dataset); "
     "compare two heap snapshots (tracemalloc, memray); for fragmentation try jemalloc or "
     "MALLOC_ARENA_MAX=2; checkpoint before it runs out"},
    {"Hung", "Hung", "the job stopped advancing (no new step within spec.progressTimeout)",
     "read the ranks' last lines in the evidence and `unipool logs`; a hang in a collective is "
     "usually one rank that died or stalled; set --hang-hook (py-spy dump) on the agents to see "
     "where"},
    {"ClockSkew", "ClockSkew",
     "a node's clock is off from the server's: timestamps, timeouts and leases computed there "
     "disagree with the others' (log times, checkpoint ages, NCCL/gloo timeouts)",
     "sync its clock (`chronyc tracking`, NTP or PTP), or cordon it (`unipool cordon NODE`) "
     "until it is"},
    {"NodeLost", "NodeFailure", "a node of the job failed; the job resumed from its checkpoint",
     "nothing for the job; for the node: `unipool describe node NODE`, and drain it (`unipool "
     "drain NODE`) if it fails again"},
};

const CauseText& TextOf(std::string_view key) {
  for (const CauseText& t : kCauses) {
    if (t.key == key) return t;
  }
  assert(false && "a cause key without its text");
  return kCauses[0];
}

// The causes, by kind, in the order first found; `final` marks the cause
// of the event that ended the job's last run.
class Causes {
 public:
  Cause& Get(const std::string& kind, const std::string& summary, const std::string& fix) {
    for (Cause& c : causes_) {
      if (c.kind == kind) return c;
    }
    causes_.push_back(Cause{kind, summary, {}, fix});
    return causes_.back();
  }
  // Quotes `e` under the cause of `key` (kCauses), unless an event already
  // quoted there says the same (a CommTimeout event and the failure it
  // ended in).
  void Quote(std::string_view key, const JobEvent& e) {
    const CauseText& t = TextOf(key);
    Cause& c = Get(t.kind, t.summary, t.fix);
    std::vector<std::string>& said = said_[c.kind];
    for (const std::string& m : said) {
      if (e.message.find(m) != std::string::npos) return;
    }
    said.push_back(e.message);
    c.evidence.push_back(e.type + " at " + io::FormatTime(e.time) + ": " + e.message);
  }
  void MarkFinal(std::string_view key) { final_ = TextOf(key).kind; }
  bool Any(const std::string& kind) const {
    return std::any_of(causes_.begin(), causes_.end(),
                       [&](const Cause& c) { return c.kind == kind; });
  }
  // Pending first, then the final cause, then the others in order.
  std::vector<Cause> Take() {
    auto rank = [&](const Cause& c) { return c.kind == "Pending" ? 0 : c.kind == final_ ? 1 : 2; };
    std::stable_sort(causes_.begin(), causes_.end(),
                     [&](const Cause& a, const Cause& b) { return rank(a) < rank(b); });
    return std::move(causes_);
  }

 private:
  std::vector<Cause> causes_;
  std::map<std::string, std::vector<std::string>> said_;  // quoted messages, by kind
  std::string final_;
};

// A failure's message is the agent's: the failed rank's exit, the kernel's
// OOM kills, and "likely <hint>" from its log (agent/launcher.h DiagnoseLog).
// The cause key it shows, "" for none.
std::string_view FailureKey(const std::string& m) {
  if (Has(m, "GPU out of memory")) return "GpuOutOfMemory";
  if (Has(m, "OOM killer") || Has(m, "host out of memory") || Has(m, "often out of memory") ||
      Has(m, "out-of-memory killer")) {
    return "HostOutOfMemory";
  }
  if (Has(m, "NaN loss")) return "NaNLoss";
  if (Has(m, "communication timeout") || Has(m, "NCCL timeout")) return "CommTimeout";
  return "";
}

// The cause key of an event of another type: the training watch's findings
// (control_signals.cc) and hangs by their type, lost nodes by their words.
std::string_view EventKey(const JobEvent& e) {
  const std::string& t = e.type;
  if (t == "NonFiniteLoss") return "NaNLoss";
  for (const char* same : {"CommTimeout", "GradientSpike", "Straggler", "DataStraggler",
                           "MemoryGrowth", "Hung", "ClockSkew"}) {
    if (t == same) return same;
  }
  if ((t == "Requeued" || t == "Disrupted") &&
      (Has(e.message, " lost") || Has(e.message, "fenced")))
    return "NodeLost";
  return "";
}

void FromEvents(const DiagnosisInput& in, Causes& out) {
  for (const JobEvent& e : in.events) {
    const bool failure = e.type == "TaskFailed" || e.type == "Failed";
    const std::string_view key = failure ? FailureKey(e.message) : EventKey(e);
    if (key.empty()) continue;
    out.Quote(key, e);
    if (failure || key == "Hung") out.MarkFinal(key);
  }
}

void FromNodes(const DiagnosisInput& in, Causes& out) {
  for (const NodeRecord& n : in.nodes) {
    std::string bad;
    if (!n.alive && n.registered) bad = "is down (no heartbeat within the lease)";
    if (n.health != "ok" && n.health != "unknown") bad = "health: " + n.health;
    for (const GpuSample& g : n.gpu_samples) {
      if (g.ecc_uncorrected > 0) {
        bad = "GPU " + std::to_string(g.index) + " has " + std::to_string(g.ecc_uncorrected) +
              " uncorrected ECC errors";
      }
    }
    if (n.clock_skewed) {
      char offset[48];
      std::snprintf(offset, sizeof offset, "%+.3f s", n.clock_offset_s);
      const CauseText& t = TextOf("ClockSkew");
      out.Get(t.kind, t.summary, t.fix)
          .evidence.push_back("node " + n.name + "'s clock is " + offset +
                              " from the server's now");
    }
    if (bad.empty()) continue;
    out.Get("NodeFailure", "a node of the job is unhealthy",
            "drain it (`unipool drain " + n.name + "`) so the job restarts elsewhere")
        .evidence.push_back("node " + n.name + " " + bad);
  }
}

void FromPending(const DiagnosisInput& in, Causes& out) {
  if (in.job.state != JobState::kPending) return;
  std::string summary = "pending (" + (in.reason.empty() ? std::string("New") : in.reason) +
                        ") since " + io::FormatTime(in.job.submitted);
  Cause& c = out.Get("Pending", summary, in.unblock);
  c.evidence.push_back("scheduler: " + in.explain);
  if (in.reason == "Infeasible") c.summary = "it can never run as asked";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// A run whose ranks spend most of each step in collectives scales poorly:
// unless they wait for a straggler, which the straggler rules name.
void FromSignals(const DiagnosisInput& in, Causes& out) {
  if (in.job.state != JobState::kRunning || in.ranks.size() < 2 || out.Any("Straggler") ||
      out.Any("DataStraggler")) {
    return;
  }
  std::vector<double> shares;
  for (const auto& [rank, r] : in.ranks) {
    if (r.step_time.value() > 0) shares.push_back(double(r.comm.value()) / r.step_time.value());
  }
  const double share = Median(shares);
  if (shares.size() < 2 || share <= 0.5) return;
  out.Get("CommunicationBound",
          "poor scaling: the ranks spend " + Percent(share) + " of each step in communication",
          "fewer, larger ranks or more data per step (micro-batch, accumulation), overlap of "
          "communication with compute, or a plan with less data-parallel traffic (`unipool plan`)")
      .evidence.push_back("median over " + std::to_string(shares.size()) +
                          " ranks of communication time / step time at their last report");
}

// Throughput that swings by more than a quarter of its mean over the run's
// last reports: input stalls, contention on shared nodes, thermal limits.
void FromProgress(const DiagnosisInput& in, Causes& out) {
  std::vector<double> tput;
  for (const ControlPlane::ProgressPoint& p : in.progress) {
    if (std::isfinite(p.throughput) && p.throughput > 0) tput.push_back(p.throughput);
  }
  if (tput.size() < 10) return;
  if (tput.size() > 60) tput.erase(tput.begin(), tput.end() - 60);
  double mean = 0, sq = 0;
  for (double v : tput) mean += v;
  mean /= tput.size();
  for (double v : tput) sq += (v - mean) * (v - mean);
  const double cv = std::sqrt(sq / tput.size()) / mean;
  if (cv <= 0.25) return;
  const auto [lo, hi] = std::minmax_element(tput.begin(), tput.end());
  out.Get("FluctuatingThroughput",
          "throughput fluctuates (" + Percent(cv) + " of its mean, one standard deviation)",
          "look for input stalls (data-loading share in the ranks' reports), other work on the "
          "nodes, and GPU clocks or temperature (`unipool describe node`)")
      .evidence.push_back("throughput over its last " + std::to_string(tput.size()) +
                          " reports: min " + Fixed(*lo) + ", median " + Fixed(Median(tput)) +
                          ", max " + Fixed(*hi));
}

void Unexplained(const DiagnosisInput& in, Causes& out, bool explained) {
  if (in.job.state != JobState::kFailed || explained) return;
  std::string fix =
      "read the failed rank's log (`unipool logs " + std::to_string(in.job.id) + " --rank N`)";
  if (in.job.exit_code > 0) fix += "; exit code " + std::to_string(in.job.exit_code);
  out.Get("Failed", "the job failed with no known pattern in its logs", fix)
      .evidence.push_back(in.job.message);
}

}  // namespace

Result<DiagnosisInput> GatherDiagnosis(const ControlPlane& control, int64_t id,
                                       const Scope& scope) {
  DiagnosisInput in;
  Result<JobRecord> job = control.Get(id, scope);
  if (!job.ok()) return job.status();
  in.job = std::move(*job);
  Result<std::vector<JobEvent>> events = control.Events(id, scope);
  if (events.ok()) in.events = std::move(*events);
  if (in.job.state == JobState::kPending) {
    Result<std::string> why = control.Explain(id, scope);
    if (why.ok()) in.explain = *why;
    const auto pending = control.Pending({id});
    if (auto it = pending.find(id); it != pending.end()) in.reason = it->second.reason;
    in.unblock = control.Unblock(id);
  }
  for (const TaskView& t : in.job.tasks) {
    Result<NodeRecord> n = control.Node(t.node);
    if (n.ok()) in.nodes.push_back(std::move(*n));
  }
  Result<std::vector<ControlPlane::ProgressPoint>> progress = control.Progress(id, scope);
  if (progress.ok()) in.progress = std::move(*progress);
  in.ranks = control.RankSignals(id);
  return in;
}

std::vector<Cause> Diagnose(const DiagnosisInput& in) {
  Causes out;
  FromPending(in, out);
  FromEvents(in, out);
  const bool explained =
      out.Any("OutOfMemory") || out.Any("NaNLoss") || out.Any("CommTimeout") || out.Any("Hung");
  FromNodes(in, out);
  FromSignals(in, out);
  FromProgress(in, out);
  Unexplained(in, out, explained);
  return out.Take();
}

std::string DiagnosisText(const JobRecord& job, const std::vector<Cause>& causes) {
  std::string out = "job " + std::to_string(job.id) + " (" + job.request.name + ") " +
                    JobStateName(job.state) + ": ";
  out += causes.empty() ? "nothing looks wrong\n"
                        : io::Count(static_cast<int64_t>(causes.size()), "likely cause") + "\n";
  for (const Cause& c : causes) {
    out += "\n" + c.kind + ": " + c.summary + "\n";
    for (const std::string& e : c.evidence) out += "  evidence: " + e + "\n";
    if (!c.fix.empty()) out += "  fix: " + c.fix + "\n";
  }
  return out;
}

}  // namespace unipool::server
