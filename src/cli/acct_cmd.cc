// `unipool acct`: accounting, as sacct and sreport give it. The jobs that
// ran, were pending, or ended in a time window (the history included), with
// the GPU-hours each held, how long it ran, how it ended and its restarts;
// then totals by queue and by user. Read from GET /v1/jobs, every page.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "io/resource_tables.h"
#include "io/table.h"
#include "io/text.h"
#include "io/time_format.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

using io::Cell;

struct AcctFlags {
  ClientConfig config;
  std::string since = "1d", until, queue, user, state, output;
  bool totals_only = false;
};

std::string Hours(int64_t gpu_seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(gpu_seconds) / 3600.0);
  return buf;
}

struct Totals {
  int64_t jobs = 0, gpu_seconds = 0, restarts = 0;
  std::map<std::string, int64_t> by_state;
};

// Every job the filters select, newest first.
Result<std::vector<Json>> FetchJobs(const Client& client, const AcctFlags& f) {
  std::vector<Json> out;
  std::optional<int64_t> until;
  if (!f.until.empty()) {
    Result<Time> t = io::ParseTime(f.until);
    if (!t.ok()) {
      return InvalidArgument("--until: expected a time like 2026-12-01T00:00:00.000Z, got '" +
                             f.until + "'");
    }
    until = t->value() / 1000000000;
  }
  std::string next;
  do {
    std::string path = "/v1/jobs?limit=1000&since=" + io::UrlEncode(f.since);
    if (!f.queue.empty()) path += "&queue=" + io::UrlEncode(f.queue);
    if (!f.state.empty()) path += "&state=" + io::UrlEncode(f.state);
    if (!next.empty()) path += "&continue=" + next;
    Result<Json> page = client.Call("GET", path);
    if (!page.ok()) return page.status();
    for (const Json& j : (*page)["items"]) {
      if (!f.user.empty() && j.value("owner", "") != f.user) continue;
      // --until: what had started (or was submitted) by then.
      std::optional<int64_t> at = io::EpochSeconds(j.value("submitted", Json()));
      if (until && at && *at > *until) continue;
      out.push_back(j);
    }
    next = page->value("continue", "");
  } while (!next.empty());
  return out;
}

void Add(Totals& t, const Json& j) {
  ++t.jobs;
  t.gpu_seconds += j.value("gpuSeconds", int64_t{0});
  t.restarts += j.value("restarts", int64_t{0}) + j.value("disruptions", int64_t{0});
  ++t.by_state[j.value("state", "")];
}

std::string TotalsTable(const char* key, const std::map<std::string, Totals>& by,
                        int64_t all_seconds) {
  io::Table t({key, "JOBS", "RUNNING", "PENDING", "SUCCEEDED", "FAILED", "CANCELLED", "GPU-HOURS",
               "SHARE", "RESTARTS"});
  for (const auto& [name, x] : by) {
    auto n = [&](const char* s) {
      auto it = x.by_state.find(s);
      return std::to_string(it == x.by_state.end() ? 0 : it->second);
    };
    char share[16];
    std::snprintf(share, sizeof share, "%.1f%%",
                  all_seconds > 0 ? 100.0 * static_cast<double>(x.gpu_seconds) / all_seconds : 0.0);
    t.Add({name, std::to_string(x.jobs), n("Running"), n("Pending"), n("Succeeded"), n("Failed"),
           n("Cancelled"), Hours(x.gpu_seconds), share, std::to_string(x.restarts)});
  }
  return t.Render();
}

Json TotalsJson(const char* key, const std::map<std::string, Totals>& by) {
  Json out = Json::array();
  for (const auto& [name, x] : by) {
    out.push_back({{key, name},
                   {"jobs", x.jobs},
                   {"gpuSeconds", x.gpu_seconds},
                   {"restarts", x.restarts},
                   {"byState", x.by_state}});
  }
  return out;
}

