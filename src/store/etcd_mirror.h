// EtcdMirror: a follower's copy of the etcd Store, kept current by an etcd
// watch, so that a takeover starts from memory instead of reading the whole
// prefix from etcd (with 100,000 live jobs that read took 11.6 s of the
// takeover; docs/benchmarks.md, "Failover").
//
// It lists the prefix once, then watches it from the next etcd revision,
// applying each answer of the watch whole (etcd never splits one
// revision's events across answers). A broken watch resumes from the
// revision after the last one applied; a compacted one (etcd no longer has
// that revision) lists again. A snapshot taken where #meta has a given mod
// revision is exactly the state the leader had written then
// (etcd_snapshot.h), which is what the new leader checks before using it.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "store/etcd_client.h"
#include "store/etcd_snapshot.h"
#include "store/store.h"

namespace unipool::store {

class EtcdMirror {
 public:
  // Starts following `options.prefix` at once, in a thread of its own.
  explicit EtcdMirror(const EtcdOptions& options);
  ~EtcdMirror();  // stops following
  EtcdMirror(const EtcdMirror&) = delete;
  EtcdMirror& operator=(const EtcdMirror&) = delete;

  // Called, in the mirror's thread, with every key of the store the copy
  // gains or changes (`kv`) or loses (nullptr), in order; after a fresh
  // read of the prefix, `reset` first, then every key. For work a new
  // leader would otherwise do at once (server/job_prefetch.h parses the
  // jobs). Must not call back into the mirror. REQUIRES: set before the
  // mirror has a copy, i.e. right after construction; once.
  struct Observer {
    std::function<void()> reset;
    std::function<void(std::string_view key, const KeyValue* kv)> changed;
  };
  void Observe(Observer observer);

  // The copy, once it holds #meta at etcd mod revision `meta_mod` (waits up
  // to `wait` for it to get there), or nullopt: not there in time, past it,
  // or never listed. Either way the mirror stops: it serves one takeover.
  std::optional<EtcdSnapshot> Take(int64_t meta_mod, std::chrono::milliseconds wait);

  struct Stats {
    int64_t lists = 0;          // full reads of the prefix (the first, and after compactions)
    int64_t answers = 0;        // watch answers applied
    int64_t etcd_revision = 0;  // the copy is of this etcd revision
    int64_t meta_mod = 0;
    size_t keys = 0;
    bool taken = false;  // Take gave the copy away
  };
  Stats stats() const;

 private:
  void Run();
  // Lists the prefix into `copy_` (unless it holds a copy to resume from),
  // then applies the watch until it breaks. kFailedPrecondition: list again.
  Status FollowOnce();
  // Applies one answer of the watch. False ends the watch (`*why` says why).
  bool OnAnswer(const nlohmann::json& answer, Status* why);
  bool Sleep(std::chrono::milliseconds d);  // false when stopped

  EtcdClient client_;
  const std::string prefix_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool stop_ = false;
  bool listed_ = false;  // copy_ is a whole copy at copy_.etcd_revision
  EtcdSnapshot copy_;
  Stats stats_;
  Observer observer_;  // under mu_
  std::thread thread_;
};

}  // namespace unipool::store
