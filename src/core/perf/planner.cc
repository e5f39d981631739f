#include "core/perf/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/perf/launch.h"

namespace unipool::perf {
namespace {

std::vector<int32_t> PowersOfTwo(int32_t max) {
  std::vector<int32_t> v;
  for (int64_t x = 1; x <= max; x *= 2) v.push_back(static_cast<int32_t>(x));
  return v;
}

std::vector<int32_t> Fixed(int32_t fixed, std::vector<int32_t> candidates) {
  if (fixed > 0) return {fixed};
  return candidates;
}

std::vector<int32_t> TpCandidates(const ModelSpec& m, const SearchOptions& o) {
  std::vector<int32_t> v;
  for (int32_t tp : Fixed(o.tp, PowersOfTwo(o.max_tp))) {
    if (m.heads % tp != 0 || m.kv_heads % tp != 0) continue;  // Megatron divides KV heads
    if (m.dense_layers() > 0 && m.ffn_hidden % tp != 0) continue;
    if (m.is_moe() && m.moe.expert_ffn_hidden % tp != 0) continue;
    v.push_back(tp);
  }
  return v;
}

std::vector<int32_t> CpCandidates(const ModelSpec& m, const SearchOptions& o) {
  std::vector<int32_t> v;
  for (int32_t cp : Fixed(o.cp, PowersOfTwo(o.max_cp))) {
    if (cp == 1 || (m.seq_len % (2 * cp) == 0 && m.seq_len / cp >= 1024)) v.push_back(cp);
  }
  return v;
}

// Divisors of n that are at most `max`, ascending.
std::vector<int32_t> DivisorsUpTo(int64_t n, int32_t max) {
  std::vector<int32_t> v;
  for (int64_t d = 1; d <= max && d <= n; ++d) {
    if (n % d == 0) v.push_back(static_cast<int32_t>(d));
  }
  return v;
}

// 1, 2, ..., n.
std::vector<int32_t> UpTo(int64_t n) {
  std::vector<int32_t> v;
  for (int64_t d = 1; d <= n; ++d) v.push_back(static_cast<int32_t>(d));
  return v;
}

std::vector<Recompute> RecomputeCandidates(const Job& job, const SearchOptions& o) {
  if (o.recompute) return {*o.recompute};
  if (job.framework.flash_attention) return {Recompute::kNone, Recompute::kFull};
  return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
}

// Keeps the k best by (step time, plan).
class TopK {
 public:
  explicit TopK(size_t k) : k_(k) {}
  void Offer(const Plan& p, const Estimate& e) {
    if (items_.size() == k_ && !Better(p, e, items_.back())) return;
    RankedPlan r{p, e};
    auto it = std::lower_bound(
        items_.begin(), items_.end(), r,
        [this](const RankedPlan& a, const RankedPlan& b) { return Better(a.plan, a.estimate, b); });
    items_.insert(it, std::move(r));
    if (items_.size() > k_) items_.pop_back();
  }
  std::vector<RankedPlan> Take() { return std::move(items_); }

