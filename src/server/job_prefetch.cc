#include "server/job_prefetch.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

namespace unipool::server {

void JobPrefetch::Follow(store::EtcdMirror& mirror) {
  mirror.Observe(
      {.reset =
           [this] {
             std::lock_guard lock(mu_);
             jobs_.clear();
             raw_.clear();
           },
       .changed = [this](std::string_view key, const store::KeyValue* kv) { Changed(key, kv); }});
}

namespace {

constexpr std::chrono::milliseconds kBatchEvery{500};

std::optional<JobRecord> Parse(const store::KeyValue& kv) {
  Result<JobRecord> r = JobFromJson(Json::parse(kv.value, nullptr, false));
  if (!r.ok()) return std::nullopt;  // (a bad one: Recover says why)
  return std::move(r).value();
}

}  // namespace

JobPrefetch::JobPrefetch() : parser_([this] { ParseLoop(); }) {}

JobPrefetch::~JobPrefetch() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  parser_.join();
}

void JobPrefetch::Changed(std::string_view key, const store::KeyValue* kv) {
  if (!key.starts_with("/jobs/")) return;
  std::lock_guard lock(mu_);
  jobs_.erase(std::string(key));
  if (kv == nullptr) {
    raw_.erase(std::string(key));
    return;
  }
  raw_.insert_or_assign(std::string(key), *kv);
}

void JobPrefetch::ParseLoop() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);  // this thread only
  std::unique_lock lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kBatchEvery, [&] { return stop_; });
    std::unordered_map<std::string, store::KeyValue> batch;
    batch.swap(raw_);
    lock.unlock();
    std::vector<std::pair<std::string, std::pair<int64_t, JobRecord>>> parsed;
    for (auto& [key, kv] : batch) {
      if (std::optional<JobRecord> r = Parse(kv)) {
        parsed.emplace_back(key, std::make_pair(kv.mod_revision, std::move(*r)));
      }
    }
    lock.lock();
    for (auto& [key, rec] : parsed) {
      if (!raw_.contains(key)) jobs_.insert_or_assign(key, std::move(rec));  // else: newer came
    }
  }
}

std::optional<JobRecord> JobPrefetch::Take(const store::KeyValue& kv) {
  std::lock_guard lock(mu_);
  if (auto raw = raw_.find(kv.key); raw != raw_.end()) {  // not parsed yet: now
    if (raw->second.mod_revision != kv.mod_revision) return std::nullopt;
    std::optional<JobRecord> r = Parse(raw->second);
    raw_.erase(raw);
    return r;
  }
  auto it = jobs_.find(kv.key);
  if (it == jobs_.end() || it->second.first != kv.mod_revision) return std::nullopt;
  std::optional<JobRecord> r = std::move(it->second.second);
  jobs_.erase(it);
  return r;
}

size_t JobPrefetch::size() const {
  std::lock_guard lock(mu_);
  return jobs_.size() + raw_.size();
}

}  // namespace unipool::server
