// The etcd Store (store.h, OpenEtcdStore): a KvCache whose revisions become
// durable when the committer has written them to etcd.
//
// Its layout in etcd: etcd_snapshot.h.
//
// The committer writes every pending transaction of the store in one etcd
// transaction per flush (group commit), the last operation on each key
// only, with the new #meta; it holds only while #meta is as this store last
// wrote or read it, so a second writer is refused instead of interleaved.
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "store/etcd_client.h"
#include "store/etcd_mirror.h"
#include "store/etcd_snapshot.h"
#include "store/kv_cache.h"

namespace unipool::store {
namespace {

using Json = nlohmann::json;

// How long a takeover waits for the mirror to catch up with etcd.
constexpr std::chrono::milliseconds kMirrorWait{2000};
constexpr const char* kDeposed =
    "this server is no longer the leader (its term in etcd ended): every write is refused";
constexpr size_t kMaxFlushBytes = 1 << 20;  // etcd takes 1.5 MiB a request by default

class EtcdStore final : public CachedStore {
 public:
  EtcdStore(const EtcdOptions& options, size_t history)
      : CachedStore(history),
        client_(options),
        prefix_(options.prefix),
        max_ops_(static_cast<size_t>(options.max_txn_ops)),
        guard_key_(options.guard_key),
        guard_term_(options.guard_term) {
    std::random_device rd;
    writer_ = (static_cast<uint64_t>(rd()) << 32) | rd();
  }

  ~EtcdStore() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (committer_.joinable()) committer_.join();
  }

  Status Open(bool create, EtcdMirror* warm) {
    Result<EtcdSnapshot> s = warm != nullptr ? FromMirror(*warm) : ListEtcdStore(client_, prefix_);
    if (!s.ok()) return s.status();
    if (s->meta_mod == 0 && !create) {
      return FailedPrecondition("etcd prefix " + prefix_ +
                                " holds no unipool store: check --etcd-prefix, or give --init "
                                "for a new cluster's first start");
    }
    meta_mod_ = s->meta_mod;
    if (meta_mod_ == 0) UNIPOOL_RETURN_IF_ERROR(Create());
    cache_.Load(std::move(s->kvs), s->revision);
    committer_ = std::thread([this] { CommitLoop(); });
    return Status::Ok();
  }

  Result<int64_t> Apply(const Txn& txn) override {
    if (txn.ops.empty()) return InvalidArgument("empty transaction");
    if (txn.ops.size() + 1 > max_ops_) {
      return InvalidArgument("a transaction of " + std::to_string(txn.ops.size()) +
                             " operations; etcd takes " + std::to_string(max_ops_ - 1) +
                             " (start etcd with a larger --max-txn-ops and give the server "
                             "--etcd-max-txn-ops)");
    }
    std::lock_guard lock(mu_);  // keeps `pending_` in revision order
    Pending p;
    p.rev = cache_.revision() + 1;  // what cache_.Apply gives it: only Apply moves it, under mu_
    std::map<std::string, std::optional<int64_t>> created;  // this txn's keys: create revision
    for (const Op& op : txn.ops) {
      if (op.type == Op::Type::kDelete) {
        created[op.key] = std::nullopt;
        p.ops.push_back({op.key, std::nullopt, 0});
        continue;
      }
      auto it = created.find(op.key);
      int64_t create = p.rev;
      if (it != created.end()) {
        if (it->second) create = *it->second;
      } else if (auto kv = cache_.Get(op.key)) {
        create = kv->create_revision;
      }
      created[op.key] = create;
      p.ops.push_back({op.key, op.value, create});
    }
    Result<int64_t> rev = cache_.Apply(txn, [&](int64_t r) {
      p.rev = r;
      pending_.push_back(std::move(p));
    });
    if (rev.ok()) wake_.notify_one();
    return rev;
  }

 private:
  struct PendingOp {
    std::string key;
    std::optional<std::string> value;  // nullopt: a delete
    int64_t create = 0;
  };
  struct Pending {
    int64_t rev = 0;
    std::vector<PendingOp> ops;
  };
  // The mirror's copy if it is of the #meta that etcd holds now, else a
  // fresh read of the prefix. (Once elected, only this store writes #meta:
  // the old leader's flushes fail their guard compare.)
  Result<EtcdSnapshot> FromMirror(EtcdMirror& warm) const {
    Result<Json> r = client_.Call("kv/range", {{"key", EtcdClient::Base64(EtcdKey(kEtcdMetaKey))}});
    if (!r.ok()) return r.status();
    const Json kvs = r->value("kvs", Json::array());
    if (!kvs.empty()) {
      std::optional<EtcdSnapshot> s =
          warm.Take(EtcdClient::Int(kvs.front(), "mod_revision"), kMirrorWait);
      if (s) return std::move(*s);
    }
    warm.Take(0, std::chrono::milliseconds(0));  // it is not needed any more
    return ListEtcdStore(client_, prefix_);
  }

  std::string EtcdKey(std::string_view key) const { return prefix_ + std::string(key); }

