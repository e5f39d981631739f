#include "store/election.h"

#include <thread>

namespace unipool::store {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kPoll{200};  // a follower looks for a free key this often

}  // namespace

Election::Election(const EtcdOptions& options, std::string me, std::chrono::seconds ttl)
    : client_(options), me_(std::move(me)), key_(options.prefix + "/#leader"), ttl_(ttl) {}

Election::~Election() { Stop(); }

bool Election::Sleep(milliseconds d) {
  std::unique_lock lock(mu_);
  return !stopped_.wait_for(lock, d, [&] { return stop_; });
}

std::string Election::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

Result<std::string> Election::GrantLease() {
  Result<Json> r = client_.Call("lease/grant", {{"TTL", ttl_.count()}});
  if (!r.ok()) return r.status();
  const std::string id = r->value("ID", "");
  if (id.empty()) return Unavailable("etcd granted no lease: " + r->value("error", ""));
  return id;
}

// The key if it is free (its create revision), else 0 and leader_ learns
// who holds it.
Result<int64_t> Election::TryAcquire(const std::string& lease) {
  const std::string key = EtcdClient::Base64(key_);
  const Json txn{
      {"compare",
       {{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", 0}}}},
      {"success",
       {{{"request_put", {{"key", key}, {"value", EtcdClient::Base64(me_)}, {"lease", lease}}}}}},
      {"failure", {{{"request_range", {{"key", key}}}}}}};
  Result<Json> r = client_.Call("kv/txn", txn);
  if (!r.ok()) return r.status();
  if (r->value("succeeded", false)) {
    std::lock_guard lock(mu_);
    leader_ = me_;
    lease_ = lease;
    return EtcdClient::Int(r->value("header", Json::object()), "revision");
  }
  std::string holder;
  for (const Json& resp : r->value("responses", Json::array())) {
    for (const Json& kv :
         resp.value("response_range", Json::object()).value("kvs", Json::array())) {
      Result<std::string> v = EtcdClient::Unbase64(kv.value("value", ""));
      if (v.ok()) holder = *v;
    }
  }
  std::lock_guard lock(mu_);
  leader_ = holder;
  return 0;
}

void Election::Revoke(const std::string& lease) {
  if (!lease.empty()) (void)client_.Call("lease/revoke", {{"ID", lease}});
}

int64_t Election::Campaign() {
  std::string lease;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    if (lease.empty()) {
      Result<std::string> l = GrantLease();
      if (!l.ok()) {
        if (!Sleep(kPoll)) break;
        continue;
      }
      lease = *l;
    }
    Result<int64_t> term = TryAcquire(lease);
    if (term.ok() && *term > 0) return *term;
    // Not ours: keep the lease alive while waiting (it is cheap), or take
    // a new one if it lapsed.
    Result<Json> k = client_.Call("lease/keepalive", {{"ID", lease}});
    if (!k.ok() || EtcdClient::Int(k->value("result", Json::object()), "TTL") <= 0) lease.clear();
    if (!Sleep(kPoll)) break;
  }
  Revoke(lease);
  return 0;
}

std::string Election::HoldUntilLost() {
  std::string lease;
  {
    std::lock_guard lock(mu_);
    lease = lease_;
  }
  // Renew three times a TTL; lost once no renewal succeeded for a TTL
  // (etcd may have let the key go by then) or etcd says the lease is gone.
  auto renewed = Clock::now();
  const milliseconds every = std::chrono::duration_cast<milliseconds>(ttl_) / 3;
  std::string why;
  while (why.empty()) {
    if (!Sleep(every)) {
      why = "stopped";
      break;
    }
    Result<Json> k = client_.Call("lease/keepalive", {{"ID", lease}});
    if (k.ok() && EtcdClient::Int(k->value("result", Json::object()), "TTL") > 0) {
      renewed = Clock::now();
    } else if (k.ok()) {
      why = "the leader's etcd lease expired (this server was paused or cut off past its TTL)";
    } else if (Clock::now() - renewed >= ttl_) {
      why = "the leader's etcd lease could not be renewed for its TTL: " + k.status().message();
    }
  }
  std::lock_guard lock(mu_);
  leader_.clear();
  lease_.clear();
  return why;
}

void Election::Stop() {
  std::string lease;
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
    lease = lease_;
  }
  stopped_.notify_all();
  Revoke(lease);  // the next candidate need not wait for the TTL
}

}  // namespace unipool::store
