// Internal to the job spec readers (job_spec*.cc), not a public API: the
// limits, name rules and YAML value readers that the native reader, the
// Kubernetes reader and the storage form share, and the readers' entry points.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/base/units.h"
#include "io/job_spec.h"

namespace unipool::io::spec_internal {

using Pairs = std::vector<std::pair<std::string, std::string>>;
using Strings = std::vector<std::string>;

inline constexpr int32_t kMaxGpusPerNode = 1024;
inline constexpr int32_t kMaxRestarts = 10000;
inline constexpr int32_t kMaxPriority = 1000000;

// ---- Rules shared by the readers and JobRequestFromJson.

inline constexpr const char* kNameRule =
    "a DNS-1123 label: 1 to 63 lowercase letters, digits or '-', starting and ending with a "
    "letter or digit";
inline constexpr const char* kEnvNameRule =
    "an environment variable name: a letter or '_', then letters, digits or '_'";

// True when `s` is a job name: kNameRule.
bool IsDnsLabel(const std::string& s);

// True when `s` is an environment variable name: kEnvNameRule.
bool IsEnvName(const std::string& s);

// "" is allowed: no class, the explicit priority applies.
bool IsPriorityClass(const std::string& s);

// Empty when `s` is an acceptable string value, else the cause.
std::string StringProblem(const std::string& s);

// "path.key", or "path[key]" for keys such as nvidia.com/gpu.
std::string Join(const std::string& path, const std::string& key);

// "path[i]".
std::string Index(const std::string& path, size_t i);

// ---- YAML values, for the readers of both shapes.

// "path: required field is missing" at `at`.
Status Missing(SourceLoc at, const std::string& path);

// A scalar string. REQUIRES: n.IsDefined().
Status ReadScalar(const YAML::Node& n, const std::string& path, std::string* out, bool allow_empty);

// A whole number in [min, max]. REQUIRES: n.IsDefined().
Status ReadInt(const YAML::Node& n, const std::string& path, int64_t* out, int64_t min,
               int64_t max);

// ReadInt for an int32_t field.
Status ReadInt32(const YAML::Node& n, const std::string& path, int32_t* out, int32_t min,
                 int32_t max);

// A list or mapping of at most `max` entries.
Status CheckListSize(const YAML::Node& n, const std::string& path, size_t max);

// A list of at most kMaxListEntries strings (each may be empty).
Status ReadStringList(const YAML::Node& n, const std::string& path, Strings* out);

// A command: a non-empty list whose first entry is non-empty.
Status ReadCommand(const YAML::Node& n, const std::string& path, Strings* out);

// metadata.labels of either shape: a mapping of strings, sorted by key.
Status ReadLabels(const YAML::Node& n, const std::string& path, Pairs* out);

// metadata.name of either shape: a non-empty string that follows kNameRule.
Status ReadName(const YAML::Node& n, const std::string& path, std::string* out);

// Appends NAME=value to the environment; names are checked and unique.
Status AddEnv(const YAML::Node& name_node, const std::string& path, const std::string& name,
              std::string value, std::set<std::string>* seen, Pairs* env);

// Reads one field's value (at a path) into the job; used by the rule lists
// of the Kubernetes reader.
using Reader = std::function<Status(const YAML::Node&, const std::string&)>;

// Readers into a string (non-empty) and into whole numbers in [min, max].
Reader StringInto(std::string* out);
Reader IntInto(int64_t* out, int64_t min, int64_t max);
Reader Int32Into(int32_t* out, int32_t min, int32_t max);

// Binds a reader with an output, e.g. Into(ReadName, &job.name).
template <class T>
Reader Into(Status (*read)(const YAML::Node&, const std::string&, T*), T* out) {
  return [read, out](const YAML::Node& v, const std::string& p) { return read(v, p, out); };
}

// A number of seconds (Kubernetes' activeDeadlineSeconds).
Reader SecondsInto(Duration* out);

// A task's limits: a CPU quantity ("2", "500m"), a byte quantity ("64Gi")
// or a whole number of pids (io/quantity.h). REQUIRES: n.IsDefined().
Status ReadCpuLimit(const YAML::Node& n, const std::string& path, int64_t* milli_cpu);
Status ReadMemoryLimit(const YAML::Node& n, const std::string& path, int64_t* bytes);
inline constexpr int64_t kMaxPids = 4194304;  // the kernel's PID_MAX_LIMIT

// A mount's rules: an absolute path without "..", and a source of a kind
// the agents know (hostPath:/abs, pvc:CLAIM, emptyDir, nfs:SERVER:/abs).
Status CheckMount(const Mount& m, SourceLoc at, const std::string& path);

// A volume hint: "name" or "name=source", bounded like any string.
Status AddVolume(const YAML::Node& n, const std::string& path, const std::string& name,
                 const std::string& source, Strings* out);

// ---- The readers, one per shape (ReadShape in job_spec.cc picks one).

// The native shape, apiVersion unipool/v1, kind Job (job_spec_native.cc).
Status ReadNative(const YAML::Node& doc, JobRequest* job);

// The Kubernetes shapes v1 Pod, batch/v1 Job and kubeflow.org/v1 PyTorchJob
// (job_spec_kube.cc); fields with no meaning here go to out->ignored.
Status ReadKubePod(const YAML::Node& doc, ParsedJob* out);
Status ReadKubeBatchJob(const YAML::Node& doc, ParsedJob* out);
Status ReadKubePyTorchJob(const YAML::Node& doc, ParsedJob* out);

}  // namespace unipool::io::spec_internal
