// Job specs as users write them, read into one JobRequest.
//
// Four shapes are accepted, YAML or JSON (JSON is read as YAML):
//   apiVersion: unipool/v1, kind: Job        - the native spec (docs/api.md)
//   apiVersion: v1, kind: Pod                - a Kubernetes Pod
//   apiVersion: batch/v1, kind: Job          - a Kubernetes Job
//   apiVersion: kubeflow.org/v1, kind: PyTorchJob
// The Kubernetes shapes are taken unchanged: what has a meaning here is
// mapped (containers[0].command/args/env/workingDir, resources.limits of
// nvidia.com/gpu, parallelism/replicas, priorityClassName, volumes as
// hints, activeDeadlineSeconds, backoffLimit, ...) and every field that is
// ignored is named in ParsedJob::ignored ("spec.containers[0].image:
// ignored, no container runtime is configured").
//
// Errors: one line naming the field path and its place in the text
// ("job.yaml:7:5: spec.gpus: expected an integer in [1, 16777216]").
// Unknown fields of the native spec are errors; sizes and counts are
// bounded (see the k* limits below).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/base/units.h"

namespace unipool::io {

inline constexpr size_t kMaxSpecBytes = 1 << 20;  // 1 MiB
inline constexpr size_t kMaxNameLength = 63;      // DNS-1123 label
inline constexpr size_t kMaxListEntries = 1024;   // command, args, env, volumes
inline constexpr size_t kMaxLabels = 64;
inline constexpr size_t kMaxStringBytes = 64 << 10;  // any one string
inline constexpr int64_t kMaxJobGpus = 1 << 24;

enum class LaunchMode {
  kPerGpu,   // one process per GPU, RANK/LOCAL_RANK set by the agent
  kPerNode,  // one process per node that runs torchrun itself
  kPerTask,  // one process per task of gpus_per_task GPUs (a Kubernetes pod)
};

// Where a gang's tasks go when they may share a node.
enum class Spread {
  kPack,    // the fewest nodes (the topology placer's best fit)
  kSpread,  // every task on a node of its own
};

struct RestartPolicy {
  int32_t max_restarts = 3;        // restarts after failures (not preemptions)
  Duration backoff = Seconds(10);  // wait before each restart, doubled each time
};

// A volume the job's container sees at `path` (honoured with an image and
// a container runtime on the node; docs/operations.md, "Containers").
struct Mount {
  std::string source;  // "hostPath:/dir", "pvc:CLAIM", "emptyDir", "nfs:SERVER:/dir"
  std::string path;    // absolute, inside the container
  bool read_only = false;
};

// What each task may use of its node (docs/api.md, "Limits"), enforced by
// the node's cgroup where the agent has one; 0: no limit. A task is a pod,
// a node's share of a gpusPerNode job (or of a job that gives no shape), or
// a gpusPerTask task.
struct TaskLimits {
  int64_t milli_cpu = 0;  // thousandths of a core: cpu.max
  int64_t memory = 0;     // bytes: memory.max (and no swap)
  int64_t pids = 0;       // processes and threads: pids.max
  bool any() const { return milli_cpu > 0 || memory > 0 || pids > 0; }
  bool operator==(const TaskLimits&) const = default;
};

// What a user asked for, independent of the shape it came in.
struct JobRequest {
  std::string name;  // metadata.name: lowercase alphanumerics and '-', 1..63
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by key
  std::vector<std::string> command;                         // required, non-empty
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // in the order given
  // Secret values (native env entries with secret: true): kept apart by the
  // server, never listed back, sent only to the job's nodes. The stored
  // form (JobRequestToJson) holds their names only.
  std::vector<std::pair<std::string, std::string>> secret_env;
  // Kubernetes valueFrom.secretKeyRef: NAME -> "SECRET/KEY", read on the
  // node from the agent's --secret-dir (DIR/QUEUE/SECRET/KEY).
  std::vector<std::pair<std::string, std::string>> secret_refs;
  std::string working_dir;
  int64_t gpus = 0;  // total; the maximum for elastic jobs; >= 1
  // The job's shape (docs/api.md, "Job shape"), at most one of the first two:
  int32_t gpus_per_node = 0;  // GPUs on each node it uses (a node each); 0: not said
  int32_t gpus_per_task = 0;  // GPUs per task, tasks may share a node; 0: not said
  int32_t nodes = 0;          // 0: not said; else gpus / nodes on each
  bool exclusive = false;     // its nodes run nothing else (charged whole)
  Spread spread = Spread::kPack;
  TaskLimits limits;
  std::string queue = "default";
  std::string priority_class;  // "" | low | normal | high (resolved by the server)
  int32_t priority = 0;        // explicit priority; used when priority_class is ""
  bool preemptible = true;
  int64_t min_gpus = 0;  // elastic: 0 = not elastic; else 1..gpus
  // elastic.onResize: continue: the processes live through a resize and
  // read the new membership from $UNIPOOL_RENDEZVOUS_FILE (a lost node
  // shrinks the job in place); false (restart): every resize restarts them.
  bool elastic_continue = false;
  RestartPolicy restart;
  std::string checkpoint_dir;
  Duration checkpoint_interval;      // 0: the job decides
  std::string within;                // topology: the gang stays in one group of this tier (name)
  // topology, soft: a tier name the gang would rather fit in one group of,
  // or "any" (start as soon as it fits anywhere); and how long it may wait
  // for that (-1: the scheduler's default). "" = the scheduler decides.
  std::string prefer;
  Duration max_wait = Duration(-1);
  std::string partition;             // run only here; "" = any
  std::string data_locality;         // preferred partition (a hint)
  std::vector<std::string> volumes;  // dataset / volume hints: "name" or "name=source"
  std::vector<Mount> mounts;         // the volumes with a mount path
  Duration time_limit;               // 0 = none
  // 0 = off. A run whose reported step stops advancing this long is hung:
  // restarted like a failure (the agent that watches rank 0 says so).
  Duration progress_timeout;
  // What a straggler rank (core/train/signals.h) does to the job: "warn"
  // (an event and a metric) or "replace" (its node is cordoned and the gang
  // restarts from its checkpoint without it, as a disruption).
  std::string on_straggler = "warn";
  LaunchMode launch = LaunchMode::kPerGpu;
  std::string image;        // recorded; ignored without a container runtime
  std::string source_kind;  // "unipool/v1 Job", "v1 Pod", "batch/v1 Job", ...
};

struct ParsedJob {
  JobRequest job;
  std::vector<std::string> ignored;   // "path: why", one per ignored field
  std::vector<std::string> warnings;  // "path: what changed", e.g. a field's meaning
};

// Parses one spec. `source` names the text in errors ("job.yaml", "request body").
Result<ParsedJob> ReadJobSpec(std::string_view text, const std::string& source);

// Storage form (the server's store): a JSON object holding every field.
// JobRequestFromJson(JobRequestToJson(r)) == r.
nlohmann::json JobRequestToJson(const JobRequest& r);
Result<JobRequest> JobRequestFromJson(const nlohmann::json& j);

const char* LaunchModeName(LaunchMode m);  // "per-gpu" | "per-node" | "per-task"
std::optional<LaunchMode> ParseLaunchMode(const std::string& s);

}  // namespace unipool::io
