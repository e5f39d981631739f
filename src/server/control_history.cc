// ControlPlane, history: jobs that ended history_retention ago leave the
// store and memory for the History (store/history.h); Get, List and
// Events read both. A job is always in one or the other (or, for a moment,
// both): archived durably first, deleted from the store after.
#include <algorithm>
#include <iterator>
#include <set>

#include "server/control.h"
#include "server/control_internal.h"
#include "server/records.h"

namespace unipool::server {

using store::ArchivedJob;
using store::Txn;

namespace {

constexpr size_t kArchiveBatch = 256;  // jobs per round
constexpr size_t kDeleteOps = 64;      // per store transaction (etcd's --max-txn-ops is 128)

Result<JobRecord> FromArchive(const ArchivedJob& a) {
  Json j = Json::parse(a.record, nullptr, false);
  if (!j.is_object()) {
    return Internal("history: job " + std::to_string(a.id) + " is not a JSON object");
  }
  return JobFromJson(j);
}

constexpr int kMaxHistoryPages = 20;  // a List reads at most this many pages of the history

}  // namespace

std::vector<ControlPlane::Archived> ControlPlane::ArchiveBatchLocked(
    Time now, std::vector<ArchivedJob>& batch) const {
  std::vector<Archived> out;
  for (const auto& [finished, id] : ended_) {
    if (batch.size() >= kArchiveBatch || Time(finished) + options_.history_retention > now) break;
    const JobRecord& job = jobs_.at(id);
    Archived a{id, job.events, {}};
    std::string events = "[";
    for (const store::KeyValue& kv : store_.Range(EventKey(id, 0).substr(0, 21))) {
      events += (events.size() > 1 ? "," : "") + kv.value;
      a.keys.push_back(kv.key);
    }
    if (store_.Get(SecretKey(id))) a.keys.push_back(SecretKey(id));
    a.keys.push_back(JobKey(id));  // last: a job half deleted is still listed, and archived again
    batch.push_back(ArchivedJob{id, finished, job.request.queue, JobStateName(job.state),
                                JobToJson(job).dump(), events + "]"});
    out.push_back(std::move(a));
  }
  return out;
}

void ControlPlane::ArchiveEnded() {
  if (!options_.history || options_.history_retention.value() <= 0) return;
  std::vector<ArchivedJob> batch;
  std::vector<Archived> archived;
  {
    std::lock_guard lock(mu_);
    if (!WritableLocked().ok()) return;
    archived = ArchiveBatchLocked(Now(), batch);
  }
  if (archived.empty()) return;
  // Phase 1: durable in the history (outside the lock: an fsync).
  if (Status st = options_.history->Put(batch); !st.ok()) {
    metrics_.Add("unipool_history_failures_total", {});
    log_.Warn("history", "cannot archive ended jobs, retrying later: " + st.message());
    return;
  }
  // Phase 2: out of the store and memory.
  DropArchived(archived);
}

void ControlPlane::DropArchived(const std::vector<Archived>& jobs) {
  int64_t rev = 0, dropped = 0;
  {
    std::lock_guard lock(mu_);
    std::vector<std::string> keys;
    for (const Archived& a : jobs) {
      auto it = jobs_.find(a.id);
      // Rebuilt meanwhile, or events since: the next round archives it again.
      if (it == jobs_.end() || !Terminal(it->second.state) || it->second.events != a.events) {
        continue;
      }
      progress_.erase(a.id);
      keys.insert(keys.end(), a.keys.begin(), a.keys.end());
      ended_.erase({it->second.finished.value(), a.id});
      jobs_.erase(it);
      ++dropped;
    }
    for (size_t at = 0; at < keys.size(); at += kDeleteOps) {
      Txn txn;
      for (size_t k = at; k < std::min(keys.size(), at + kDeleteOps); ++k) txn.Delete(keys[k]);
      Result<int64_t> r = ApplyLocked(txn);
      if (!r.ok()) return;  // memory was rebuilt from the store; the rest comes again
      rev = *r;
    }
  }
  metrics_.Add("unipool_jobs_archived_total", {}, static_cast<double>(dropped));
  if (rev > 0) (void)SyncOrRebuild(rev);
}

Result<JobRecord> ControlPlane::FromHistory(int64_t id, const Scope& scope,
                                            std::string* events) const {
  if (!options_.history) return NoSuchJob(id);
  Result<std::optional<store::ArchivedJob>> a = options_.history->Get(id);
  if (!a.ok()) return a.status();
  if (!a->has_value()) return NoSuchJob(id);
  Result<JobRecord> job = FromArchive(**a);
  if (!job.ok()) return job.status();
  if (!scope.Sees(job->request.queue)) return NoSuchJob(id);
  if (events) *events = (*a)->events;
  return job;
}

void ControlPlane::ListArchived(const JobFilter& f, const Scope& scope, std::vector<JobRecord>& out,
                                bool* more) const {
  if (!options_.history) return;
  store::HistoryQuery q;
  q.before = f.before;
  q.finished_since = f.since.value();
  q.queue = f.queue;
  if (f.state) q.state = JobStateName(*f.state);
  q.limit = f.limit;
  const size_t limit = static_cast<size_t>(f.limit);
  std::vector<JobRecord> found;
  // Pages until the filters that SQL does not see (scope, labels) have
  // filled the limit, or the history ends, within kMaxHistoryPages.
  bool history_ended = false;
  for (int page = 0; page < kMaxHistoryPages && found.size() < limit; ++page) {
    Result<std::vector<store::ArchivedJob>> rows = options_.history->List(q);
    if (!rows.ok()) {
      log_.Warn("history", "cannot list archived jobs: " + rows.status().message());
      return;
    }
    for (const store::ArchivedJob& a : *rows) {
      Result<JobRecord> j = FromArchive(a);
      if (j.ok() && scope.Sees(j->request.queue) && HasLabels(*j, f) && found.size() < limit) {
        found.push_back(std::move(j).value());
      }
    }
    history_ended = rows->size() < static_cast<size_t>(q.limit);
    if (history_ended) break;
    q.before = rows->back().id;
  }
  // Merge (both newest first), without the ids memory still holds.
  std::vector<JobRecord> merged;
  std::merge(out.begin(), out.end(), found.begin(), found.end(), std::back_inserter(merged),
             [](const JobRecord& a, const JobRecord& b) { return a.id > b.id; });
  out.clear();
  std::set<int64_t> taken;
  size_t distinct = 0;
  for (JobRecord& j : merged) {
    if (!taken.insert(j.id).second) continue;
    if (++distinct <= limit) out.push_back(std::move(j));
  }
  // More: memory had more, the history was not read to its end, or the
  // two together hold more than the limit.
  if (more) *more = *more || !history_ended || distinct > limit;
}

}  // namespace unipool::server