 private:
  static bool Better(const Plan& p, const Estimate& e, const RankedPlan& than) {
    if (e.time.step != than.estimate.time.step) return e.time.step < than.estimate.time.step;
    return p < than.plan;
  }
  size_t k_;
  std::vector<RankedPlan> items_;
};

struct SearchState {
  const Job& job;
  const HardwareView& hw;
  const SearchOptions& o;
  TopK top;
  PlanSearch result;
  double smallest_need = 0;  // bytes, over plans that did not fit
  bool any_valid = false;
};

void NoteMisfit(SearchState& st, double need) {
  ++st.result.pruned_memory;
  if (st.smallest_need == 0 || need < st.smallest_need) st.smallest_need = need;
}

// Micro-batch, interleaving, recomputation for one layout.
void SearchSchedules(SearchState& st, Plan base) {
  const int64_t per_rank = st.job.global_batch / base.dp;
  for (Recompute rc : RecomputeCandidates(st.job, st.o)) {
    base.recompute = rc;
    for (int32_t mbs : Fixed(st.o.micro_batch, PowersOfTwo(st.o.max_micro_batch))) {
      if (per_rank % mbs != 0) continue;
      const int64_t m = per_rank / mbs;
      base.micro_batch = mbs;
      bool any_fit = false;
      // Any v with at least one layer per chunk: the layers need not divide
      // evenly (ChunkLayers deals the remainder; the heaviest stage holds
      // ceil(L/p) layers for every v).
      std::vector<int32_t> vpps = {1};
      if (base.pp > 1 && m % base.pp == 0) {
        vpps = UpTo(std::min<int64_t>(st.job.model.layers / base.pp, st.o.max_vpp));
      }
      for (int32_t v : Fixed(st.o.vpp, vpps)) {
        if (v > 1 &&
            (base.pp == 1 || m % base.pp != 0 || int64_t{base.pp} * v > st.job.model.layers))
          continue;
        Plan p = base;
        p.vpp = v;
        if (st.o.deepspeed && !DeepSpeedSupports(p).ok()) continue;
        ++st.result.considered;
        st.any_valid = true;
        const MemoryBreakdown mem = EstimateMemory(st.job, st.hw, p);
        if (!mem.fits()) {
          NoteMisfit(st, static_cast<double>(mem.total.value()));
          if (!st.o.ignore_memory) continue;
        }
        any_fit = true;
        ++st.result.evaluated;
        st.top.Offer(p, EvaluateUnchecked(st.job, st.hw, p));
      }
      if (!any_fit) break;  // bigger micro-batches need more memory still
    }
  }
}

// A lower bound of the memory one GPU needs (model state + runtime): no plan
// with this layout and ZeRO stage fits if this alone does not.
double ModelStateNeed(const SearchState& st, const Plan& p) {
  const ParamCounts pc = CountParams(st.job.model);
  const double per_gpu_dense =
      (pc.total - pc.expert_ffn * st.job.model.moe.experts * st.job.model.moe_layers()) / p.pp /
      p.tp;
  const double per_gpu_expert = pc.expert_ffn * st.job.model.moe.experts *
                                st.job.model.moe_layers() / p.pp / p.expert_tp() / p.ep;
  const int64_t dp = int64_t{p.dp} * p.cp;
  const double need = ModelState(per_gpu_dense, p.zero, dp).total() +
                      ModelState(per_gpu_expert, p.zero, p.expert_dp()).total() +
                      kRuntimeReserveBytes;
  return need;
}

void SearchLayout(SearchState& st, Plan base) {
  // (ep, etp): EP carved out of DP with the experts TP-split like the
  // dense layers (etp = tp), or, for tp > 1, whole experts (etp = 1) with EP
  // folded over TP x DP (Megatron-Core's parallel folding).
  std::vector<std::pair<int32_t, int32_t>> eps = {{1, 0}};
  if (st.job.model.is_moe()) {
    eps.clear();
    const ModelSpec& m = st.job.model;
    std::vector<int32_t> etps = {base.tp};
    if (base.tp > 1) etps.push_back(1);
    for (int32_t etp : etps) {
      if (st.o.etp > 0 && etp != st.o.etp) continue;
      if (m.moe.expert_ffn_hidden % etp != 0) continue;
      const int64_t ranks = int64_t{base.tp} * base.cp * base.dp / etp;
      for (int32_t ep : Fixed(st.o.ep, PowersOfTwo(m.moe.experts))) {
        const bool carved = etp == base.tp ? base.dp % ep == 0 : ranks % ep == 0 && ep > 1;
        if (m.moe.experts % ep == 0 && carved) eps.push_back({ep, etp == base.tp ? 0 : etp});
      }
    }
  }
  std::vector<RankOrder> orders = {RankOrder::kTpCpDpPp};
  if (base.pp > 1 && base.dp > 1) orders.push_back(RankOrder::kTpCpPpDp);
  if (st.o.order) orders = {*st.o.order};
  const bool sharded = int64_t{base.dp} * base.cp > 1;
  for (const auto& [ep, etp] : eps) {
    base.ep = ep;
    base.etp = etp;
    for (RankOrder order : orders) {
      base.order = order;
      for (int32_t zero = 0; zero <= 3; ++zero) {
        if (st.o.zero >= 0 && zero != st.o.zero) continue;
        if (zero > 0 && !sharded && st.o.zero < 0) continue;  // nothing to shard over
        base.zero = zero;
        const double need = ModelStateNeed(st, base);
        if (need > static_cast<double>(st.hw.gpu.hbm.value()) && !st.o.ignore_memory) {
          NoteMisfit(st, need);
          continue;
        }
        SearchSchedules(st, base);
      }
    }
  }
}

void SearchAll(SearchState& st) {
  const ModelSpec& m = st.job.model;
  const int64_t n = st.hw.gpus;
  for (int32_t tp : TpCandidates(m, st.o)) {
    for (int32_t cp : CpCandidates(m, st.o)) {
      if (n % (int64_t{tp} * cp) != 0) continue;
      const int64_t rest = n / (int64_t{tp} * cp);
      for (int32_t pp : Fixed(st.o.pp, DivisorsUpTo(rest, m.layers))) {
        if (rest % pp != 0) continue;
        const int64_t dp = rest / pp;
        if ((st.o.dp > 0 && dp != st.o.dp) || st.job.global_batch % dp != 0) continue;
        Plan p;
        p.tp = tp;
        p.cp = cp;
        p.pp = pp;
        p.dp = static_cast<int32_t>(dp);
        p.sequence_parallel = st.o.sequence_parallel.value_or(tp > 1);
        SearchLayout(st, p);
      }
    }
  }
}

// ---- Explanations ----------------------------------------------------------

std::string Pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", x * 100);
  return buf;
}

std::string Gb(Bytes b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(b.value()) / 1e9);
  return buf;
}