  Json MetaPut(int64_t rev, const Json& deleted) const {
    const Json meta{{"rev", rev}, {"writer", writer_}, {"deleted", deleted}};
    return {{"request_put",
             {{"key", EtcdClient::Base64(EtcdKey(kEtcdMetaKey))},
              {"value", EtcdClient::Base64(meta.dump())}}}};
  }

  // A new store: #meta at revision 0, unless another server made it first.
  Status Create() {
    const std::string meta_key = EtcdClient::Base64(EtcdKey(kEtcdMetaKey));
    const Json txn{
        {"compare",
         {{{"key", meta_key}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", 0}}}},
        {"success", {MetaPut(0, Json::array())}}};
    Result<Json> r = client_.Call("kv/txn", txn);
    if (!r.ok()) return r.status();
    if (!r->value("succeeded", false)) {
      return Aborted("etcd prefix " + prefix_ +
                     " was created by another server just now: start again");
    }
    meta_mod_ = EtcdClient::Int(r->value("header", Json::object()), "revision");
    return Status::Ok();
  }

  void CommitLoop() {
    RunCommitter<std::vector<Pending>>(
        mu_, wake_, stop_, pending_, cache_,
        [this](const std::vector<Pending>& batch) { return FlushInChunks(batch); },
        [this] { return WaitUntilWritable(); });
  }

  // Flushes `batch` in etcd transactions within etcd's limits (operations
  // and bytes per request), each at a transaction's boundary; marks each
  // durable as it lands.
  Status FlushInChunks(const std::vector<Pending>& batch) {
    size_t begin = 0;
    while (begin < batch.size()) {
      std::set<std::string_view> keys;
      size_t bytes = 0, end = begin;
      for (; end < batch.size(); ++end) {
        size_t fresh = 0, more_bytes = bytes;
        for (const PendingOp& op : batch[end].ops) {
          fresh += keys.count(op.key) == 0 ? 1 : 0;  // (a key twice in one txn: counted twice)
          more_bytes += op.key.size() + (op.value ? op.value->size() : 0) + 64;
        }
        if (end > begin && (keys.size() + fresh + 1 > max_ops_ || more_bytes > kMaxFlushBytes)) {
          break;
        }
        for (const PendingOp& op : batch[end].ops) keys.insert(op.key);
        bytes = more_bytes;
      }
      UNIPOOL_RETURN_IF_ERROR(Flush(batch, begin, end));
      cache_.MarkDurable(batch[end - 1].rev);
      begin = end;
    }
    return Status::Ok();
  }

  // One etcd transaction: the last operation of the batch on each key, and
  // #meta, if #meta is still this store's.
  Status Flush(const std::vector<Pending>& batch, size_t begin, size_t end) {
    std::map<std::string, std::pair<const PendingOp*, int64_t>> last;  // key: op, revision
    for (size_t i = begin; i < end; ++i) {
      for (const PendingOp& op : batch[i].ops) last[op.key] = {&op, batch[i].rev};
    }
    Json ops = Json::array(), deleted = Json::array();
    for (const auto& [key, at] : last) {
      const auto& [op, rev] = at;
      if (op->value) {
        ops.push_back(
            {{"request_put",
              {{"key", EtcdClient::Base64(EtcdKey(key))},
               {"value", EtcdClient::Base64(WrapEtcdValue(op->create, rev, *op->value))}}}});
      } else {
        ops.push_back({{"request_delete_range", {{"key", EtcdClient::Base64(EtcdKey(key))}}}});
        deleted.push_back({key, rev});
      }
    }
    const std::string meta_key = EtcdClient::Base64(EtcdKey(kEtcdMetaKey));
    ops.push_back(MetaPut(batch[end - 1].rev, deleted));
    Json compare = {
        {{"key", meta_key}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", meta_mod_}}};
    Json failure = {{{"request_range", {{"key", meta_key}}}}};
    if (guard_term_ > 0) {
      const std::string guard = EtcdClient::Base64(guard_key_);
      compare.push_back({{"key", guard},
                         {"target", "CREATE"},
                         {"result", "EQUAL"},
                         {"create_revision", guard_term_}});
      failure.push_back({{"request_range", {{"key", guard}}}});
    }
    const Json txn{{"compare", compare}, {"success", ops}, {"failure", failure}};
    Result<Json> r = client_.Call("kv/txn", txn);
    if (!r.ok()) return LandedAnyway(batch[end - 1].rev, r.status());
    if (!r->value("succeeded", false) && guard_term_ > 0 && !GuardHolds(*r)) {
      deposed_ = true;
      return Unavailable(kDeposed);
    }
    if (!r->value("succeeded", false)) {
      // #meta moved. Ours: an earlier flush whose answer was lost did land;
      // reading the prefix again brings it in. Another writer's: stop.
      if (MetaWriterIn(*r) == writer_) {
        return Unavailable("etcd holds a write whose answer was lost: reading it back");
      }
      conflict_ = true;
      return Unavailable("another unipool server writes under the etcd prefix " + prefix_ +
                         ": this one stopped writing (one prefix per cluster; with several "
                         "servers, only the elected leader writes)");
    }
    meta_mod_ = EtcdClient::Int(r->value("header", Json::object()), "revision");
    return Status::Ok();
  }

  // A flush whose answer was an error may have landed: etcd applies the
  // transaction that fills its quota and answers NOSPACE, and an answer
  // lost on the way back says nothing. #meta tells: ours at `rev`, the
  // flush landed and counts as written (the next one meets the trouble
  // itself); otherwise `why`, and the writes are undone in memory. When
  // etcd could not be read either and the request may have reached it,
  // the outcome is unknown (kDeadlineExceeded): raft may still commit it,
  // and the prefix read once etcd answers again brings it in if it did.
  Status LandedAnyway(int64_t rev, const Status& why) {
    const Json req{{"key", EtcdClient::Base64(EtcdKey(kEtcdMetaKey))}};
    Result<Json> r = client_.Call("kv/range", req);
    if (r.ok()) {
      for (const Json& kv : r->value("kvs", Json::array())) {
        const Json meta = MetaIn(kv);
        if (meta.is_object() && meta.value("writer", uint64_t{0}) == writer_ &&
            meta.value("rev", int64_t{0}) == rev) {
          meta_mod_ = EtcdClient::Int(kv, "mod_revision");
          return Status::Ok();
        }
      }
    }
    if (why.code() == StatusCode::kDeadlineExceeded) {
      return DeadlineExceeded(why.message() +
                              "; the change may still land once etcd has a quorum again: look "
                              "(unipool get) before doing it again");
    }
    return Unavailable(why.message());
  }

  // Whether the failure branch of a flush found the guard at our term.
  bool GuardHolds(const Json& answer) const {
    const std::string guard = EtcdClient::Base64(guard_key_);
    for (const Json& r : answer.value("responses", Json::array())) {
      for (const Json& kv : r.value("response_range", Json::object()).value("kvs", Json::array())) {
        if (kv.value("key", "") == guard)
          return EtcdClient::Int(kv, "create_revision") == guard_term_;
      }
    }
    return false;  // no key: the term ended
  }

  // The writer of the #meta that a failed flush's failure branch read.
  static uint64_t MetaWriterIn(const Json& answer) {
    for (const Json& r : answer.value("responses", Json::array())) {
      for (const Json& kv : r.value("response_range", Json::object()).value("kvs", Json::array())) {
        const Json meta = MetaIn(kv);
        if (meta.is_object()) return meta.value("writer", uint64_t{0});
      }
    }
    return 0;
  }

  // The #meta object in an etcd key-value; not an object if it is not one.
  static Json MetaIn(const Json& kv) {
    Result<std::string> v = EtcdClient::Unbase64(kv.value("value", ""));
    return v.ok() ? Json::parse(*v, nullptr, false) : Json();
  }

  // After a failed flush: once a second, reads the prefix again; when
  // etcd answers and no other writer took the prefix, the cache becomes
  // that state and writes resume. False when the store stops.
  bool WaitUntilWritable() {
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; })) return false;
      }
      Result<EtcdSnapshot> s = ListEtcdStore(client_, prefix_);
      if (!s.ok()) continue;
      std::lock_guard lock(mu_);
      const bool ours = s->writer == writer_ || s->meta_mod == meta_mod_;
      meta_mod_ = s->meta_mod;
      cache_.Reset(std::move(s->kvs), s->revision);
      if (deposed_) {
        cache_.SetReadOnly(Unavailable(kDeposed));
        continue;
      }
      if (!ours || conflict_) {
        cache_.SetReadOnly(Unavailable("another unipool server writes under the etcd prefix " +
                                       prefix_ +
                                       ": this one is read-only (restart it to follow the other)"));
        continue;
      }
      cache_.SetWritable();
      return true;
    }
  }

  EtcdClient client_;
  const std::string prefix_;
  const size_t max_ops_;
  const std::string guard_key_;
  const int64_t guard_term_;
  uint64_t writer_ = 0;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Pending> pending_;
  bool stop_ = false;
  int64_t meta_mod_ = 0;   // the committer's (and Open's, before it starts)
  bool conflict_ = false;  // the committer's: another writer took the prefix
  bool deposed_ = false;   // the committer's: the guard moved on (another leader's term)
  std::thread committer_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenEtcdStore(const EtcdOptions& options, bool create,
                                             size_t history, EtcdMirror* warm) {
  if (options.endpoints.empty()) return InvalidArgument("etcd: no endpoints (--etcd-endpoints)");
  if (options.prefix.empty() || options.prefix.back() == '/') {
    return InvalidArgument("etcd prefix '" + options.prefix +
                           "': give a path such as /unipool, without a trailing '/'");
  }
  auto s = std::make_unique<EtcdStore>(options, history);
  if (options.max_txn_ops < 2) return InvalidArgument("etcd: max_txn_ops must be at least 2");
  UNIPOOL_RETURN_IF_ERROR(s->Open(create, warm));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace unipool::store
