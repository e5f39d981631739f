// EtcdMaintenance: what keeps an etcd that holds a cluster's state small,
// done by the leader (etcd itself compacts nothing unless told, and never
// defragments): etcd keeps every old revision of every key until it is
// compacted, and compaction frees pages inside the database file without
// shrinking it until that member is defragmented. Past its quota (2 GiB by
// default) etcd raises NOSPACE and refuses every write.
//
// Each round (RunOnce, the server calls it every `every`):
//   1. compacts to the etcd revision the previous round saw, so one period
//      of history stays (a paged read that is under way is not cut off);
//      the server's own watch history is in its cache, not in etcd's;
//   2. reads every member's status (database size, size in use);
//   3. defragments at most one member whose file is mostly free space
//      (size > defrag_ratio x in use, and more than defrag_min_bytes free),
//      the largest first: a member defragmenting answers nothing for a
//      moment, so one at a time keeps the quorum serving.
//
// Thread safety: one thread calls RunOnce; members' results are values.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "store/etcd_client.h"
#include "store/store.h"

namespace unipool::store {

struct MaintenanceOptions {
  double defrag_ratio = 2.0;                     // file size / size in use
  int64_t defrag_min_bytes = int64_t{64} << 20;  // free space worth a defragmentation
  std::chrono::milliseconds defrag_timeout{60000};
};

struct MemberStatus {
  std::string endpoint;
  bool ok = false;
  std::string error;           // when !ok
  int64_t db_size = 0;         // bytes of the database file
  int64_t db_size_in_use = 0;  // bytes of it that hold data
};

struct MaintenanceRound {
  int64_t revision = 0;      // etcd's revision at this round's start
  int64_t compacted_to = 0;  // 0: nothing compacted this round
  std::string defragmented;  // the member's endpoint; "" for none
  std::vector<MemberStatus> members;
  Status status;  // the first thing that failed (the round goes on)
};

class EtcdMaintenance {
 public:
  // REQUIRES: options.endpoints is not empty.
  EtcdMaintenance(const EtcdOptions& options, MaintenanceOptions m);

  MaintenanceRound RunOnce();

 private:
  Status Compact(int64_t revision);
  MemberStatus Member(size_t endpoint);
  bool NeedsDefrag(const MemberStatus& m) const;

  EtcdClient client_;
  const MaintenanceOptions options_;
  int64_t previous_ = 0;   // the revision the last round saw
  int64_t compacted_ = 0;  // the last revision compacted to
};

}  // namespace unipool::store
