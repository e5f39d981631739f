// Agent, what a run's processes report: their report files read and
// forwarded (progress, checkpoints with their measured size), and each
// rank's step signals, summed and sent once a second with its resident
// memory (docs/cli.md).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "agent/agent_internal.h"
#include "agent/checkpoint_size.h"
#include "agent/steady_clock.h"
#include "io/proc_stat.h"
#include "io/report_line.h"

namespace unipool::agent {
namespace fs = std::filesystem;

// A checkpoint report as forwarded: the job's own object, with its size
// measured on disk when the job did not give one (CheckpointBytes: the
// files under its path, inside the job's checkpoint directory, written
// since the previous checkpoint).
Json Agent::MeasuredCheckpoint(const Json& reported, LocalRun& run) {
  Json c = reported.is_object() ? reported : Json::object();
  const auto now = std::filesystem::file_time_type::clock::now();
  if (!c.contains("bytes") && c.contains("path") && c["path"].is_string()) {
    if (std::optional<int64_t> bytes = CheckpointBytes(
            c["path"].get<std::string>(), run.place.checkpoint_dir, run.checkpoint_since)) {
      c["bytes"] = *bytes;
    }
  }
  run.checkpoint_since = now;
  return c;
}

// Reads new lines of the run's report files; forwards progress (at most
// once a second), rank 0's checkpoints, and every rank's step signals
// (their means since the last send, once a second).
void Agent::ForwardReports(int64_t job, LocalRun& run) {
  for (ReportFile& file : run.reports) {
    std::ifstream in(file.path);
    if (!in) continue;
    in.seekg(file.offset);
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a partial line: read it next time
      file.offset += static_cast<int64_t>(line.size()) + 1;
      const Json j = io::ParseReportLine(line);
      if (!j.is_object()) continue;
      if (j.contains("checkpoint")) {
        const Json& c = j["checkpoint"];
        const int64_t step = c.is_object() && c.contains("step") && c["step"].is_number_integer()
                                 ? c["step"].get<int64_t>()
                                 : -1;
        if (file.path == run.report0 && step != run.last_checkpoint_step) {
          run.last_checkpoint_step = step;
          Report(job, run.generation, "checkpoint", "step " + std::to_string(step),
                 MeasuredCheckpoint(c, run));
        }
        continue;
      }
      AddSignals(file, j);
      if (file.path == run.report0 || run.report0.empty()) {
        run.progress = j;
        run.last_progress = j;
        if (j.contains("step") && j["step"].is_number_integer() &&
            j["step"].get<int64_t>() > run.last_step) {
          run.last_step = j["step"].get<int64_t>();
          run.advanced_ms = SteadyMs();
        }
        const std::optional<double> loss =
            j.contains("loss") ? io::ReportNumber(j["loss"]) : std::nullopt;
        if (loss && !std::isfinite(*loss) && !run.nonfinite_sent) {
          run.nonfinite_sent = true;
          Report(job, run.generation, "progress", "", j);
          run.progress = Json();
          run.progress_sent_ms = SteadyMs();
        }
      }
    }
  }
  if (run.progress.is_object() && SteadyMs() - run.progress_sent_ms >= 1000) {
    Report(job, run.generation, "progress", "", run.progress);
    run.progress = Json();
    run.progress_sent_ms = SteadyMs();
  }
  if (SteadyMs() - run.signals_sent_ms >= 1000) SendSignals(job, run);
}

// A line's step signals add to its rank's sums (a line for a step already
// counted is ignored: a process restarted within the run).
void Agent::AddSignals(ReportFile& file, const Json& line) {
  const std::optional<train::RankSample> s = io::RankSignals(line, file.rank);
  if (!s || s->step <= file.step) return;
  file.rank = s->rank;
  file.step = s->step;
  file.steps += 1;
  file.step_s += s->step_time.value() / 1e9;
  file.data_s += s->data_time.value() / 1e9;
  file.comm_s += s->comm_time.value() / 1e9;
}

// One "signals" report: each rank's mean step, data and communication
// time over the steps since the last one, and its process tree's resident
// memory at the run's step (the rank's own, else rank 0's).
void Agent::SendSignals(int64_t job, LocalRun& run) {
  const std::map<int64_t, io::ProcMemory>& procs = Processes();
  const int64_t page = sysconf(_SC_PAGESIZE);
  Json ranks = Json::array();
  for (ReportFile& f : run.reports) {
    Json r = {{"rank", f.rank}, {"node", options_.node}};
    const int64_t step = f.step >= 0 ? f.step : run.last_step;
    if (step >= 0) r["step"] = step;
    const int64_t rss = f.pid > 0 ? io::TreeRssPages(procs, f.pid) * page : 0;
    if (rss > 0 && step >= 0) r["rssBytes"] = rss;
    if (f.steps > 0) {
      r["steps"] = f.steps;
      r["stepSeconds"] = f.step_s / f.steps;
      r["dataSeconds"] = f.data_s / f.steps;
      r["commSeconds"] = f.comm_s / f.steps;
    }
    f.steps = 0;
    f.step_s = f.data_s = f.comm_s = 0;
    if (r.contains("rssBytes") || r.contains("stepSeconds")) ranks.push_back(std::move(r));
  }
  run.signals_sent_ms = SteadyMs();
  if (!ranks.empty()) Report(job, run.generation, "signals", "", Json{{"ranks", ranks}});
}

const std::map<int64_t, io::ProcMemory>& Agent::Processes() {
  const int64_t now = SteadyMs();
  if (processes_read_ms_ < 0 || now - processes_read_ms_ >= 1000) {
    processes_ = io::ReadProcMemory();
    processes_read_ms_ = now;
  }
  return processes_;
}

}  // namespace unipool::agent
