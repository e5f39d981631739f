// History: the jobs that left the live store. The control plane archives a
// job some time after it ended (ControlOptions::history_retention): its
// record and events, as the API shows them (JSON text), go here, then the
// job is deleted from the live store (etcd, or SQLite) and from memory. So
// the live state holds what runs and what ended lately, and a million
// finished jobs cost neither etcd's quota nor the leader's memory.
//
// One SQLite file (WAL, synchronous=FULL): Put is durable when it returns
// and idempotent by id: of two copies of a job, the one with more events
// stays (a leader that died while deleting a job from the store, its
// events first, archives what is left again: the first copy is the whole
// one; a job that gained an event while it was archived is archived again,
// whole). Readers filter on the columns kept beside the JSON: finish time,
// queue, state.
//
// Thread safety: every method may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace unipool::store {

struct ArchivedJob {
  int64_t id = 0;
  int64_t finished = 0;  // nanoseconds since the epoch (the core's Time)
  std::string queue, state;
  std::string record;  // the job's JSON object
  std::string events;  // its events, a JSON array
};

struct HistoryQuery {
  int64_t before = 0;          // ids below this (0: from the newest)
  int64_t finished_since = 0;  // finished at or after (nanoseconds; 0: any time)
  std::string queue, state;    // "": any
  int32_t limit = 100;
};

class History {
 public:
  // Opens (creating it if missing) the history file at `path`. Errors (one
  // line, naming the file): it cannot be opened or created, or it is not a
  // unipool history.
  static Result<std::unique_ptr<History>> Open(const std::string& path);
  ~History();

  // Archives `jobs` in one transaction; a job already here is kept as it is.
  // Errors: kUnavailable when the write failed (nothing of it is kept).
  Status Put(const std::vector<ArchivedJob>& jobs);
  // The job with this id; nullopt when it is not here.
  Result<std::optional<ArchivedJob>> Get(int64_t id) const;
  // Matching jobs, newest id first, at most q.limit.
  Result<std::vector<ArchivedJob>> List(const HistoryQuery& q) const;
  Result<int64_t> Count() const;
  const std::string& path() const { return path_; }

 private:
  explicit History(std::string path) : path_(std::move(path)) {}
  Status Init();
  Status Error(const std::string& what) const;
  static ArchivedJob Row(sqlite3_stmt* s);

  const std::string path_;
  mutable std::mutex mu_;
  sqlite3* db_ = nullptr;
};

}  // namespace unipool::store