std::string TierName(const HardwareView& hw, int t) {
  return t >= 0 && t < static_cast<int>(hw.tiers.size()) ? "'" + hw.tiers[t].name + "'" : "?";
}

struct Component {
  std::string name;
  double best = 0, alt = 0;
};

std::vector<Component> Components(const Estimate& b, const Estimate& a) {
  std::vector<Component> c;
  c.push_back({"compute", ToSeconds(b.time.compute), ToSeconds(a.time.compute)});
  c.push_back({"recompute", ToSeconds(b.time.recompute), ToSeconds(a.time.recompute)});
  c.push_back({"bubble", ToSeconds(b.time.bubble), ToSeconds(a.time.bubble)});
  c.push_back({"optimizer", ToSeconds(b.time.optimizer), ToSeconds(a.time.optimizer)});
  for (size_t i = 0; i < b.time.comm.size(); ++i) {
    c.push_back({CommPartName(static_cast<CommPart>(i)), ToSeconds(b.time.comm[i]),
                 ToSeconds(a.time.comm[i])});
  }
  return c;
}

std::string CommReason(const HardwareView& hw, const RankedPlan& best, const RankedPlan& alt,
                       CommPart part, const std::string& growth) {
  const size_t i = static_cast<size_t>(part);
  const int bt = best.estimate.time.comm_tier[i], at = alt.estimate.time.comm_tier[i];
  const std::string what = CommPartName(part);
  if (at > bt && at > 0) {
    std::string dim = part == CommPart::kTp   ? "TP=" + std::to_string(alt.plan.tp) + " crosses"
                      : part == CommPart::kEp ? "EP=" + std::to_string(alt.plan.ep) + " crosses"
                      : part == CommPart::kCp ? "CP=" + std::to_string(alt.plan.cp) + " crosses"
                      : part == CommPart::kPp ? "pipeline neighbours cross"
                                              : "the DP group crosses";
    const int below = at - 1;
    return dim + " the " + TierName(hw, below) + " domain (" +
           std::to_string(hw.tiers[below].group_gpus) + " GPUs) into " + TierName(hw, at) + ": " +
           growth + " " + what;
  }
  return growth + " exposed " + what;
}

}  // namespace

std::string PlanDiff(const Plan& from, const Plan& to) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (from.tp != to.tp) add("tp" + std::to_string(to.tp));
  if (from.pp != to.pp) add("pp" + std::to_string(to.pp));
  if (from.vpp != to.vpp) add("v" + std::to_string(to.vpp));
  if (from.dp != to.dp) add("dp" + std::to_string(to.dp));
  if (from.cp != to.cp) add("cp" + std::to_string(to.cp));
  if (from.ep != to.ep) add("ep" + std::to_string(to.ep));
  if (from.etp != to.etp) add("etp" + std::to_string(to.expert_tp()));
  if (from.micro_batch != to.micro_batch) add("mbs" + std::to_string(to.micro_batch));
  if (from.zero != to.zero) add("zero" + std::to_string(to.zero));
  if (from.recompute != to.recompute) add(std::string("rc=") + RecomputeName(to.recompute));
  if (from.order != to.order) add(RankOrderName(to.order));
  if (from.sequence_parallel != to.sequence_parallel) add(to.sequence_parallel ? "sp" : "no-sp");
  return s.empty() ? "same plan" : s;
}

