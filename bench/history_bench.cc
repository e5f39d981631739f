// The history file (store/history.h) at the size issue 14 sets: 1,000,000
// ended jobs, archived 1,000 per transaction as the leader does, each with
// the record and events of a typical finished job (an 8-GPU job that ran an
// hour and checkpointed three times, as GET /v1/jobs/ID shows it). Reports
// the file's size per job, and reads: one job by id, one page of a queue.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "store/history.h"

namespace unipool::store {
namespace {

constexpr int64_t kJobs = 1000000;
constexpr int64_t kBatch = 1000;
constexpr int64_t kNs = 1000000000;
constexpr int64_t kStart = 1796292117 * kNs;  // 2026-12-03T09:01:57Z

// The record, less its id (an API job object; 1.3 KB).
constexpr char kRecord[] =
    R"({"clearing":{},"disruptions":0,"events":6,"explain":"running on 1 node (n0004); ring all-reduce of 1 GiB ~ 4.2 ms; the lowest tier with room, best-fit at each tier","finished":"2026-12-03T10:01:57.314Z","generation":1,"identity":{"allowRoot":false,"runAs":"","tenant":false},"lastCheckpoint":"2026-12-03T09:01:57.314Z","lostGpuSeconds":0,"masterPort":28881,"message":"exited 0 after 1h0m0s","name":"bench","owner":"ops","peerFailure":null,"preemptDeadline":null,"preemptions":0,"progress":null,"queue":"default","restarts":0,"retryAt":null,"spec":{"args":[],"checkpointDir":"","checkpointIntervalNs":0,"command":["sleep","3600"],"dataLocality":"","env":[],"exclusive":false,"gpus":8,"gpusPerNode":0,"gpusPerTask":0,"image":"","labels":[],"launch":"per-gpu","limits":{"memoryBytes":0,"milliCpu":0,"pids":0},"minGpus":0,"mounts":[],"name":"bench","nodes":0,"partition":"","placement":"pack","preemptible":true,"priority":0,"priorityClass":"","progressTimeoutNs":0,"queue":"default","restart":{"backoffNs":10000000000,"maxRestarts":3},"secretEnv":[],"secretRefs":[],"shapeVersion":2,"sourceKind":"unipool/v1 Job","timeLimitNs":0,"volumes":[],"within":"","workingDir":""},"started":"2026-12-03T09:01:57.314Z","state":"Succeeded","stoppedNodes":[],"submitted":"2026-12-03T09:01:57.266Z","tasks":[{"gpus":[0,1,2,3,4,5,6,7],"node":"n0004"}]})";

std::string Events(int64_t i) {
  std::string e = R"([{"message":"submitted by ops to queue default: 8 GPUs","time":"2026-12-03T09:01:57.266Z","type":"Submitted"},)"
                  R"({"message":"1 node: n)" + std::to_string(i % 10000) + R"(","time":"2026-12-03T09:01:57.319Z","type":"Started"},)";
  for (int k = 1; k <= 3; ++k) {
    e += R"({"message":"checkpoint )" + std::to_string(k) + R"( saved","time":"2026-12-03T09:)" +
         std::to_string(15 * k) + R"(:00.000Z","type":"Checkpointed"},)";
  }
  e += R"({"message":"exited 0 after 1h0m0s","time":"2026-12-03T10:01:57.314Z","type":"Succeeded"}])";
  return e;
}

ArchivedJob Job(int64_t id) {
  ArchivedJob j;
  j.id = id;
  j.finished = kStart + id * kNs;
  j.queue = id % 4 == 0 ? "team-a" : "default";
  j.state = "Succeeded";
  j.record = std::string(R"({"id":)") + std::to_string(id) + "," + (kRecord + 1);
  j.events = Events(id);
  return j;
}

std::string Path() {
  return (std::filesystem::temp_directory_path() / "unipool-history-bench.db").string();
}

void BM_ArchiveMillionJobs(benchmark::State& state) {
  const std::string path = Path();
  for (auto _ : state) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    auto h = History::Open(path);
    if (!h.ok()) std::abort();
    std::vector<ArchivedJob> batch;
    for (int64_t id = 1; id <= kJobs; id += kBatch) {
      batch.clear();
      for (int64_t k = id; k < id + kBatch; ++k) batch.push_back(Job(k));
      if (!(*h)->Put(batch).ok()) std::abort();
    }
  }
  state.counters["jobs_per_s"] = benchmark::Counter(kJobs, benchmark::Counter::kIsRate);
  const auto bytes = std::filesystem::file_size(path);
  state.counters["file_MiB"] = static_cast<double>(bytes) / (1 << 20);
  state.counters["bytes_per_job"] = static_cast<double>(bytes) / kJobs;
}
BENCHMARK(BM_ArchiveMillionJobs)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_GetOneOfAMillion(benchmark::State& state) {
  auto h = History::Open(Path());
  if (!h.ok() || *(*h)->Count() != kJobs) {
    state.SkipWithError("run BM_ArchiveMillionJobs first");
    return;
  }
  int64_t id = 1;
  for (auto _ : state) {
    auto j = (*h)->Get(id);
    benchmark::DoNotOptimize(j.ok());
    id = id * 7919 % kJobs + 1;
  }
}
BENCHMARK(BM_GetOneOfAMillion)->Unit(benchmark::kMicrosecond);

void BM_ListAQueueSinceAnHourAgo(benchmark::State& state) {
  auto h = History::Open(Path());
  if (!h.ok()) {
    state.SkipWithError("no history file");
    return;
  }
  HistoryQuery q;
  q.queue = "team-a";
  q.finished_since = kStart + (kJobs - 3600) * kNs;
  q.limit = 100;
  for (auto _ : state) {
    auto page = (*h)->List(q);
    benchmark::DoNotOptimize(page.ok());
  }
  std::filesystem::remove(Path());
}
BENCHMARK(BM_ListAQueueSinceAnHourAgo)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace unipool::store
