// Logger: structured logs, one JSON object per line:
//   {"ts":"2026-11-29T15:04:05.123Z","level":"info","component":"sched",
//    "msg":"job started","job":42,"nodes":2}
// Lines below the level are dropped. Thread safety: Log may be called from
// any thread; each line is written whole.
#pragma once

#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <variant>

namespace unipool::server {

enum class LogLevel { kDebug, kInfo, kWarn, kError };
bool ParseLogLevel(const std::string& s, LogLevel* out);

using LogValue = std::variant<int64_t, std::string>;
using LogField = std::pair<const char*, LogValue>;

class Logger {
 public:
  explicit Logger(FILE* out = stderr, LogLevel level = LogLevel::kInfo)
      : out_(out), level_(level) {}
  void set_level(LogLevel level) { level_ = level; }

  void Log(LogLevel level, const char* component, const std::string& msg,
           std::initializer_list<LogField> fields = {});
  void Info(const char* component, const std::string& msg,
            std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kInfo, component, msg, fields);
  }
  void Warn(const char* component, const std::string& msg,
            std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kWarn, component, msg, fields);
  }
  void Error(const char* component, const std::string& msg,
             std::initializer_list<LogField> fields = {}) {
    Log(LogLevel::kError, component, msg, fields);
  }

 private:
  FILE* out_;
  LogLevel level_;
  std::mutex mu_;
};

}  // namespace unipool::server
