// Store: the control plane's state, as a key-value store with revisions,
// compare-and-swap transactions and watch - the shape of etcd's v3 API, so
// that an etcd backend can replace the embedded one without touching the
// server.
//
// Model. One global revision counts committed transactions. Each key holds a
// value and the revisions at which it was created and last modified. A
// transaction applies all its operations, or none when one of its compares
// fails. Watchers see every change after a revision, in order.
//
// Durability. Commit returns only when the transaction is durable: a
// `kill -9` (or, for SQLite with synchronous=FULL, a power cut) after it
// returns loses nothing. Apply + Sync split that in two so that many
// writers share one disk flush (group commit): Apply orders the change and
// makes it visible to Get/Range; Sync(rev) waits until rev is durable.
// Watch only reports durable changes, so nobody acts on a change that could
// still vanish.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace unipool::store {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
};

// Holds when `key`'s mod_revision equals `mod_revision`; 0 = the key is absent.
struct Compare {
  std::string key;
  int64_t mod_revision = 0;
};

struct Op {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  std::string key;
  std::string value;  // kPut only
};

struct Txn {
  std::vector<Compare> compares;
  std::vector<Op> ops;
  Txn& Put(std::string key, std::string value) {
    ops.push_back(Op{Op::Type::kPut, std::move(key), std::move(value)});
    return *this;
  }
  Txn& Delete(std::string key) {
    ops.push_back(Op{Op::Type::kDelete, std::move(key), {}});
    return *this;
  }
  Txn& IfRevision(std::string key, int64_t mod_revision) {
    compares.push_back(Compare{std::move(key), mod_revision});
    return *this;
  }
  Txn& IfAbsent(std::string key) { return IfRevision(std::move(key), 0); }
};

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete: key and mod_revision (the deletion's) only
};

// Whether `s`, from Apply or Sync, is the store failing (the write did not
// happen, or may not have) rather than the transaction being refused.
inline bool IsFailure(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

class Store {
 public:
  virtual ~Store() = default;

  // Orders `txn` after every earlier one and makes it visible to reads;
  // returns its revision. Not yet durable: call Sync. Errors: kAborted when
  // a compare fails (the message names the key), kInvalidArgument for an
  // empty transaction, kUnavailable when the store has failed.
  virtual Result<int64_t> Apply(const Txn& txn) = 0;
  // Returns when every revision <= `revision` is durable. Errors:
  // kUnavailable when the disk write failed; kDeadlineExceeded when the
  // write's outcome is unknown (etcd got it and did not answer: it may
  // still commit). Then every revision that was not durable is undone
  // (reads show the durable state again, as after a restart), failures()
  // grows, and the store is read-only until it can write again (it probes
  // by itself: a full disk that gets space back, or etcd that regains its
  // quorum, resumes without a restart). A backend that reads its state
  // anew on resuming (etcd: an in-doubt write that landed is then there)
  // grows failures() again: what memory was built from has changed.
  virtual Status Sync(int64_t revision) = 0;
  // OK, or why writes are refused now (read-only after a failed write).
  virtual Status Writable() const = 0;
  // How many times writes failed and were undone, or the state was read anew.
  virtual int64_t failures() const = 0;
  // Apply then Sync.
  Result<int64_t> Commit(const Txn& txn);

  virtual std::optional<KeyValue> Get(std::string_view key) const = 0;
  // Keys starting with `prefix`, in key order, after `start_after` (exclusive;
  // "" = from the first), at most `limit` (0 = all).
  virtual std::vector<KeyValue> Range(std::string_view prefix, std::string_view start_after = {},
                                      size_t limit = 0) const = 0;
  // The revision of the last applied transaction.
  virtual int64_t revision() const = 0;

  // Durable changes under `prefix` with revision > `since`, oldest first;
  // waits up to `timeout` for the first one (an empty result means none
  // came). Errors: kFailedPrecondition when `since` is
  // older than the history kept (compacted): list again, then watch from
  // the listed revision.
  virtual Result<std::vector<Event>> Watch(std::string_view prefix, int64_t since,
                                           std::chrono::milliseconds timeout) = 0;
  // Wakes every Watch now (used at shutdown).
  virtual void Close() = 0;
};

// An in-memory store: nothing survives the process. For tests and `--store
// memory`. History kept for watchers: `history` events.
std::unique_ptr<Store> NewMemoryStore(size_t history = 100000);

// The embedded default: SQLite in WAL mode (synchronous=FULL) in `dir`
// (created if missing), all keys also held in memory for reads. A committer
// thread writes pending transactions in one SQLite transaction per flush.
// With `create`, a missing or empty (table-less) database becomes a new
// store; without, both are refused (like etcd, the server never starts an
// empty cluster over a data directory it was pointed at by mistake).
// Errors (one line, naming the file): the directory or database cannot be
// opened; a foreign database, another schema or store format; a record
// whose revisions do not fit the store's (kFailedPrecondition).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& dir, bool create,
                                               size_t history = 100000);

// etcd (v3.4 or later) as the store, for servers that must outlive one
// machine (docs/operations.md, "High availability"). Every key lives under
// `prefix` in etcd, so clusters can share one etcd; the store keeps its own
// revisions (one per transaction, as the embedded stores do) in the values
// and in a record at PREFIX/#meta, and writes its transactions in batches
// (group commit: one etcd transaction per flush, guarded by a compare on
// that record, so two servers can never both write under one prefix).
class EtcdMirror;

struct EtcdOptions {
  std::vector<std::string> endpoints;  // "http://host:2379" or "https://..."
  std::string prefix = "/unipool";     // no trailing '/'
  std::string ca_file;                 // https: the CA of etcd's certificates ("": the system's)
  std::string cert_file, key_file;     // https: this client's certificate, for --client-cert-auth
  std::chrono::milliseconds timeout{5000};  // one request
  int64_t max_txn_ops = 128;                // etcd's --max-txn-ops (128 by default)
  // Fencing (store/election.h): when set, every write holds only while
  // `guard_key` has create revision `guard_term` (this server's term as
  // leader); once it has not, the store refuses every write for good.
  std::string guard_key;
  int64_t guard_term = 0;
};

// Opens the store under `options.prefix`, loading what is there. With
// `create`, an empty prefix becomes a new store; without, it is refused
// (as OpenSqliteStore refuses an empty directory). Errors (one line): no
// endpoint answers; a key under the prefix that this store did not write.
// `warm` (optional, not owned): a follower's mirror of the prefix
// (etcd_mirror.h); when it holds exactly the state etcd has now, the store
// starts from it instead of reading the prefix (the mirror is used up).
Result<std::unique_ptr<Store>> OpenEtcdStore(const EtcdOptions& options, bool create,
                                             size_t history = 100000, EtcdMirror* warm = nullptr);

}  // namespace unipool::store