std::string ExplainLoss(const HardwareView& hw, const RankedPlan& best, const RankedPlan& alt) {
  const Estimate& b = best.estimate;
  const Estimate& a = alt.estimate;
  if (!a.memory.fits()) {
    return "does not fit: needs " + Gb(a.memory.total) + " of " + Gb(a.memory.usable) +
           " (activations " + Gb(a.memory.activations) + ", model state " +
           Gb(a.memory.weights + a.memory.grads + a.memory.optimizer) + ")";
  }
  // The component that grew the most explains the loss.
  const std::vector<Component> comps = Components(b, a);
  size_t worst = 0;
  double worst_delta = -1e300;
  for (size_t i = 0; i < comps.size(); ++i) {
    const double d = comps[i].alt - comps[i].best;
    if (d > worst_delta) {
      worst_delta = d;
      worst = i;
    }
  }
  const Component& c = comps[worst];
  const double slowdown = a.step_s / b.step_s - 1;
  // "+38%" of the component, or, when the best plan has none of it, its
  // share of the best plan's step.
  const std::string growth =
      c.best > 0 ? Pct(c.alt / c.best - 1) : Pct((c.alt - c.best) / b.step_s) + " of the step in";
  std::string why;
  if (worst >= 4) {
    why = CommReason(hw, best, alt, static_cast<CommPart>(worst - 4), growth);
  } else if (c.name == "bubble") {
    char buf[96];
    std::snprintf(buf, sizeof buf, "pipeline bubble %.1f%% of the ideal time vs %.1f%%",
                  a.bubble_fraction * 100, b.bubble_fraction * 100);
    why = buf;
  } else if (c.name == "compute" && a.gemm_efficiency < b.gemm_efficiency - 0.005) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "smaller GEMMs run at %.0f%% of peak vs %.0f%%: %s compute",
                  a.gemm_efficiency * 100, b.gemm_efficiency * 100, growth.c_str());
    why = buf;
  } else if (c.name == "recompute") {
    why =
        std::string(RecomputeName(alt.plan.recompute)) + " recomputation: " + growth + " recompute";
  } else {
    why = growth + " " + c.name;
  }
  return Pct(slowdown) + " step time: " + why;
}

namespace {

// Neighbours of the best plan: one dimension moved one step, DP absorbing
// the change so the GPU count stays.
std::vector<Plan> Neighbours(const Plan& b) {
  std::vector<Plan> v;
  auto scaled = [&](int32_t Plan::*dim, bool up) {
    Plan p = b;
    if (up) {
      if (p.dp % 2 != 0) return;
      p.*dim *= 2;
      p.dp /= 2;
    } else {
      if (p.*dim % 2 != 0) return;
      p.*dim /= 2;
      p.dp *= 2;
    }
    if (p.tp > 1 && !b.sequence_parallel && b.tp == 1) p.sequence_parallel = true;
    v.push_back(p);
  };
  for (int32_t Plan::*dim : {&Plan::tp, &Plan::pp, &Plan::cp}) {
    scaled(dim, true);
    scaled(dim, false);
  }
  Plan p = b;
  p.micro_batch = b.micro_batch * 2;
  v.push_back(p);
  if (b.micro_batch > 1) {
    p.micro_batch = b.micro_batch / 2;
    v.push_back(p);
  }
  p = b;
  p.ep = b.ep * 2;
  v.push_back(p);
  if (b.ep > 1) {
    p.ep = b.ep / 2;
    v.push_back(p);
  }
  for (int32_t vpp : {1, 2, b.vpp * 2}) {
    p = b;
    p.vpp = vpp;
    if (vpp != b.vpp) v.push_back(p);
  }
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    p = b;
    p.recompute = rc;
    if (rc != b.recompute) v.push_back(p);
  }
  for (int32_t zero = 0; zero <= 3; ++zero) {
    p = b;
    p.zero = zero;
    if (zero != b.zero) v.push_back(p);
  }
  p = b;
  p.order = b.order == RankOrder::kTpCpDpPp ? RankOrder::kTpCpPpDp : RankOrder::kTpCpDpPp;
  if (b.pp > 1 && b.dp > 1) v.push_back(p);
  return v;
}

