// Election: one leader among the servers that share an etcd prefix, as
// Kubernetes' leader election does it: the leader holds the key
// PREFIX/#leader, attached to an etcd lease it keeps alive; when the leader
// dies (or is paused, or cut off) past the lease's TTL, etcd deletes the
// key and the next candidate's create-if-absent transaction takes it.
//
// Fencing: the key's create revision identifies one term. The leader's
// store compares it in every write (EtcdOptions::guard), so a deposed
// leader that still runs can never write again: its transactions fail the
// compare, even before it notices it lost the lease.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "store/etcd_client.h"
#include "store/store.h"

namespace unipool::store {

class Election {
 public:
  // `me` is what followers are told of this candidate (its URL).
  // REQUIRES: ttl >= 2 s (etcd's smallest lease with default timings).
  Election(const EtcdOptions& options, std::string me, std::chrono::seconds ttl);
  ~Election();

  // Blocks until this candidate leads (returns the term: the key's create
  // revision, for EtcdOptions::guard) or Stop() (returns 0). Meanwhile
  // leader() names the current leader.
  int64_t Campaign();
  // After Campaign: blocks while the lease is kept alive; returns why the
  // leadership ended (the lease expired or could not be renewed for its
  // TTL, or Stop()). The caller must stop acting as leader at once.
  std::string HoldUntilLost();
  // Ends Campaign and HoldUntilLost; gives the key up if this one leads.
  void Stop();

  // The current leader's `me` ("" while there is none or it is unknown).
  std::string leader() const;
  const std::string& key() const { return key_; }

 private:
  bool Sleep(std::chrono::milliseconds d);  // false when stopped
  Result<std::string> GrantLease();
  Result<int64_t> TryAcquire(const std::string& lease);
  void Revoke(const std::string& lease);

  EtcdClient client_;
  const std::string me_, key_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  std::condition_variable stopped_;
  bool stop_ = false;
  std::string leader_;  // under mu_
  std::string lease_;   // ours while leading, under mu_
};

}  // namespace unipool::store
