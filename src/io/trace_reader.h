// Reads a job trace in the common CSV format of the shared traces folder
// (job_id,submit_time_s,num_gpus,duration_s,wait_time_s,user,queue,status,
// priority[,extra...]) into simulator jobs. Errors name file:line and cause.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/sim/model.h"

namespace unipool::io {

struct TraceOptions {
  // Which column names the unipool queue: "queue", "user" or "none" (all
  // jobs in `default_queue`). Queues are numbered in order of first use.
  std::string queue_from = "queue";
  std::string default_queue = "default";
  // Applied to every job of the trace.
  sim::CheckpointMode checkpoint = sim::CheckpointMode::kNone;
  Duration checkpoint_interval;
  Duration checkpoint_cost;
  Duration restart_cost;
  bool estimates = true;  // give the scheduler each job's true duration
};

struct Trace {
  std::vector<sim::SimJob> jobs;
  std::vector<std::string> queues;  // index = SimJob::queue
  int64_t rows = 0;
  int64_t skipped_cpu_only = 0;     // num_gpus == 0
  int64_t skipped_no_duration = 0;  // duration unknown
  double gpu_hours = 0;             // of the jobs kept
};

// Parses CSV text; errors are "line N: cause".
Result<Trace> ParseTrace(std::string_view text, const TraceOptions& options);
// Reads a file; errors are "path:line: cause".
Result<Trace> ReadTrace(const std::string& path, const TraceOptions& options);

}  // namespace unipool::io
