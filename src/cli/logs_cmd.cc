// `unipool logs`: a job's output, read through the server from the agents
// of its nodes (GET /v1/jobs/{id}/logs). One rank, or every rank with a
// prefix (srun --label, kubectl logs --prefix); the last lines (--tail),
// the lines since a time (--since), the run before the current one
// (--previous, after a restart), and -f that follows the job across its
// restarts until it ends.
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/client.h"
#include "cli/commands.h"
#include "io/text.h"
#include "io/yaml_fields.h"
#include "server/records.h"

namespace unipool::cli {
namespace {

struct LogsFlags {
  ClientConfig config;
  std::string job;
  int rank = 0;
  bool all_ranks = false;
  bool follow = false;
  bool previous = false;
  int64_t tail = -1;  // -1: all
  std::string since;
};

// The ranks to read: `--rank`, or with --all-ranks one per process of the
// job's run (every GPU's rank with launch per-gpu, else each task's first:
// the ranks of a task share its one process's log).
std::vector<int> RanksOf(const Json& job, const LogsFlags& f) {
  if (!f.all_ranks) return {f.rank};
  const Json& spec = job.value("spec", Json::object());
  Json tasks = job.value("tasks", Json::array());
  if (tasks.empty() && job.value("previousRun", Json()).is_object()) {
    tasks = job["previousRun"].value("tasks", Json::array());
  }
  const int per_node_share = spec.value("gpusPerNode", 0);
  const bool per_gpu = spec.value("launch", "") == "per-gpu";
  std::vector<int> ranks;
  int first = 0;
  for (const Json& t : tasks) {
    const int n = per_node_share > 0 && spec.value("exclusive", false)
                      ? per_node_share
                      : static_cast<int>(t.value("gpus", Json::array()).size());
    for (int r = first; r < first + n && (per_gpu || r == first); ++r) ranks.push_back(r);
    first += n;
  }
  if (ranks.empty()) ranks.push_back(0);  // not run yet: the server says so
  return ranks;
}

// What --since keeps: lines stamped at or after `from` (seconds since the
// epoch; 0 keeps all). Each line starts with the time its agent read it.
bool Keep(const std::string& line, int64_t from) {
  if (from == 0) return true;
  const size_t space = line.find(' ');
  Result<Time> at = server::ParseTime(line.substr(0, space));
  return !at.ok() || at->value() / 1000000000 >= from;
}

// Reads one rank's log on from `offset`, a line at a time.
class RankLog {
 public:
  RankLog(int rank, std::string prefix) : rank_(rank), prefix_(std::move(prefix)) {}

  // Reads what is new; complete lines go to `lines`. Returns the run
  // (generation) the server read, 0 on an error (kept in *error).
  int64_t Read(const Client& client, const LogsFlags& f, std::vector<std::string>& lines,
               Status* error) {
    std::map<std::string, std::string> headers;
    Result<Json> text = client.Call(
        "GET",
        "/v1/jobs/" + f.job + "/logs?rank=" + std::to_string(rank_) +
            "&offset=" + std::to_string(offset_) + (f.previous ? "&previous=true" : ""),
        "", "application/json", 30, &headers);
    if (!text.ok() || !text->is_string()) {
      *error = text.ok() ? Status(StatusCode::kInternal, "not a log") : text.status();
      return 0;
    }
    int64_t generation = 0;
    io::ParseInt64(headers["X-Unipool-Generation"], &generation);
    if (generation != generation_) {  // a new run: its log starts over
      if (generation_ != 0 && offset_ > 0) {
        generation_ = generation;
        offset_ = 0;
        partial_.clear();
        return Read(client, f, lines, error);
      }
      generation_ = generation;
    }
    const std::string s = text->get<std::string>();
    int64_t next = 0;  // past what was read, or past what rotated away
    offset_ = io::ParseInt64(headers["X-Unipool-Offset"], &next) && next >= offset_
                  ? next
                  : offset_ + static_cast<int64_t>(s.size());
    partial_ += s;
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
      lines.push_back(prefix_ + partial_.substr(start, nl - start));
    }
    partial_.erase(0, start);
    more_ = !s.empty();
    return generation_;
  }
  // The last chunk was not empty: more may follow at once.
  bool more() const { return more_; }
  // A last line without its newline (the run ended in the middle of one).
  std::string Rest() {
    std::string r = partial_.empty() ? "" : prefix_ + partial_;
    partial_.clear();
    return r;
  }

