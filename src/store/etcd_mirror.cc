#include "store/etcd_mirror.h"

namespace unipool::store {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kRetry{1000};  // after a failed list or watch
// A watch silent this long is opened again (from where it was): a stream
// that broke without a word is not waited on for ever.
constexpr milliseconds kIdle{30000};

}  // namespace

EtcdMirror::EtcdMirror(const EtcdOptions& options)
    : client_(options), prefix_(options.prefix), thread_([this] { Run(); }) {}

EtcdMirror::~EtcdMirror() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  client_.Cancel();
  thread_.join();
}

std::optional<EtcdSnapshot> EtcdMirror::Take(int64_t meta_mod, milliseconds wait) {
  std::optional<EtcdSnapshot> taken;
  {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, wait, [&] { return stop_ || (listed_ && copy_.meta_mod >= meta_mod); });
    if (!stop_ && listed_ && copy_.meta_mod == meta_mod) {
      taken = std::move(copy_);
      stats_.taken = true;
    }
    stop_ = true;
    listed_ = false;
  }
  changed_.notify_all();
  client_.Cancel();
  return taken;
}

void EtcdMirror::Observe(Observer observer) {
  std::lock_guard lock(mu_);
  observer_ = std::move(observer);
  if (!listed_) return;
  if (observer_.reset) observer_.reset();
  if (observer_.changed) {
    for (const auto& [key, kv] : copy_.kvs) observer_.changed(key, &kv);
  }
}

EtcdMirror::Stats EtcdMirror::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  if (listed_) {
    s.etcd_revision = copy_.etcd_revision;
    s.meta_mod = copy_.meta_mod;
    s.keys = copy_.kvs.size();
  }
  return s;
}

void EtcdMirror::Run() {
  while (true) {
    const Status st = FollowOnce();
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      if (st.code() == StatusCode::kFailedPrecondition) listed_ = false;
    }
    if (!Sleep(kRetry)) return;
  }
}

Status EtcdMirror::FollowOnce() {
  int64_t from = 0;
  {
    std::lock_guard lock(mu_);
    if (listed_) from = copy_.etcd_revision + 1;
  }
  if (from == 0) {
    Result<EtcdSnapshot> s = ListEtcdStore(client_, prefix_);
    if (!s.ok()) return s.status();
    std::lock_guard lock(mu_);
    if (stop_) return Status::Ok();
    copy_ = std::move(s).value();
    listed_ = true;
    if (observer_.reset) observer_.reset();
    if (observer_.changed) {
      for (const auto& [key, kv] : copy_.kvs) observer_.changed(key, &kv);
    }
    ++stats_.lists;
    from = copy_.etcd_revision + 1;
    changed_.notify_all();
  }
  const Json watch{{"create_request",
                    {{"key", EtcdClient::Base64(prefix_ + "/")},
                     {"range_end", EtcdClient::Base64(EtcdRangeEnd(prefix_ + "/"))},
                     {"start_revision", from}}}};
  Status why = Status::Ok();
  Status st = client_.Stream("watch", watch, kIdle,
                             [&](const Json& answer) { return OnAnswer(answer, &why); });
  return why.ok() ? st : why;
}

bool EtcdMirror::OnAnswer(const Json& answer, Status* why) {
  const Json result = answer.value("result", Json::object());
  if (result.value("canceled", false)) {
    // Compacted past `from` (compact_revision set), or refused: list again.
    *why = FailedPrecondition("etcd cancelled the watch: " +
                              result.value("cancel_reason", std::string("compacted")));
    return false;
  }
  const Json events = result.value("events", Json::array());
  if (events.empty()) return true;  // created, or progress
  std::lock_guard lock(mu_);
  if (stop_ || !listed_) return false;
  for (const Json& e : events) {
    const Json kv = e.value("kv", Json::object());
    const bool deleted = e.value("type", "") == "DELETE";
    std::string key;
    const Status st = ApplyEtcdKv(kv, prefix_, deleted, &copy_, &key);
    if (!st.ok()) {
      *why = FailedPrecondition(st.message());
      return false;
    }
    if (observer_.changed && !key.empty()) {
      auto it = copy_.kvs.find(key);
      observer_.changed(key, it == copy_.kvs.end() ? nullptr : &it->second);
    }
    copy_.etcd_revision = std::max(copy_.etcd_revision, EtcdClient::Int(kv, "mod_revision"));
  }
  ++stats_.answers;
  changed_.notify_all();
  return true;
}

bool EtcdMirror::Sleep(milliseconds d) {
  std::unique_lock lock(mu_);
  return !changed_.wait_for(lock, d, [&] { return stop_; });
}

}  // namespace unipool::store
