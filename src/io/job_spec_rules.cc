// The rules and YAML value readers that the job spec readers share
// (declared, with their contracts, in io/job_spec_rules.h).
#include "io/job_spec_rules.h"

#include <algorithm>

#include "io/cluster_reader.h"
#include "io/job_policy.h"
#include "io/quantity.h"
#include "io/quote.h"
#include "io/text.h"
#include "io/yaml_fields.h"

namespace unipool::io::spec_internal {
namespace {

constexpr int64_t kMaxDeadlineSeconds = 9000000000;  // ParseDuration's bound

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Well-formed UTF-8, as nlohmann::json::dump requires.
bool IsUtf8(const std::string& s) { return FirstBadUtf8(s) == std::string::npos; }

}  // namespace

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameLength) return false;
  if (!IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsEnvName(const std::string& s) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), word);
}

bool IsPriorityClass(const std::string& s) {
  return s.empty() || s == "low" || s == "normal" || s == "high";
}

std::string StringProblem(const std::string& s) {
  if (s.size() > kMaxStringBytes) {
    return std::to_string(s.size()) + " bytes; at most " + std::to_string(kMaxStringBytes) +
           " are accepted";
  }
  if (!IsUtf8(s)) return "expected UTF-8 text";
  return "";
}

std::string Join(const std::string& path, const std::string& key) {
  const std::string k = OneLine(Truncate(key, 64));
  if (k.find_first_of("./ []") != std::string::npos) return path + "[" + k + "]";
  return path.empty() ? k : path + "." + k;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// ---- YAML values, for the readers of both shapes.

Status Missing(SourceLoc at, const std::string& path) {
  return InvalidArgument(path + ": required field is missing", at);
}

Status ReadScalar(const YAML::Node& n, const std::string& path, std::string* out,
                  bool allow_empty) {
  if (allow_empty && n.IsNull()) {
    out->clear();
    return Status::Ok();
  }
  if (!n.IsScalar() || (!allow_empty && n.Scalar().empty())) {
    return Expected(n, path, allow_empty ? "a string" : "a non-empty string");
  }
  const std::string problem = StringProblem(n.Scalar());
  if (!problem.empty()) return InvalidArgument(path + ": " + problem, LocOf(n));
  *out = n.Scalar();
  return Status::Ok();
}

Status ReadInt(const YAML::Node& n, const std::string& path, int64_t* out, int64_t min,
               int64_t max) {
  int64_t v = 0;
  if (!n.IsScalar() || !ParseInt64(n.Scalar(), &v) || v < min || v > max) {
    return Expected(n, path,
                    "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  }
  *out = v;
  return Status::Ok();
}

namespace {

Status ReadQuantity(const YAML::Node& n, const std::string& path, int64_t* out,
                    Result<int64_t> (*parse)(std::string_view)) {
  if (!n.IsScalar()) return Expected(n, path, "a quantity such as 2, 500m or 64Gi");
  Result<int64_t> v = parse(n.Scalar());
  if (!v.ok()) return InvalidArgument(path + ": " + v.status().message(), LocOf(n));
  *out = *v;
  return Status::Ok();
}

}  // namespace

Status ReadCpuLimit(const YAML::Node& n, const std::string& path, int64_t* milli_cpu) {
  return ReadQuantity(n, path, milli_cpu, ParseMilliCpu);
}

Status ReadMemoryLimit(const YAML::Node& n, const std::string& path, int64_t* bytes) {
  return ReadQuantity(n, path, bytes, ParseByteQuantity);
}

Status ReadInt32(const YAML::Node& n, const std::string& path, int32_t* out, int32_t min,
                 int32_t max) {
  int64_t v = 0;
  UNIPOOL_RETURN_IF_ERROR(ReadInt(n, path, &v, min, max));
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

Status CheckListSize(const YAML::Node& n, const std::string& path, size_t max) {
  if (n.size() <= max) return Status::Ok();
  return InvalidArgument(path + ": " + std::to_string(n.size()) + " entries; at most " +
                             std::to_string(max) + " are accepted",
                         LocOf(n));
}

Status ReadStringList(const YAML::Node& n, const std::string& path, Strings* out) {
  if (!n.IsSequence()) return Expected(n, path, "a list of strings");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxListEntries));
  out->clear();
  for (size_t i = 0; i < n.size(); ++i) {
    out->emplace_back();
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(n[i], Index(path, i), &out->back(), true));
  }
  return Status::Ok();
}

Status ReadCommand(const YAML::Node& n, const std::string& path, Strings* out) {
  UNIPOOL_RETURN_IF_ERROR(ReadStringList(n, path, out));
  if (out->empty()) return Expected(n, path, "a non-empty list of strings");
  if (out->front().empty()) return Expected(n[0], Index(path, 0), "a program to run");
  return Status::Ok();
}

Status ReadLabels(const YAML::Node& n, const std::string& path, Pairs* out) {
  if (!n.IsMap()) return Expected(n, path, "a mapping of label names to values");
  UNIPOOL_RETURN_IF_ERROR(CheckListSize(n, path, kMaxLabels));
  out->clear();
  for (const auto& kv : n) {
    std::string key, value;
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.first, path, &key, false));
    UNIPOOL_RETURN_IF_ERROR(ReadScalar(kv.second, Join(path, key), &value, true));
    if (!IsLabelKey(key))
      return Expected(kv.first, path, std::string("label keys: ") + kLabelKeyRule);
    if (!IsLabelValue(value)) {
      return Expected(kv.second, Join(path, key), std::string("a label value: ") + kLabelValueRule);
    }
    out->emplace_back(std::move(key), std::move(value));
  }
  std::sort(out->begin(), out->end());
  for (size_t i = 1; i < out->size(); ++i) {
    if ((*out)[i].first == (*out)[i - 1].first) {
      return InvalidArgument(Join(path, (*out)[i].first) + ": set twice", LocOf(n));
    }
  }
  return Status::Ok();
}

