// What the ControlPlane's files (control*.cc) share beyond control.h.
#pragma once

#include "core/base/status.h"
#include "server/control.h"

namespace unipool::server {

// kNotFound for job `id` (also when the caller may not see it).
Status NoSuchJob(int64_t id);

// Where the job's next run starts: "its checkpoint of TIME (step 200)", or
// "the beginning (no checkpoint yet)" when its runs wrote none.
std::string ResumePoint(const JobRecord& j);

// The job's run is over here (at `now`): its GPU-seconds are counted, its
// tasks kept as the previous run's (JobRecord::previous_tasks) and cleared.
void EndRun(JobRecord& j, Time now);

// Counts the GPU-seconds of job `j`'s run up to `now` (before its tasks
// change: a resize).
void AccountRun(JobRecord& j, Time now);

// Whether job `j` has every label that `f` asks for.
bool HasLabels(const JobRecord& j, const JobFilter& f);

}  // namespace unipool::server