std::string WhyBest(const HardwareView& hw, const RankedPlan& best) {
  const Estimate& e = best.estimate;
  const Plan& p = best.plan;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: %.3f s/step, %.1f%% MFU, %.0f tokens/s/GPU. ",
                Describe(p).c_str(), e.step_s, e.mfu * 100, e.tokens_per_s_per_gpu);
  std::string s = buf;
  const int tp_tier = e.time.comm_tier[static_cast<size_t>(CommPart::kTp)];
  if (p.tp > 1) {
    s += tp_tier <= 0
             ? "TP=" + std::to_string(p.tp) + " stays inside the " + TierName(hw, 0) + " domain (" +
                   std::to_string(hw.tiers[0].group_gpus) + " GPUs); "
             : "TP=" + std::to_string(p.tp) + " spans up to " + TierName(hw, tp_tier) + "; ";
  }
  const double exposed = ToSeconds(e.time.exposed_comm());
  double total = 0;
  for (const Duration& d : e.time.comm_total) total += ToSeconds(d);
  std::snprintf(buf, sizeof buf,
                "GEMMs at %.0f%% of peak; communication %.1f%% of the step exposed (%.0f%% of it "
                "hidden); bubble %.1f%% of the step; memory %s of %s.",
                e.gemm_efficiency * 100, exposed / e.step_s * 100,
                total > 0 ? (1 - exposed / total) * 100 : 100.0,
                ToSeconds(e.time.bubble) / e.step_s * 100, Gb(e.memory.total).c_str(),
                Gb(e.memory.usable).c_str());
  return s + buf;
}

void Explain(const Job& job, const HardwareView& hw, PlanSearch& r) {
  const RankedPlan& best = r.top.front();
  r.why_best = WhyBest(hw, best);
  std::vector<Plan> seen = {best.plan};
  auto add = [&](const Plan& p, const Estimate& e) {
    if (std::find(seen.begin(), seen.end(), p) != seen.end()) return;
    seen.push_back(p);
    RankedPlan alt{p, e};
    Alternative a{p,
                  e,
                  PlanDiff(best.plan, p),
                  ExplainLoss(hw, best, alt),
                  e.memory.fits() ? e.step_s / best.estimate.step_s - 1 : 0,
                  e.memory.fits()};
    r.alternatives.push_back(std::move(a));
  };
  for (size_t i = 1; i < r.top.size(); ++i) add(r.top[i].plan, r.top[i].estimate);
  for (const Plan& p : Neighbours(best.plan)) {
    if (!CheckPlan(job, hw.gpus, p).ok()) continue;
    add(p, EvaluateUnchecked(job, hw, p));
  }
}

}  // namespace

Result<PlanSearch> Search(const Job& job, const HardwareView& hw, const SearchOptions& options) {
  UNIPOOL_RETURN_IF_ERROR(Validate(job.model));
  if (job.global_batch < 1) return InvalidArgument("global batch: must be at least 1 sequence");
  SearchState st{job, hw, options, TopK(static_cast<size_t>(std::max(1, options.top_k))), {}};
  SearchAll(st);
  st.result.top = st.top.Take();
  if (st.result.top.empty()) {
    if (!st.any_valid && st.result.pruned_memory == 0) {
      return InvalidArgument("no valid plan: no split of " + std::to_string(hw.gpus) +
                             " GPUs divides the model and the global batch of " +
                             std::to_string(job.global_batch) + " sequences");
    }
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "no plan fits in %.1f GB per GPU: the smallest needs %.1f GB; add GPUs or "
                  "shrink the batch",
                  static_cast<double>(hw.gpu.hbm.value()) / 1e9, st.smallest_need / 1e9);
    return ResourceExhausted(buf);
  }
  if (options.explain) Explain(job, hw, st.result);
  return std::move(st.result);
}

}  // namespace unipool::perf
