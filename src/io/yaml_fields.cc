#include "io/yaml_fields.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "io/quote.h"
#include "io/suggest.h"
#include "io/text.h"

namespace unipool::io {

SourceLoc LocOf(const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

static std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return Quote(node.Scalar());
    default:
      return "nothing";
  }
}

Status Expected(const YAML::Node& node, const std::string& path, const std::string& what) {
  return InvalidArgument(path + ": expected " + what + ", got " + Describe(node), LocOf(node));
}

Result<Fields> Fields::Of(const YAML::Node& node, std::string path,
                          std::initializer_list<const char*> allowed) {
  if (!node.IsMap()) return Expected(node, path, "a mapping");
  std::set<std::string> seen;  // yaml-cpp keeps both of a duplicated key
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return Expected(kv.first, path, "a field name");
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) {
      return InvalidArgument(
          path + (path.empty() ? "" : ": ") + "field " + Quote(key) + " is set twice",
          LocOf(kv.first));
    }
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) !=
        allowed.end()) {
      continue;
    }
    std::string hint;
    for (const char* a : allowed) {
      if (EditDistance(key, a) <= 2) hint = " (did you mean '" + std::string(a) + "'?)";
    }
    if (hint.empty()) {
      hint = " (known:";
      for (const char* a : allowed) hint += std::string(" ") + a;
      hint += ")";
    }
    return InvalidArgument(path + ": unknown field " + Quote(key) + hint, LocOf(kv.first));
  }
  return Fields(node, std::move(path));
}

// What every string of a YAML file must be: names, paths and enum values
// end up in messages, tables, logs and JSON.
static constexpr const char* kTextRule = "UTF-8 text without control characters";

Status Fields::Missing(const char* key) const {
  return InvalidArgument(PathOf(key) + ": required field is missing", LocOf(node_));
}

namespace {

// Counts the node events of a document and remembers where it starts.
class Counter : public YAML::EventHandler {
 public:
  int events = 0;
  YAML::Mark start;
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { ++events; }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { ++events; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    ++events;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    ++events;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    ++events;
  }
  void OnMapEnd() override {}
};

}  // namespace

Result<YAML::Node> LoadDocument(std::string_view text, const std::string& kind) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
    if (!doc.IsDefined() || doc.IsNull()) {
      return InvalidArgument("no YAML document here; expected a 'kind: " + kind + "' mapping",
                             {1, 1});
    }
    std::stringstream in{std::string(text)};
    YAML::Parser parser(in);
    for (int docs = 0;; ++docs) {
      Counter counter;
      if (!parser.HandleNextDocument(counter) || counter.events == 0) break;
      if (docs == 1) {
        return InvalidArgument("expected one YAML document, found more",
                               {counter.start.line + 1, counter.start.column + 1});
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument("not valid YAML: " + OneLine(e.msg),
                           {e.mark.line + 1, e.mark.column + 1});
  }
  return doc;
}

bool ParseInt64(const std::string& s, int64_t* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && !s.empty();
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

bool ParseDuration(const std::string& s, Duration* out) {
  static const std::pair<const char*, double> kUnits[] = {
      {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}};
  double scale = 1;
  std::string number = s;
  for (const auto& [suffix, factor] : kUnits) {
    const size_t n = std::strlen(suffix);
    if (s.size() > n && s.compare(s.size() - n, n, suffix) == 0 &&
        (std::isdigit(static_cast<unsigned char>(s[s.size() - n - 1])) ||
         s[s.size() - n - 1] == '.')) {
      number = s.substr(0, s.size() - n);
      scale = factor;
      break;
    }
  }
  double v = 0;
  if (!ParseDouble(number, &v) || v < 0 || v * scale > 9e9) return false;
  *out = Nanoseconds(std::llround(v * scale * 1e9));
  return true;
}

Status Fields::Dur(const char* key, Duration* out, bool required) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return required ? Missing(key) : Status::Ok();
  if (!n.IsScalar() || !ParseDuration(n.Scalar(), out)) {
    return Expected(n, PathOf(key), "a duration like 90s, 5m, 12h or 30d");
  }
  return Status::Ok();
}

Status Fields::String(const char* key, std::string* out, bool required) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return required ? Missing(key) : Status::Ok();
  if (!n.IsScalar() || n.Scalar().empty()) return Expected(n, PathOf(key), "a non-empty string");
  if (FirstBadText(n.Scalar()) != std::string::npos) return Expected(n, PathOf(key), kTextRule);
  *out = n.Scalar();
  return Status::Ok();
}

Status Fields::Int(const char* key, int64_t* out, int64_t min, int64_t max, bool required) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return required ? Missing(key) : Status::Ok();
  int64_t v = 0;
  const std::string range =
      "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (!n.IsScalar() || !ParseInt64(n.Scalar(), &v) || v < min || v > max) {
    return Expected(n, PathOf(key), range);
  }
  *out = v;
  return Status::Ok();
}

Status Fields::Int32(const char* key, int32_t* out, int32_t min, int32_t max, bool required) const {
  int64_t v = *out;
  UNIPOOL_RETURN_IF_ERROR(Int(key, &v, min, max, required));
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

Status Fields::Double(const char* key, double* out, double min, double max, bool required) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return required ? Missing(key) : Status::Ok();
  double v = 0;
  if (!n.IsScalar() || !ParseDouble(n.Scalar(), &v) || v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, "a number from %g to %g", min, max);
    return Expected(n, PathOf(key), range);
  }
  *out = v;
  return Status::Ok();
}

Status Fields::Bool(const char* key, bool* out) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return Status::Ok();
  if (n.IsScalar() && (n.Scalar() == "true" || n.Scalar() == "false")) {
    *out = n.Scalar() == "true";
    return Status::Ok();
  }
  return Expected(n, PathOf(key), "true or false");
}

Status Fields::StringMap(const char* key,
                         std::vector<std::pair<std::string, std::string>>* out) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return Status::Ok();
  if (!n.IsMap()) return Expected(n, PathOf(key), "a mapping of names to values");
  out->clear();
  for (const auto& kv : n) {
    if (!kv.first.IsScalar() || FirstBadText(kv.first.Scalar()) != std::string::npos) {
      return Expected(kv.first, PathOf(key), std::string("a name of ") + kTextRule);
    }
    if (!kv.second.IsScalar()) {
      return Expected(kv.second, PathOf(key) + "." + kv.first.Scalar(), "a plain value");
    }
    if (FirstBadText(kv.second.Scalar()) != std::string::npos) {
      return Expected(kv.second, PathOf(key) + "." + kv.first.Scalar(), kTextRule);
    }
    out->emplace_back(kv.first.Scalar(), kv.second.Scalar());
  }
  std::sort(out->begin(), out->end());
  return Status::Ok();
}

Status Fields::Sequence(const char* key, std::vector<YAML::Node>* out, bool required) const {
  const YAML::Node n = node_[key];
  if (!n.IsDefined()) return required ? Missing(key) : Status::Ok();
  if (!n.IsSequence() || n.size() == 0) return Expected(n, PathOf(key), "a non-empty list");
  out->clear();
  for (const auto& item : n) out->push_back(item);
  return Status::Ok();
}

}  // namespace unipool::io