Status ReadName(const YAML::Node& n, const std::string& path, std::string* out) {
  UNIPOOL_RETURN_IF_ERROR(ReadScalar(n, path, out, false));
  if (!IsDnsLabel(*out)) return Expected(n, path, kNameRule);
  return Status::Ok();
}

Status AddEnv(const YAML::Node& name_node, const std::string& path, const std::string& name,
              std::string value, std::set<std::string>* seen, Pairs* env) {
  if (!IsEnvName(name)) return Expected(name_node, path, kEnvNameRule);
  if (!seen->insert(name).second) {
    return InvalidArgument(path + ": " + Quote(name) + " is set twice", LocOf(name_node));
  }
  env->emplace_back(name, std::move(value));
  return Status::Ok();
}

Reader StringInto(std::string* out) {
  return [out](const YAML::Node& v, const std::string& p) { return ReadScalar(v, p, out, false); };
}

Reader IntInto(int64_t* out, int64_t min, int64_t max) {
  return [=](const YAML::Node& v, const std::string& p) { return ReadInt(v, p, out, min, max); };
}

Reader Int32Into(int32_t* out, int32_t min, int32_t max) {
  return [=](const YAML::Node& v, const std::string& p) { return ReadInt32(v, p, out, min, max); };
}

Reader SecondsInto(Duration* out) {
  return [out](const YAML::Node& v, const std::string& p) {
    int64_t s = 0;
    UNIPOOL_RETURN_IF_ERROR(ReadInt(v, p, &s, 1, kMaxDeadlineSeconds));
    *out = Seconds(s);
    return Status::Ok();
  };
}

Status AddVolume(const YAML::Node& n, const std::string& path, const std::string& name,
                 const std::string& source, Strings* out) {
  std::string hint = source.empty() ? name : name + "=" + source;
  const std::string problem = StringProblem(hint);
  if (!problem.empty()) return InvalidArgument(path + ": " + problem, LocOf(n));
  out->push_back(std::move(hint));
  return Status::Ok();
}

Status CheckMount(const Mount& m, SourceLoc at, const std::string& path) {
  if (!m.path.starts_with("/") || HasDotDot(m.path)) {
    return InvalidArgument(
        path + ".mountPath: expected an absolute path without '..', got " + Quote(m.path), at);
  }
  const bool known = (m.source.starts_with("hostPath:/") && !HasDotDot(m.source)) ||
                     (m.source.starts_with("pvc:") && m.source != "pvc:." && m.source != "pvc:.." &&
                      m.source.size() > 4 && m.source.find('/') == std::string::npos) ||
                     m.source == "emptyDir" || m.source.starts_with("nfs:");
  if (!known) {
    return InvalidArgument(path +
                               ".source: expected hostPath:/DIR, pvc:CLAIM, emptyDir or "
                               "nfs:SERVER:/DIR for a volume with a mountPath, got " +
                               Quote(m.source),
                           at);
  }
  return Status::Ok();
}

}  // namespace unipool::io::spec_internal
