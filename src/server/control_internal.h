// What the ControlPlane's files (control*.cc) share beyond control.h.
#pragma once

#include "core/base/status.h"

namespace unipool::server {

// kNotFound for job `id` (also when the caller may not see it).
Status NoSuchJob(int64_t id);

}  // namespace unipool::server
