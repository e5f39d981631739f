// KvCache: the in-memory half shared by every Store: the keys, the revision,
// the recent history for watchers, and the durable mark. Internal to store/.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>

#include "store/store.h"

namespace unipool::store {

// The store's keys as kept in memory, ordered for ranges.
using KvMap = std::map<std::string, KeyValue, std::less<>>;

class KvCache {
 public:
  explicit KvCache(size_t history) : history_limit_(history) {}

  // Loads the state found on disk. REQUIRES: before any other call.
  void Load(KvMap kvs, int64_t revision);
  // Replaces every key with a fresh copy of the durable state at
  // `revision`; watchers from before it must list again, and failures()
  // grows so that users of the store rebuild what they derived from it.
  void Reset(KvMap kvs, int64_t revision);
  // Read-only with `why` (as after a failed write) until SetWritable().
  void SetReadOnly(const Status& why);

  // Checks the compares and applies `txn`; `on_applied` runs under the lock
  // with the new revision (the caller queues it for disk in revision order).
  Result<int64_t> Apply(const Txn& txn, const std::function<void(int64_t)>& on_applied);
  // Every revision <= `revision` is durable: wakes watchers and syncers.
  void MarkDurable(int64_t revision);
  // Writing the revisions after the durable one failed: they are undone
  // (keys and history back to the durable state; their numbers are not
  // used again), their syncers get `why`, and Apply refuses with `why`
  // until SetWritable(). failures() counts these events.
  void Revert(const Status& why);
  void SetWritable();
  // OK, or why writes are refused now.
  Status Writable() const;
  int64_t failures() const;
  // The store failed for good: Sync and Watch return `status` from now on.
  void Fail(Status status);
  // Waits until `revision` is durable, reverted or the store failed.
  Status WaitDurable(int64_t revision);
  void Close();

  std::optional<KeyValue> Get(std::string_view key) const;
  std::vector<KeyValue> Range(std::string_view prefix, std::string_view start_after,
                              size_t limit) const;
  int64_t revision() const;
  Result<std::vector<Event>> Watch(std::string_view prefix, int64_t since,
                                   std::chrono::milliseconds timeout);

 private:
  Status CheckCompares(const Txn& txn) const;
  void Record(Event e);
  std::vector<Event> Collect(std::string_view prefix, int64_t since) const;

  const size_t history_limit_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  KvMap kvs_;
  int64_t revision_ = 0;
  int64_t durable_ = 0;
  int64_t floor_ = 0;  // history holds every event with revision > floor_
  std::deque<Event> history_;
  // Before-images of every key a revision after durable_ changed, to undo.
  std::map<int64_t, std::vector<std::pair<std::string, std::optional<KeyValue>>>> undo_;
  std::map<int64_t, Status> reverted_;  // revisions undone, for their syncers
  Status read_only_;
  int64_t failures_ = 0;
  Status failed_;
  bool closed_ = false;
};

// The committer thread of the durable backends: takes every pending
// transaction (`pending`, in revision order, guarded by `mu`; `wake` is
// signalled when it grows or `stop` is set), writes them with `write`
// (which marks what it made durable), and on a failure undoes in `cache`
// what was not durable (memory never shows what the disk does not hold),
// then waits with `wait_until_writable` (false: stop). Returns when
// stopping with nothing pending.
template <class Batch>
void RunCommitter(std::mutex& mu, std::condition_variable& wake, const bool& stop, Batch& pending,
                  KvCache& cache, const std::function<Status(const Batch&)>& write,
                  const std::function<bool()>& wait_until_writable) {
  Batch batch;
  while (true) {
    {
      std::unique_lock lock(mu);
      wake.wait(lock, [&] { return stop || !pending.empty(); });
      if (pending.empty()) return;
      batch.swap(pending);
    }
    Status st = write(batch);
    batch.clear();
    if (st.ok()) continue;
    {
      std::lock_guard lock(mu);
      pending.clear();
      cache.Revert(st);
    }
    if (!wait_until_writable()) return;
  }
}

// A Store whose reads, watches and durability waits are the KvCache's; the
// two backends differ only in Apply (and how revisions become durable).
class CachedStore : public Store {
 public:
  explicit CachedStore(size_t history) : cache_(history) {}
  Status Sync(int64_t revision) override { return cache_.WaitDurable(revision); }
  std::optional<KeyValue> Get(std::string_view key) const override { return cache_.Get(key); }
  std::vector<KeyValue> Range(std::string_view prefix, std::string_view start_after,
                              size_t limit) const override {
    return cache_.Range(prefix, start_after, limit);
  }
  int64_t revision() const override { return cache_.revision(); }
  Status Writable() const override { return cache_.Writable(); }
  int64_t failures() const override { return cache_.failures(); }
  Result<std::vector<Event>> Watch(std::string_view prefix, int64_t since,
                                   std::chrono::milliseconds timeout) override {
    return cache_.Watch(prefix, since, timeout);
  }
  void Close() override { cache_.Close(); }

 protected:
  KvCache cache_;
};

}  // namespace unipool::store
