#include "server/job_prefetch.h"

namespace unipool::server {

void JobPrefetch::Follow(store::EtcdMirror& mirror) {
  mirror.Observe(
      {.reset =
           [this] {
             std::lock_guard lock(mu_);
             jobs_.clear();
           },
       .changed = [this](std::string_view key, const store::KeyValue* kv) { Changed(key, kv); }});
}

void JobPrefetch::Changed(std::string_view key, const store::KeyValue* kv) {
  if (!key.starts_with("/jobs/")) return;
  std::optional<JobRecord> parsed;
  if (kv != nullptr) {
    Result<JobRecord> r = JobFromJson(Json::parse(kv->value, nullptr, false));
    if (r.ok()) parsed = std::move(r).value();  // (a bad one: Recover says why)
  }
  std::lock_guard lock(mu_);
  if (!parsed) {
    jobs_.erase(std::string(key));
    return;
  }
  jobs_.insert_or_assign(std::string(key), std::make_pair(kv->mod_revision, std::move(*parsed)));
}

std::optional<JobRecord> JobPrefetch::Take(const store::KeyValue& kv) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(kv.key);
  if (it == jobs_.end() || it->second.first != kv.mod_revision) return std::nullopt;
  std::optional<JobRecord> r = std::move(it->second.second);
  jobs_.erase(it);
  return r;
}

size_t JobPrefetch::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

}  // namespace unipool::server
