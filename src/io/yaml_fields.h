// Strict, typed access to a YAML mapping for the readers in io/. Every
// error names the field's path ("spec.tiers[1].fanout") and its place in the
// file, and says what was expected. Unknown keys are errors, with a
// suggestion when a known key is close.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/base/units.h"

namespace unipool::io {

SourceLoc LocOf(const YAML::Node& node);

// "expected <what>" error at `node`, naming `path`.
Status Expected(const YAML::Node& node, const std::string& path, const std::string& what);

class Fields {
 public:
  // Checks that `node` is a mapping whose keys all appear in `allowed`.
  static Result<Fields> Of(const YAML::Node& node, std::string path,
                           std::initializer_list<const char*> allowed);

  const std::string& path() const { return path_; }
  SourceLoc loc() const { return LocOf(node_); }
  bool Has(const char* key) const { return node_[key].IsDefined(); }
  YAML::Node Get(const char* key) const { return node_[key]; }
  std::string PathOf(const char* key) const { return path_ + "." + key; }

  // Each reader leaves *out untouched when the key is absent and not required.
  // Strings (and StringMap's keys and values) must be UTF-8 text without
  // control characters (io/text.h): they end up in messages, logs and JSON.
  Status String(const char* key, std::string* out, bool required = false) const;
  Status Int(const char* key, int64_t* out, int64_t min, int64_t max,
             bool required = false) const;
  Status Int32(const char* key, int32_t* out, int32_t min, int32_t max,
               bool required = false) const;
  Status Double(const char* key, double* out, double min, double max,
                bool required = false) const;
  Status Bool(const char* key, bool* out) const;
  // A duration: "90s", "5m", "12h", "30d", "250ms", or a number of seconds.
  Status Dur(const char* key, Duration* out, bool required = false) const;
  // A mapping of strings to strings, sorted by key.
  Status StringMap(const char* key, std::vector<std::pair<std::string, std::string>>* out) const;
  // A sequence; *out gets its elements. Absent = empty unless required.
  Status Sequence(const char* key, std::vector<YAML::Node>* out, bool required = false) const;

 private:
  Fields(YAML::Node node, std::string path) : node_(std::move(node)), path_(std::move(path)) {}
  Status Missing(const char* key) const;

  YAML::Node node_;
  std::string path_;
};

// Parses text that must hold one YAML document with a mapping of `kind`
// ("Cluster", "Model", ...). Errors carry line and column. Safe against
// yaml-cpp 0.7's endless LoadAll on stray flow tokens (a lone ','): the
// documents are counted with the event parser, stopping at an empty one.
Result<YAML::Node> LoadDocument(std::string_view text, const std::string& kind);

// Scalar conversions shared by the readers.
bool ParseInt64(const std::string& s, int64_t* out);
bool ParseDouble(const std::string& s, double* out);
bool ParseDuration(const std::string& s, Duration* out);

}  // namespace unipool::io
