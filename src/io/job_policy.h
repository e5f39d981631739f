// Job policy: what a job may ask of a node, beyond what the spec's shape
// allows. The server applies it at submission (a 400 naming the field);
// the agent applies the parts it alone can (the allowed roots of its
// directories, who the processes run as).
//
//   - Paths (workingDir, checkpoint.dir) are never resolved through "..":
//     a ".." component is refused for every submitter.
//   - A tenant may not set environment variables that change how programs
//     load or what privileged helpers do with them: every LD_* name and
//     kLoaderEnv below (glibc's list of variables it drops for set-user-ID
//     programs, and the shells' startup files); nor UNIPOOL_* (the agent's).
#pragma once

#include <string>

#include "core/base/status.h"
#include "io/job_spec.h"

namespace unipool::io {

// Names refused for tenants besides LD_* and UNIPOOL_*.
inline constexpr const char* kLoaderEnv[] = {
    "GCONV_PATH",  "GETCONF_DIR",      "GLIBC_TUNABLES", "HOSTALIASES",
    "LOCALDOMAIN", "LOCPATH",          "MALLOC_TRACE",   "NIS_PATH",
    "NLSPATH",     "RESOLV_HOST_CONF", "RES_OPTIONS",    "BASH_ENV",
    "ENV",         "PYTHONSTARTUP",    "PERL5OPT",       "NODE_OPTIONS"};

// Why a tenant's job may not set `name` ("" when it may).
std::string TenantEnvProblem(const std::string& name);

// True when `path`, split at '/', has a ".." component.
bool HasDotDot(const std::string& path);

// Every submitter: no ".." in spec.workingDir or spec.checkpoint.dir.
// Tenants (`tenant`): no refused environment variable (TenantEnvProblem).
// Errors: kInvalidArgument naming the field, e.g.
// "spec.env[LD_PRELOAD]: tenants may not set LD_* (it changes how programs load)".
Status CheckJobPolicy(const JobRequest& job, bool tenant);

}  // namespace unipool::io
