#include "io/trace_reader.h"

#include <cmath>

#include "io/cluster_reader.h"
#include "io/quote.h"
#include "io/yaml_fields.h"

namespace unipool::io {
namespace {

// Times in nanoseconds stay far from int64's end (ParseDuration's bound).
constexpr double kMaxSeconds = 9e9;
constexpr int64_t kMaxGpus = int64_t{1} << 24;

// Splits one CSV line; handles double-quoted fields with "" escapes.
bool SplitCsv(std::string_view line, std::vector<std::string>* out) {
  out->clear();
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out->push_back(std::move(field));
      field.clear();
    } else {
      field += c;
    }
  }
  out->push_back(std::move(field));
  return !quoted;
}

Status LineError(int64_t line, const std::string& what) {
  return InvalidArgument("line " + std::to_string(line) + ": " + what, {static_cast<int>(line), 1});
}

}  // namespace

Result<Trace> ParseTrace(std::string_view text, const TraceOptions& opt) {
  if (opt.queue_from != "queue" && opt.queue_from != "user" && opt.queue_from != "none") {
    return InvalidArgument("queue mapping must be queue, user or none, not '" + opt.queue_from + "'");
  }
  Trace trace;
  std::map<std::string, int32_t> queue_index;
  std::vector<std::string> cells;
  std::vector<std::string> header;
  int64_t line_no = 0;
  size_t pos = 0;
  int col_id = -1, col_submit = -1, col_gpus = -1, col_duration = -1, col_user = -1,
      col_queue = -1, col_priority = -1;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (!SplitCsv(line, &cells)) return LineError(line_no, "unterminated quote");
    if (header.empty()) {
      header = cells;
      for (int i = 0; i < static_cast<int>(header.size()); ++i) {
        const std::string& h = header[i];
        if (h == "job_id") col_id = i;
        if (h == "submit_time_s") col_submit = i;
        if (h == "num_gpus") col_gpus = i;
        if (h == "duration_s") col_duration = i;
        if (h == "user") col_user = i;
        if (h == "queue") col_queue = i;
        if (h == "priority") col_priority = i;
      }
      if (col_id < 0 || col_submit < 0 || col_gpus < 0 || col_duration < 0) {
        return LineError(line_no, "header must name job_id, submit_time_s, num_gpus and duration_s");
      }
      continue;
    }
    if (cells.size() != header.size()) {
      return LineError(line_no, "expected " + std::to_string(header.size()) + " fields, found " +
                                    std::to_string(cells.size()));
    }
    trace.rows++;
    double submit = 0, duration = 0;
    int64_t gpus = 0;
    if (!ParseDouble(cells[col_submit], &submit) || submit < 0 || submit > kMaxSeconds) {
      return LineError(line_no, "submit_time_s: expected seconds from 0 to 9000000000, got " +
                                    Quote(cells[col_submit]));
    }
    if (!ParseInt64(cells[col_gpus], &gpus) || gpus < 0 || gpus > kMaxGpus) {
      return LineError(line_no, "num_gpus: expected a whole number from 0 to 16777216, got " +
                                    Quote(cells[col_gpus]));
    }
    if (gpus == 0) {
      trace.skipped_cpu_only++;
      continue;
    }
    if (cells[col_duration].empty()) {
      trace.skipped_no_duration++;
      continue;
    }
    if (!ParseDouble(cells[col_duration], &duration) || duration < 0 || duration > kMaxSeconds) {
      return LineError(line_no, "duration_s: expected seconds from 0 to 9000000000, got " +
                                    Quote(cells[col_duration]));
    }
    std::string queue = opt.default_queue;
    if (opt.queue_from == "queue" && col_queue >= 0 && !cells[col_queue].empty()) queue = cells[col_queue];
    if (opt.queue_from == "user" && col_user >= 0 && !cells[col_user].empty()) queue = cells[col_user];
    auto [it, fresh] = queue_index.emplace(queue, static_cast<int32_t>(trace.queues.size()));
    if (fresh) trace.queues.push_back(queue);
    sim::SimJob j;
    j.id = static_cast<int64_t>(trace.jobs.size()) + 1;
    j.name = cells[col_id];
    j.submit = Nanoseconds(std::llround(submit * 1e9));
    j.gpus = Gpus(gpus);
    // A zero-length job still occupies its GPUs for a moment.
    j.work = Nanoseconds(std::max<int64_t>(1, std::llround(duration * 1e9)));
    j.queue = it->second;
    int64_t priority = 0;
    if (col_priority >= 0 && ParseInt64(cells[col_priority], &priority)) {
      j.priority = static_cast<int32_t>(priority);
    }
    j.checkpoint = opt.checkpoint;
    j.checkpoint_interval = opt.checkpoint_interval;
    j.checkpoint_cost = opt.checkpoint_cost;
    j.restart_cost = opt.restart_cost;
    if (opt.estimates) j.runtime_estimate = j.work + j.restart_cost;
    trace.gpu_hours += duration * static_cast<double>(gpus) / 3600;
    trace.jobs.push_back(std::move(j));
  }
  if (header.empty()) return LineError(1, "empty trace: expected a header line");
  return trace;
}

Result<Trace> ReadTrace(const std::string& path, const TraceOptions& options) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  Result<Trace> t = ParseTrace(*text, options);
  if (!t.ok()) {
    const Status& s = t.status();
    return InvalidArgument(s.loc().known() ? path + ":" + std::to_string(s.loc().line) + ": " +
                                                s.message().substr(s.message().find(": ") + 2)
                                          : path + ": " + s.message());
  }
  return t;
}

}  // namespace unipool::io
