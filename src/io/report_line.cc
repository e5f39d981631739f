#include "io/report_line.h"

#include <cmath>
#include <limits>
#include <string>

namespace unipool::io {
namespace {

// The line with bare NaN / Infinity / -Infinity outside strings quoted.
std::string QuoteNonFinite(std::string_view line) {
  std::string out;
  out.reserve(line.size() + 8);
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) {
        out += line[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool quoted = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (line.substr(i, token.size()) == token) {
        out += '"';
        out += token;
        out += '"';
        i += token.size() - 1;
        quoted = true;
        break;
      }
    }
    if (!quoted) out += c;
  }
  return out;
}

}  // namespace

nlohmann::json ParseReportLine(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() && (line.find("NaN") != std::string_view::npos ||
                           line.find("Infinity") != std::string_view::npos)) {
    j = nlohmann::json::parse(QuoteNonFinite(line), nullptr, false);
  }
  if (!j.is_object()) return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

std::optional<double> ReportNumber(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

std::optional<train::RankSample> RankSignals(const nlohmann::json& line, int32_t rank) {
  if (!line.is_object() || !line.contains("stepSeconds") || !line.contains("step")) {
    return std::nullopt;
  }
  const nlohmann::json& step = line["step"];
  if (!step.is_number_integer() || step.get<int64_t>() < 0) return std::nullopt;
  auto seconds = [&](const char* key) -> std::optional<double> {
    if (!line.contains(key)) return 0.0;
    const nlohmann::json& v = line[key];
    if (!v.is_number()) return std::nullopt;
    const double s = v.get<double>();
    if (!std::isfinite(s) || s < 0 || s > 86400) return std::nullopt;
    return s;
  };
  const std::optional<double> step_s = seconds("stepSeconds"), data_s = seconds("dataSeconds"),
                              comm_s = seconds("commSeconds");
  if (!step_s || !data_s || !comm_s || *data_s > *step_s || *comm_s > *step_s) return std::nullopt;
  train::RankSample s;
  s.rank = rank;
  if (line.contains("rank") && line["rank"].is_number_integer()) {
    const int64_t r = line["rank"].get<int64_t>();
    if (r < 0 || r > (1 << 24)) return std::nullopt;
    s.rank = static_cast<int32_t>(r);
  }
  s.step = step.get<int64_t>();
  s.steps = 1;
  s.step_time = Duration(static_cast<int64_t>(*step_s * 1e9));
  s.data_time = Duration(static_cast<int64_t>(*data_s * 1e9));
  s.comm_time = Duration(static_cast<int64_t>(*comm_s * 1e9));
  return s;
}

}  // namespace unipool::io
