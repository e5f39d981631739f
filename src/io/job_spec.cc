// Reading a job spec of any shape: which shape it is, then that shape's
// reader (job_spec_native.cc, job_spec_kube.cc), with bounds on size.
#include "io/job_spec.h"

#include <algorithm>
#include <exception>
#include <iterator>

#include "io/cluster_reader.h"
#include "io/job_spec_rules.h"
#include "io/quote.h"
#include "io/text.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

using spec_internal::Missing;
using spec_internal::ReadKubeBatchJob;
using spec_internal::ReadKubePod;
using spec_internal::ReadKubePyTorchJob;
using spec_internal::ReadNative;
using spec_internal::ReadScalar;

// ---- Reading a spec of any shape.

constexpr const char* kShapes[] = {"unipool/v1 Job", "v1 Pod", "batch/v1 Job",
                                   "kubeflow.org/v1 PyTorchJob"};

Status ReadShape(const YAML::Node& doc, std::string* shape) {
  if (!doc.IsMap()) return Expected(doc, "job", "a mapping with apiVersion and kind");
  const YAML::Node api = doc["apiVersion"];
  const YAML::Node kind = doc["kind"];
  if (!api.IsDefined()) return Missing(LocOf(doc), "apiVersion");
  if (!kind.IsDefined()) return Missing(LocOf(doc), "kind");
  std::string a, k;
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(api, "apiVersion", &a, false));
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(kind, "kind", &k, false));
  *shape = a + " " + k;
  if (std::find(std::begin(kShapes), std::end(kShapes), *shape) != std::end(kShapes)) {
    return Status::Ok();
  }
  return InvalidArgument(
      "kind: expected unipool/v1 Job, v1 Pod, batch/v1 Job or kubeflow.org/v1 PyTorchJob, got " +
          Quote(*shape),
      LocOf(kind));
}

// Keeps the ignored list bounded like every other list.
void CapIgnored(std::vector<std::string>* ignored) {
  if (ignored->size() <= kMaxListEntries) return;
  const size_t more = ignored->size() - (kMaxListEntries - 1);
  ignored->resize(kMaxListEntries - 1);
  ignored->push_back("...: " + std::to_string(more) + " more ignored fields are not listed");
}

Result<ParsedJob> Parse(std::string_view text) {
  if (text.size() > kMaxSpecBytes) {
    return InvalidArgument("the spec is " + std::to_string(text.size()) + " bytes; at most " +
                           std::to_string(kMaxSpecBytes) + " are accepted");
  }
  Result<YAML::Node> doc = LoadDocument(text, "Job");
  if (!doc.ok()) return doc.status();
  const YAML::Node& root = *doc;
  ParsedJob out;
  UNIPOOL_RETURN_IF_ERROR(ReadShape(root, &out.job.source_kind));
  const std::string& shape = out.job.source_kind;
  if (shape == "unipool/v1 Job") {
    UNIPOOL_RETURN_IF_ERROR(ReadNative(root, &out.job));
    const JobRequest& j = out.job;
    if (j.gpus_per_node > 0 && j.gpus > j.gpus_per_node && j.nodes == 0) {
      out.warnings.push_back(
          "spec.gpusPerNode: the GPUs on each node: " + std::to_string(j.gpus / j.gpus_per_node) +
          " nodes x " + std::to_string(j.gpus_per_node) +
          " GPUs (earlier versions read it as GPUs per task, and tasks could share a node; "
          "gpusPerTask says that now)");
    }
  } else if (shape == "v1 Pod") {
    UNIPOOL_RETURN_IF_ERROR(ReadKubePod(root, &out));
  } else if (shape == "batch/v1 Job") {
    UNIPOOL_RETURN_IF_ERROR(ReadKubeBatchJob(root, &out));
  } else {
    UNIPOOL_RETURN_IF_ERROR(ReadKubePyTorchJob(root, &out));
  }
  CapIgnored(&out.ignored);
  return out;
}

Result<ParsedJob> ParseCatching(std::string_view text) {
  try {
    return Parse(text);
  } catch (const YAML::Exception& e) {  // defensive: yaml-cpp may throw on odd nodes
    return InvalidArgument("cannot read: " + e.msg, {e.mark.line + 1, e.mark.column + 1});
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("cannot read: ") + e.what());
  }
}

}  // namespace

const char* LaunchModeName(LaunchMode m) {
  switch (m) {
    case LaunchMode::kPerNode:
      return "per-node";
    case LaunchMode::kPerTask:
      return "per-task";
    case LaunchMode::kPerGpu:
      break;
  }
  return "per-gpu";
}

std::optional<LaunchMode> ParseLaunchMode(const std::string& s) {
  for (LaunchMode m : {LaunchMode::kPerGpu, LaunchMode::kPerNode, LaunchMode::kPerTask}) {
    if (s == LaunchModeName(m)) return m;
  }
  return std::nullopt;
}

Result<ParsedJob> ReadJobSpec(std::string_view text, const std::string& source) {
  Result<ParsedJob> parsed = ParseCatching(text);
  // Ignored keys and comments too must be text: ignored fields are named
  // in warnings, and the API answers them as JSON.
  if (const size_t bad = FirstBadUtf8(text); parsed.ok() && bad != std::string_view::npos) {
    const std::string_view before = text.substr(0, bad);
    const size_t line = static_cast<size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
    const size_t nl = before.rfind('\n');
    const size_t col = bad - (nl == std::string_view::npos ? 0 : nl + 1) + 1;
    return InvalidArgument(source + ":" + std::to_string(line) + ":" + std::to_string(col) +
                           ": not UTF-8 text");
  }
  if (parsed.ok()) return parsed;
  return InvalidArgument(OneLine(WithFile(source, parsed.status())));
}

}  // namespace unipool::io
