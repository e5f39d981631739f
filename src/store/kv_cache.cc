#include "store/kv_cache.h"

#include <algorithm>

namespace unipool::store {

Result<int64_t> Store::Commit(const Txn& txn) {
  Result<int64_t> rev = Apply(txn);
  if (!rev.ok()) return rev;
  UNIPOOL_RETURN_IF_ERROR(Sync(*rev));
  return rev;
}

void KvCache::Load(KvMap kvs, int64_t revision) {
  std::lock_guard lock(mu_);
  kvs_ = std::move(kvs);
  revision_ = durable_ = floor_ = revision;
}

void KvCache::Reset(KvMap kvs, int64_t revision) {
  {
    std::lock_guard lock(mu_);
    kvs_ = std::move(kvs);
    history_.clear();
    undo_.clear();
    // Never below a number given out before: a reverted revision's syncer
    // must not see a new transaction under its number.
    revision_ = durable_ = floor_ = std::max(revision_, revision);
    ++failures_;
  }
  changed_.notify_all();
}

void KvCache::SetReadOnly(const Status& why) {
  std::lock_guard lock(mu_);
  read_only_ = why;
}

Status KvCache::CheckCompares(const Txn& txn) const {
  for (const Compare& c : txn.compares) {
    auto it = kvs_.find(c.key);
    const int64_t have = it == kvs_.end() ? 0 : it->second.mod_revision;
    if (have != c.mod_revision) {
      return Aborted("key " + c.key + " changed: revision " + std::to_string(have) + ", expected " +
                     std::to_string(c.mod_revision));
    }
  }
  return Status::Ok();
}

void KvCache::Record(Event e) {
  history_.push_back(std::move(e));
  while (history_.size() > history_limit_) {
    floor_ = history_.front().kv.mod_revision;
    history_.pop_front();
  }
}

Result<int64_t> KvCache::Apply(const Txn& txn, const std::function<void(int64_t)>& on_applied) {
  if (txn.ops.empty()) return InvalidArgument("empty transaction");
  std::lock_guard lock(mu_);
  if (!failed_.ok()) return failed_;
  if (!read_only_.ok()) return read_only_;
  UNIPOOL_RETURN_IF_ERROR(CheckCompares(txn));
  const int64_t rev = ++revision_;
  auto& undo = undo_[rev];
  for (const Op& op : txn.ops) {
    auto before = kvs_.find(op.key);
    undo.emplace_back(
        op.key, before == kvs_.end() ? std::nullopt : std::optional<KeyValue>(before->second));
    if (op.type == Op::Type::kPut) {
      auto [it, fresh] = kvs_.try_emplace(op.key);
      KeyValue& kv = it->second;
      if (fresh) {
        kv.key = op.key;
        kv.create_revision = rev;
      }
      kv.value = op.value;
      kv.mod_revision = rev;
      Record(Event{Event::Type::kPut, kv});
    } else if (kvs_.erase(op.key) > 0) {
      Record(Event{Event::Type::kDelete, KeyValue{op.key, {}, 0, rev}});
    }
  }
  on_applied(rev);
  return rev;
}

void KvCache::MarkDurable(int64_t revision) {
  {
    std::lock_guard lock(mu_);
    durable_ = std::max(durable_, revision);
    undo_.erase(undo_.begin(), undo_.upper_bound(durable_));
  }
  changed_.notify_all();
}

void KvCache::Revert(const Status& why) {
  {
    std::lock_guard lock(mu_);
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) {
      for (auto op = it->second.rbegin(); op != it->second.rend(); ++op) {
        if (op->second) {
          kvs_[op->first] = *op->second;
        } else {
          kvs_.erase(op->first);
        }
      }
      reverted_.emplace(it->first, why);
    }
    undo_.clear();
    while (!history_.empty() && history_.back().kv.mod_revision > durable_) history_.pop_back();
    // Syncers of long ago are gone; keep the record bounded.
    while (reverted_.size() > 100000) reverted_.erase(reverted_.begin());
    read_only_ = Status(StatusCode::kUnavailable,
                        "the store is read-only after a failed write (" + why.message() +
                            "); reads still work, writes resume by themselves when it can write");
    ++failures_;
  }
  changed_.notify_all();
}

void KvCache::SetWritable() {
  std::lock_guard lock(mu_);
  read_only_ = Status::Ok();
}

Status KvCache::Writable() const {
  std::lock_guard lock(mu_);
  return failed_.ok() ? read_only_ : failed_;
}

int64_t KvCache::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

void KvCache::Fail(Status status) {
  {
    std::lock_guard lock(mu_);
    failed_ = std::move(status);
  }
  changed_.notify_all();
}

Status KvCache::WaitDurable(int64_t revision) {
  std::unique_lock lock(mu_);
  auto reverted = [&] { return reverted_.find(revision); };
  changed_.wait(
      lock, [&] { return durable_ >= revision || !failed_.ok() || reverted() != reverted_.end(); });
  if (auto it = reverted(); it != reverted_.end()) return it->second;
  return durable_ >= revision ? Status::Ok() : failed_;
}

void KvCache::Close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  changed_.notify_all();
}

std::optional<KeyValue> KvCache::Get(std::string_view key) const {
  std::lock_guard lock(mu_);
  auto it = kvs_.find(key);
  if (it == kvs_.end()) return std::nullopt;
  return it->second;
}

std::vector<KeyValue> KvCache::Range(std::string_view prefix, std::string_view start_after,
                                     size_t limit) const {
  std::lock_guard lock(mu_);
  std::vector<KeyValue> out;
  auto it = start_after.empty() || start_after < prefix ? kvs_.lower_bound(prefix)
                                                        : kvs_.upper_bound(start_after);
  for (; it != kvs_.end() && it->first.starts_with(prefix); ++it) {
    if (limit > 0 && out.size() == limit) break;
    out.push_back(it->second);
  }
  return out;
}

int64_t KvCache::revision() const {
  std::lock_guard lock(mu_);
  return revision_;
}

// REQUIRES: mu_ held.
std::vector<Event> KvCache::Collect(std::string_view prefix, int64_t since) const {
  std::vector<Event> out;
  auto it = std::upper_bound(history_.begin(), history_.end(), since,
                             [](int64_t rev, const Event& e) { return rev < e.kv.mod_revision; });
  for (; it != history_.end() && it->kv.mod_revision <= durable_; ++it) {
    if (it->kv.key.starts_with(prefix)) out.push_back(*it);
  }
  return out;
}

Result<std::vector<Event>> KvCache::Watch(std::string_view prefix, int64_t since,
                                          std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (since < floor_) {
    return FailedPrecondition("revision " + std::to_string(since) +
                              " is compacted (oldest kept: " + std::to_string(floor_) +
                              "); list again and watch from the listed revision");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (!failed_.ok()) return failed_;
    if (since < floor_) {  // trimmed while we waited
      return FailedPrecondition("revision " + std::to_string(since) +
                                " is compacted; list again and watch from the listed revision");
    }
    std::vector<Event> out = Collect(prefix, since);
    if (!out.empty() || closed_) return out;
    // Events under other prefixes are skipped for good.
    since = std::max(since, std::min(durable_, revision_));
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      return Collect(prefix, since);
    }
  }
}

}  // namespace unipool::store
