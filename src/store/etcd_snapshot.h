// The store's layout in etcd, and reading it: shared by the etcd Store
// (etcd_store.cc) and a follower's mirror of it (etcd_mirror.h). Internal
// to store/.
//
// Layout under PREFIX in etcd:
//   PREFIX/KEY   "CREATE MOD\n" + the value (the store's own revisions)
//   PREFIX/#meta {"rev": R, "writer": W, "deleted": [[KEY, REV], ...]}: the
//                store's revision after the last flush, which store instance
//                wrote it, and the revisions of the keys that flush deleted
//   PREFIX/#leader  the election's key (election.h); keys under PREFIX/# are
//                never the store's
// Every flush writes #meta in the same etcd transaction as its keys, so a
// copy of the prefix taken where #meta has mod revision M is the store's
// state after that flush.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "store/etcd_client.h"
#include "store/kv_cache.h"
#include "store/store.h"

namespace unipool::store {

inline constexpr char kEtcdMetaKey[] = "/#meta";

// The store found under one prefix.
struct EtcdSnapshot {
  KvMap kvs;
  int64_t revision = 0;       // the store's, from #meta
  uint64_t writer = 0;        // who wrote #meta last
  int64_t meta_mod = 0;       // etcd's mod_revision of #meta (0: none yet)
  int64_t etcd_revision = 0;  // the etcd revision the copy is of
};

// A value as stored: its store revisions, then the value.
std::string WrapEtcdValue(int64_t create, int64_t mod, std::string_view value);
// The inverse; false when `stored` was not written by WrapEtcdValue.
bool UnwrapEtcdValue(std::string_view stored, KeyValue* kv);

// The smallest key after every key that starts with `prefix`.
std::string EtcdRangeEnd(std::string prefix);

// Applies one key-value of an etcd answer (the gateway's JSON: base64 key
// and value, mod_revision) that was put under `prefix` to `s`; a deletion
// when `deleted` (only its key is read). Keys under PREFIX/# other than
// #meta are skipped. Errors: kFailedPrecondition naming a key that unipool
// did not write (the prefix is shared with something else). `*key` (when
// given) becomes the store's key that changed, "" for #meta and skipped keys.
Status ApplyEtcdKv(const nlohmann::json& kv, const std::string& prefix, bool deleted,
                   EtcdSnapshot* s, std::string* key = nullptr);

// Every key under `prefix`, at one etcd revision, a page at a time.
Result<EtcdSnapshot> ListEtcdStore(const EtcdClient& client, const std::string& prefix);

}  // namespace unipool::store