int RunAcct(AcctFlags& f) {
  if (Status st = ResolveClientConfig(&f.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  Client client(f.config);
  Result<std::vector<Json>> jobs = FetchJobs(client, f);
  if (!jobs.ok()) {
    std::cerr << "error: " << jobs.status().message() << "\n";
    return ExitCodeFor(jobs.status());
  }
  std::map<std::string, Totals> by_queue, by_user;
  int64_t all = 0;
  for (const Json& j : *jobs) {
    Add(by_queue[j.value("queue", "")], j);
    Add(by_user[j.value("owner", "")], j);
    all += j.value("gpuSeconds", int64_t{0});
  }
  if (f.output == "json") {
    Json rows = Json::array();
    for (const Json& j : *jobs) {
      rows.push_back({{"id", j["id"]},
                      {"name", j["name"]},
                      {"queue", j["queue"]},
                      {"owner", j["owner"]},
                      {"state", j["state"]},
                      {"gpus", j["spec"]["gpus"]},
                      {"submitted", j["submitted"]},
                      {"started", j["started"]},
                      {"finished", j["finished"]},
                      {"gpuSeconds", j.value("gpuSeconds", 0)},
                      {"restarts", j["restarts"]},
                      {"disruptions", j["disruptions"]},
                      {"preemptions", j["preemptions"]},
                      {"exitCode", j["exitCode"]},
                      {"exitSignal", j["exitSignal"]}});
    }
    std::cout << Json{{"jobs", rows},
                      {"byQueue", TotalsJson("queue", by_queue)},
                      {"byUser", TotalsJson("user", by_user)},
                      {"gpuSeconds", all}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (!f.totals_only) {
    io::Table t({"ID", "NAME", "QUEUE", "USER", "STATE", "GPUS", "ELAPSED", "GPU-HOURS",
                 "RESTARTS", "EXIT"});
    for (const Json& j : *jobs) {
      t.Add({Cell(j, "id"), io::Clip(Cell(j, "name"), 30), Cell(j, "queue"), Cell(j, "owner"),
             Cell(j, "state"), Cell(j["spec"], "gpus"), io::ElapsedCell(j, now),
             Hours(j.value("gpuSeconds", int64_t{0})),
             std::to_string(j.value("restarts", 0) + j.value("disruptions", 0)), io::ExitCell(j)});
    }
    std::cout << t.Render() << "\n";
  }
  std::cout << "By queue (" << io::Count(static_cast<int64_t>(jobs->size()), "job") << ", "
            << Hours(all) << " GPU-hours, since " << f.since << "):\n"
            << TotalsTable("QUEUE", by_queue, all) << "\nBy user:\n"
            << TotalsTable("USER", by_user, all);
  return kExitOk;
}

}  // namespace

void AddAcctCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<AcctFlags>();
  CLI::App* cmd = AddSubcommand(app, 
      "acct",
      "Accounting, like sacct and sreport: jobs of a window with GPU-hours; totals by queue, user\n"
      "  unipool acct                     the last day\n"
      "  unipool acct --since 30d --totals\n"
      "  unipool acct --since 2026-11-01T00:00:00.000Z --until 2026-12-01T00:00:00.000Z");
  cmd->add_option("--since", f->since,
                  "jobs running, pending or ended since then: a duration before now (7d) or a "
                  "time")
      ->capture_default_str();
  cmd->add_option("--until", f->until, "only jobs submitted by then (a time)");
  cmd->add_option("--queue", f->queue, "jobs of this queue");
  cmd->add_option("--user", f->user, "jobs this token name submitted");
  cmd->add_option("--state", f->state, "jobs in this state");
  cmd->add_flag("--totals", f->totals_only, "the totals only (sreport)");
  cmd->add_option("-o,--output", f->output, "json")->check(CLI::IsMember({"json"}));
  cmd->add_option("--server", f->config.server, "server URL (else $UNIPOOL_SERVER)");
  cmd->add_option("--token", f->config.token, "bearer token (else $UNIPOOL_TOKEN)");
  cmd->callback([f, &exit_code] { exit_code = RunAcct(*f); });
}

}  // namespace unipool::cli
