#include "server/log.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

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

std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
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
  j["ts"] = Timestamp();
  j["level"] = LevelName(level);
  j["component"] = component;
  j["msg"] = msg;
  for (const auto& [key, value] : fields) {
    std::visit([&](const auto& v) { j[key] = v; }, value);
  }
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace unipool::server