 private:
  int rank_;
  std::string prefix_;
  int64_t offset_ = 0, generation_ = 0;
  std::string partial_;
  bool more_ = false;
};

int RunLogs(LogsFlags& f) {
  if (Status st = ResolveClientConfig(&f.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  int64_t from = 0;
  if (!f.since.empty()) {
    Duration ago;
    if (!io::ParseDuration(f.since, &ago) || ago.value() <= 0) {
      std::cerr << "error: --since: expected a duration like 10m or 2h, got '" << f.since << "'\n";
      return kExitBadInput;
    }
    from = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count() -
           ago.value() / 1000000000;
  }
  Client client(f.config);
  Result<Json> job = client.Call("GET", "/v1/jobs/" + f.job);
  if (!job.ok()) {
    std::cerr << "error: " << job.status().message() << "\n";
    return ExitCodeFor(job.status());
  }
  std::map<int, RankLog> logs;  // by rank
  // Ranks of the job's run not read yet (with --all-ranks the run's tasks
  // decide, and a job that was pending has none until it starts).
  auto add_ranks = [&](const Json& j) {
    bool added = false;
    for (int r : RanksOf(j, f)) {
      added |= logs.try_emplace(r, r, f.all_ranks ? "[rank " + std::to_string(r) + "] " : "")
                   .second;
    }
    return added;
  };
  add_ranks(*job);
  int64_t run = 0;
  for (bool first = true;; first = false) {
    std::vector<std::string> lines;
    bool more = false, failed = false;
    for (auto& [rank, log] : logs) {
      std::vector<std::string> mine;
      Status error;
      const int64_t generation = log.Read(client, f, mine, &error);
      if (generation == 0) {
        if (!f.follow) {
          std::cerr << "error: " << error.message() << "\n";
          return ExitCodeFor(error);
        }
        failed = true;  // an agent restarting, a run not started yet: retried
        continue;
      }
      if (run != 0 && generation != run) std::cerr << "--- run " << generation << " ---\n";
      run = generation;
      // --tail: of what there is at first, each rank's last N lines.
      if (first && f.tail >= 0) {
        while (log.more()) log.Read(client, f, mine, &error);
        if (static_cast<int64_t>(mine.size()) > f.tail) {
          mine.erase(mine.begin(), mine.end() - f.tail);
        }
      }
      for (std::string& l : mine) {
        if (Keep(f.all_ranks ? l.substr(l.find("] ") + 2) : l, from)) lines.push_back(l);
      }
      more = more || log.more();
    }
    for (const std::string& l : lines) std::cout << l << "\n";
    std::cout << std::flush;
    if (more) continue;  // the whole log (it comes in chunks of 1 MiB at most)
    // Ended (not to be restarted) and read: done. Else, following, wait.
    job = client.Call("GET", "/v1/jobs/" + f.job);
    if (job.ok() && add_ranks(*job)) continue;  // read the new ranks first
    const std::string state = job.ok() ? job->value("state", "") : "";
    const bool ended = state == "Succeeded" || state == "Failed" || state == "Cancelled";
    if (!f.follow || (ended && !failed)) {
      for (auto& [rank, log] : logs) {
        if (std::string rest = log.Rest(); !rest.empty()) std::cout << rest << "\n";
      }
      return kExitOk;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

void AddLogsCommand(CLI::App& app, int& exit_code) {
  auto l = std::make_shared<LogsFlags>();
  CLI::App* cmd = AddSubcommand(app, 
      "logs",
      "Print a job's output, read from its nodes' agents.\n"
      "  unipool logs 12                   rank 0 of the current (or last) run\n"
      "  unipool logs 12 --all-ranks -f    every rank, prefixed, following restarts\n"
      "  unipool logs 12 --previous --tail 50   the end of the run before a restart");
  cmd->add_option("JOB", l->job, "job id")->required();
  cmd->add_option("--rank", l->rank, "global rank")->capture_default_str();
  cmd->add_flag("--all-ranks", l->all_ranks,
                "every rank's log, each line prefixed with [rank N] (one per process)");
  cmd->add_option("--tail", l->tail, "only the last N lines (of each rank) there are now")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--since", l->since, "only lines written in the last DURATION (10m, 2h)");
  cmd->add_flag("-p,--previous", l->previous,
                "the run before the current one (the crashed run after a restart)");
  cmd->add_flag("-f,--follow", l->follow,
                "keep printing until the job ends, across its restarts");
  cmd->add_option("--server", l->config.server, "server URL (else $UNIPOOL_SERVER)");
  cmd->add_option("--token", l->config.token, "bearer token (else $UNIPOOL_TOKEN)");
  cmd->callback([l, &exit_code] { exit_code = RunLogs(*l); });
}

}  // namespace unipool::cli
