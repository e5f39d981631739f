#include "server/log.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "io/time_format.h"

namespace unipool::server {
namespace {

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

}  // namespace

bool ParseLogLevel(const std::string& s, LogLevel* out) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (s == LevelName(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

void Logger::Log(LogLevel level, const char* component, const std::string& msg,
                 std::initializer_list<LogField> fields) {
  if (level < level_) return;
  nlohmann::ordered_json j;
  j["ts"] = io::FormatTime(io::WallClock());
  j["level"] = LevelName(level);
  j["component"] = component;
  j["msg"] = msg;
  for (const auto& [key, value] : fields) {
    const char* k = key;  // clang 14 cannot capture a structured binding
    std::visit([&](const auto& v) { j[k] = v; }, value);
  }
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace unipool::server
