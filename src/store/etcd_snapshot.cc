#include "store/etcd_snapshot.h"

namespace unipool::store {
namespace {

using Json = nlohmann::json;

constexpr size_t kPageSize = 1000;

Status BadKey(const std::string& prefix, const std::string& key) {
  return FailedPrecondition("etcd key " + prefix + key +
                            " was not written by unipool: give the server a prefix of its own "
                            "(--etcd-prefix)");
}

}  // namespace

std::string WrapEtcdValue(int64_t create, int64_t mod, std::string_view value) {
  return std::to_string(create) + " " + std::to_string(mod) + "\n" + std::string(value);
}

bool UnwrapEtcdValue(std::string_view stored, KeyValue* kv) {
  const size_t nl = stored.find('\n');
  const size_t sp = stored.find(' ');
  if (nl == std::string_view::npos || sp == std::string_view::npos || sp > nl) return false;
  try {
    kv->create_revision = std::stoll(std::string(stored.substr(0, sp)));
    kv->mod_revision = std::stoll(std::string(stored.substr(sp + 1, nl - sp - 1)));
  } catch (const std::exception&) {
    return false;
  }
  kv->value = std::string(stored.substr(nl + 1));
  return kv->create_revision > 0 && kv->mod_revision >= kv->create_revision;
}

std::string EtcdRangeEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) ++prefix.back();
  return prefix;
}

Status ApplyEtcdKv(const Json& e, const std::string& prefix, bool deleted, EtcdSnapshot* s,
                   std::string* changed) {
  if (changed != nullptr) changed->clear();
  Result<std::string> key = EtcdClient::Unbase64(e.value("key", ""));
  if (!key.ok()) return key.status();
  if (key->size() <= prefix.size() || !key->starts_with(prefix)) {
    return BadKey(prefix, *key);  // (etcd answered for a range it was not asked)
  }
  std::string k = key->substr(prefix.size());
  if (k == kEtcdMetaKey) {
    if (deleted) return BadKey(prefix, k);  // unipool never deletes #meta
    Result<std::string> value = EtcdClient::Unbase64(e.value("value", ""));
    if (!value.ok()) return value.status();
    const Json meta = Json::parse(*value, nullptr, false);
    if (!meta.is_object()) return BadKey(prefix, k);
    s->revision = meta.value("rev", int64_t{0});
    s->writer = meta.value("writer", uint64_t{0});
    s->meta_mod = EtcdClient::Int(e, "mod_revision");
    return Status::Ok();
  }
  if (k.starts_with("/#")) return Status::Ok();  // the servers' own: the election's key
  if (changed != nullptr) *changed = k;
  if (deleted) {
    s->kvs.erase(k);
    return Status::Ok();
  }
  Result<std::string> value = EtcdClient::Unbase64(e.value("value", ""));
  if (!value.ok()) return value.status();
  KeyValue kv;
  if (!UnwrapEtcdValue(*value, &kv)) return BadKey(prefix, k);
  kv.key = k;
  s->kvs.insert_or_assign(std::move(k), std::move(kv));
  return Status::Ok();
}

Result<EtcdSnapshot> ListEtcdStore(const EtcdClient& client, const std::string& prefix) {
  EtcdSnapshot s;
  const std::string end = EtcdRangeEnd(prefix + "/");
  std::string from = prefix + "/";
  while (true) {
    Json req{{"key", EtcdClient::Base64(from)},
             {"range_end", EtcdClient::Base64(end)},
             {"limit", kPageSize}};
    if (s.etcd_revision > 0) req["revision"] = s.etcd_revision;
    Result<Json> r = client.Call("kv/range", req);
    if (!r.ok()) return r.status();
    if (s.etcd_revision == 0) {
      s.etcd_revision = EtcdClient::Int(r->value("header", Json::object()), "revision");
    }
    const Json kvs = r->value("kvs", Json::array());
    for (const Json& e : kvs) UNIPOOL_RETURN_IF_ERROR(ApplyEtcdKv(e, prefix, false, &s));
    if (!r->value("more", false) || kvs.empty()) break;
    Result<std::string> last = EtcdClient::Unbase64(kvs.back().value("key", ""));
    if (!last.ok()) return last.status();
    from = *last + std::string(1, '\0');
  }
  return s;
}

}  // namespace unipool::store
