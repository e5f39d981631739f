#include "core/sim/storage.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace unipool::sim {

int64_t SharedBandwidth::Start(Time now, double bytes, double cap) {
  Advance(now);
  transfers_.push_back(Transfer{next_id_, std::max(0.0, bytes), cap});
  Share();
  return next_id_++;
}

void SharedBandwidth::Remove(Time now, int64_t id) {
  Advance(now);
  auto it = std::find_if(transfers_.begin(), transfers_.end(),
                         [&](const Transfer& t) { return t.id == id; });
  if (it == transfers_.end()) return;
  transfers_.erase(it);
  Share();
}

void SharedBandwidth::Advance(Time now) {
  if (now <= at_) return;
  const double dt = ToSeconds(now - at_);
  for (Transfer& t : transfers_) t.left = std::max(0.0, t.left - t.rate * dt);
  at_ = now;
}

// Water-filling: the smallest caps first, each getting the lesser of its
// cap and an equal share of what is left.
void SharedBandwidth::Share() {
  std::vector<size_t> order(transfers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return transfers_[a].cap != transfers_[b].cap ? transfers_[a].cap < transfers_[b].cap
                                                  : transfers_[a].id < transfers_[b].id;
  });
  double left = aggregate_;
  for (size_t k = 0; k < order.size(); ++k) {
    Transfer& t = transfers_[order[k]];
    t.rate = std::min(t.cap, left / static_cast<double>(order.size() - k));
    left -= t.rate;
  }
}

std::optional<std::pair<Time, int64_t>> SharedBandwidth::NextCompletion() const {
  std::optional<std::pair<Time, int64_t>> best;
  for (const Transfer& t : transfers_) {
    const double ns = t.rate > 0 ? std::ceil(t.left / t.rate * 1e9) : 0;
    const Time at = at_ + Nanoseconds(static_cast<int64_t>(std::min(ns, 9e18)));
    if (!best || at < best->first || (at == best->first && t.id < best->second)) {
      best = std::make_pair(at, t.id);
    }
  }
  return best;
}

double SharedBandwidth::rate(int64_t id) const {
  for (const Transfer& t : transfers_) {
    if (t.id == id) return t.rate;
  }
  return 0;
}

int64_t CheckpointTraffic::Start(Time now, int64_t job, bool drain, double bytes, double cap) {
  const int64_t id = bw_.Start(now, bytes, cap);
  owner_[id] = {job, drain};
  return id;
}

void CheckpointTraffic::Cancel(Time now, int64_t id) {
  if (owner_.erase(id) > 0) bw_.Remove(now, id);
}

std::optional<Time> CheckpointTraffic::NextEnd() const {
  const auto next = bw_.NextCompletion();
  if (!next) return std::nullopt;
  return next->first;
}

std::optional<CheckpointTraffic::Ended> CheckpointTraffic::TakeEnded(Time now) {
  bw_.Advance(now);
  const auto next = bw_.NextCompletion();
  if (!next || next->first > now) return std::nullopt;
  const auto [job, drain] = owner_.at(next->second);
  Cancel(now, next->second);
  return Ended{next->second, job, drain};
}

}  // namespace unipool::sim
