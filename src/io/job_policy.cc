#include "io/job_policy.h"

#include <algorithm>
#include <iterator>

#include "io/quote.h"

namespace unipool::io {

std::string TenantEnvProblem(const std::string& name) {
  if (name.starts_with("LD_")) return "tenants may not set LD_* (it changes how programs load)";
  if (name.starts_with("UNIPOOL_")) return "UNIPOOL_* is set by the agent";
  if (std::find_if(std::begin(kLoaderEnv), std::end(kLoaderEnv),
                   [&](const char* n) { return name == n; }) != std::end(kLoaderEnv)) {
    return "tenants may not set " + name +
           " (it changes how programs load or start; see docs/operations.md)";
  }
  return "";
}

bool HasDotDot(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (path.compare(start, end - start, "..") == 0) return true;
    start = end + 1;
  }
  return false;
}

Status CheckJobPolicy(const JobRequest& job, bool tenant) {
  for (const auto& [field, path] : {std::pair{"spec.workingDir", &job.working_dir},
                                    {"spec.checkpoint.dir", &job.checkpoint_dir}}) {
    if (HasDotDot(*path)) {
      return InvalidArgument(std::string(field) + ": " + Quote(*path) +
                             " has a '..' component; give the directory itself");
    }
  }
  if (!tenant) return Status::Ok();
  for (const auto* list : {&job.env, &job.secret_env, &job.secret_refs}) {
    for (const auto& [name, value] : *list) {
      const std::string problem = TenantEnvProblem(name);
      if (!problem.empty()) return InvalidArgument("spec.env[" + name + "]: " + problem);
    }
  }
  return Status::Ok();
}

}  // namespace unipool::io
