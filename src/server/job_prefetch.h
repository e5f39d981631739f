// JobPrefetch: a follower's parsed copy of the job records in its mirror of
// the store (store/etcd_mirror.h). Parsing 100,000 records is 70% of a new
// leader's rebuild (docs/benchmarks.md, "Failover"); parsed while
// following, as the records arrive, a takeover restores them instead.
//
// A record is taken only when it was parsed from the very revision the
// store holds (its mod_revision), so what Recover gets is what parsing the
// store's value would give.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "server/records.h"
#include "store/etcd_mirror.h"

namespace unipool::server {

class JobPrefetch {
 public:
  // Parses the job records `mirror` holds, and each as it changes, from
  // now until the mirror stops. REQUIRES: right after the mirror was made;
  // this outlives it.
  void Follow(store::EtcdMirror& mirror);

  // The record parsed from `kv` (key and mod_revision), given away; nullopt
  // when none was (the caller parses it).
  std::optional<JobRecord> Take(const store::KeyValue& kv);
  size_t size() const;  // records parsed and waiting to be

  JobPrefetch();
  ~JobPrefetch();

 private:
  void Changed(std::string_view key, const store::KeyValue* kv);
  void ParseLoop();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::unordered_map<std::string, std::pair<int64_t, JobRecord>> jobs_;  // key: revision, record
  // Records received, parsed by a thread of low priority a batch at a
  // time, so that a record written twice meanwhile is parsed once and the
  // leader's work (on a shared machine) comes first.
  std::unordered_map<std::string, store::KeyValue> raw_;
  std::thread parser_;
};

}  // namespace unipool::server
