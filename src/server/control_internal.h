// What the ControlPlane's files (control*.cc) share beyond control.h.
#pragma once

#include "core/base/status.h"
#include "server/control.h"

namespace unipool::server {

// kNotFound for job `id` (also when the caller may not see it).
Status NoSuchJob(int64_t id);

// Whether job `j` has every label that `f` asks for.
bool HasLabels(const JobRecord& j, const JobFilter& f);

}  // namespace unipool::server
