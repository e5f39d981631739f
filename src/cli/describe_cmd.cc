// `unipool describe`: one job (its fields, placement, events), node or
// queue in full, as kubectl describe and scontrol show give them.
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/client_common.h"
#include "io/resource_tables.h"
#include "io/suggest.h"
#include "io/table.h"
#include "io/text.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

using io::Cell;
using io::Clip;
using io::DidYouMean;
using io::ElapsedCell;
using io::ExitCell;

// ---- describe ----------------------------------------------------------------

struct DescribeFlags {
  Common c;
  std::string what, name;
};

// "12.34 kWh (IT), drawing 7.80 kW now (model)": the energy its runs drew
// and, while it runs, its power and where that figure comes from.
std::string EnergyCell(const Json& j) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.2f kWh (IT)", j.value("energyJoules", 0.0) / 3.6e6);
  std::string out = buf;
  if (j.contains("powerWatts")) {
    std::snprintf(buf, sizeof buf, ", drawing %.2f kW now (%s)", j.value("powerWatts", 0.0) / 1e3,
                  j.value("powerSource", "").c_str());
    out += buf;
  }
  return out;
}

void Field(const std::string& key, const std::string& value) {
  std::cout << key << ":" << std::string(key.size() < 16 ? 16 - key.size() : 1, ' ') << value
            << "\n";
}

// The events as rows, a run of Checkpointed events folded into one
// ("checkpointed 20 times (last: step 200)", at the last one's time).
// Messages are shown whole: a table row may be long, but never misleads.
std::vector<std::vector<std::string>> EventRows(const Json& events) {
  std::vector<std::vector<std::string>> rows;
  int64_t run = 0;  // Checkpointed events folded into the last row
  for (const Json& e : events) {
    const std::string type = Cell(e, "type");
    if (type == "Checkpointed" && run > 0) {
      ++run;
      std::string last = Cell(e, "message");
      if (last.starts_with("checkpoint written: ")) last = last.substr(20);
      rows.back() = {"  " + Cell(e, "time"), type,
                     "checkpointed " + std::to_string(run) + " times (last: " + last + ")"};
      continue;
    }
    run = type == "Checkpointed" ? 1 : 0;
    rows.push_back({"  " + Cell(e, "time"), type, Cell(e, "message")});
  }
  return rows;
}

// "12.3" (one decimal under 100, none above).
std::string Decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 100 ? "%.1f" : "%.0f", v);
  return buf;
}

std::string SizeCell(double bytes) {
  static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000 && u < 5) bytes /= 1000, ++u;
  return (u == 0 ? std::to_string(static_cast<int64_t>(bytes)) : Decimal(bytes)) + " " + kUnits[u];
}

// "; last measured 4.2 s, 1.3 GB; saves when stopped": what the runs measured.
std::string CheckpointCostCell(const Json& j) {
  const double seconds = j.value("checkpointSeconds", 0.0);
  const double bytes = static_cast<double>(j.value("checkpointBytes", int64_t{0}));
  std::string out;
  if (seconds > 0 || bytes > 0) {
    out = "; last measured ";
    if (seconds > 0) out += Decimal(seconds) + " s";
    if (bytes > 0) out += std::string(seconds > 0 ? ", " : "") + SizeCell(bytes);
  }
  if (j.value("savesOnStop", false)) out += "; saves when stopped";
  return out;
}

int DescribeJob(const Client& client, const DescribeFlags& f) {
  Result<Json> r = client.Call("GET", "/v1/jobs/" + io::UrlEncode(f.name));
  if (!r.ok()) return Fail(r.status());
  Result<Json> ev = client.Call("GET", "/v1/jobs/" + io::UrlEncode(f.name) + "/events");
  if (!ev.ok()) return Fail(ev.status());
  if (!f.c.output.empty() && f.c.output != "wide") {
    (*r)["eventList"] = (*ev)["items"];
    Print(*r, f.c.output);
    return kExitOk;
  }
  const Json& j = *r;
  const Json& spec = j["spec"];
  Field("ID", Cell(j, "id"));
  Field("Name", Cell(j, "name"));
  Field("Queue", Cell(j, "queue"));
  Field("Owner", Cell(j, "owner"));
  Field("State", Cell(j, "state"));
  std::string shape;
  if (spec.value("gpusPerNode", 0) > 0) {
    shape = " (" +
            io::Count(spec["gpus"].get<int64_t>() / spec["gpusPerNode"].get<int64_t>(), "node") +
            " x " + Cell(spec, "gpusPerNode") + ")";
  } else if (spec.value("gpusPerTask", 0) > 0) {
    shape = " (tasks of " + Cell(spec, "gpusPerTask") + ")";
  }
  if (spec.value("exclusive", false)) shape += ", exclusive nodes";
  if (spec.value("placement", "") == "spread") shape += ", spread";
  Field("GPUs", Cell(spec, "gpus") + shape);
  Field("Priority", spec.value("priorityClass", "").empty() ? Cell(spec, "priority")
                                                            : Cell(spec, "priorityClass"));
  Field("Preemptible", Cell(spec, "preemptible"));
  Field("Command", Clip(spec.value("command", Json::array()).dump(), 200));
  Field("Submitted", Cell(j, "submitted"));
  Field("Started", Cell(j, "started"));
  Field("Finished", Cell(j, "finished"));
  Field("Checkpoint", j.value("checkpoints", 0) == 0
                          ? std::string("none")
                          : Cell(j, "lastCheckpoint") +
                                (j.value("checkpointNote", "").empty()
                                     ? ""
                                     : " (" + j.value("checkpointNote", "") + ")") +
                                ", " + io::Count(j.value("checkpoints", 0), "checkpoint") +
                                " written" + CheckpointCostCell(j));
  if (j.value("startupSeconds", 0.0) > 0) {
    Field("Start-up", Decimal(j.value("startupSeconds", 0.0)) +
                          " s, from the last run's start to its first progress report");
  }
  if (j.value("state", "") == "Pending" && j.contains("reason")) {
    Field("Reason", Cell(j, "reason") + (j.contains("estimatedStart")
                                             ? ", expected to start at " + Cell(j, "estimatedStart")
                                             : ""));
  }
  Field("Elapsed", ElapsedCell(j, NowSeconds()));
  Field("Exit code", ExitCell(j));
  Field("Restarts", Cell(j, "restarts") + " (max " + Cell(spec["restart"], "maxRestarts") + ")");
  Field("Disruptions", Cell(j, "disruptions") + " (nodes lost; not counted against maxRestarts)");
  Field("Preemptions", Cell(j, "preemptions"));
  Field("Lost work", Cell(j, "lostGpuSeconds") + " GPU-seconds");
  Field("Energy", EnergyCell(j));
  Field("Why", Cell(j, "explain"));
  if (j["progress"].is_object()) {
    std::string p;
    for (const auto& [k, v] : j["progress"].items())
      p += (p.empty() ? "" : "  ") + k + " " + v.dump();
    Field("Progress", p);
  }
  if (!j["tasks"].empty()) {
    std::cout << "Placement:\n";
    io::Table t({"  RANK", "NODE", "GPUS"});
    int rank = 0;
    for (const Json& task : j["tasks"]) {
      std::string gpus;
      for (const Json& g : task["gpus"]) gpus += (gpus.empty() ? "" : ",") + g.dump();
      t.Add({"  " + std::to_string(rank++), task.value("node", ""), gpus});
    }
    std::cout << t.Render();
  }
  std::cout << "Events:\n";
  io::Table t({"  TIME", "TYPE", "MESSAGE"});
  for (const std::vector<std::string>& row : EventRows((*ev)["items"])) t.Add(row);
  std::cout << t.Render();
  return kExitOk;
}

int DescribeNode(const Client& client, const DescribeFlags& f) {
  Result<Json> r = client.Call("GET", "/v1/nodes/" + io::UrlEncode(f.name));
  if (!r.ok()) return Fail(r.status());
  if (!f.c.output.empty() && f.c.output != "wide") {
    Print(*r, f.c.output);
    return kExitOk;
  }
  const Json& n = *r;
  Field("Name", Cell(n, "name"));
  Field("State", Cell(n, "state"));
  Field("GPUs", Cell(n, "gpus") + " (" + Cell(n, "gpusAllocated") + " allocated, " +
                    Cell(n, "gpusFree") + " free)");
  for (const char* k : {"gpuModel", "partition", "admin", "why", "registered", "alive", "health",
                        "lastHeartbeat"}) {
    std::string key = k;
    key[0] = static_cast<char>(std::toupper(key[0]));
    Field(key, Cell(n, k));
  }
  if (n.value("jobs", Json::array()).empty()) {
    Field("Jobs", "none");
    return kExitOk;
  }
  std::cout << "Jobs:\n";
  io::Table t({"  ID", "NAME", "QUEUE", "STATE", "GPUS HERE"});
  for (const Json& id : n["jobs"]) {
    Result<Json> j = client.Call("GET", "/v1/jobs/" + id.dump());
    if (!j.ok()) continue;  // ended meanwhile
    size_t here = 0;
    for (const Json& task : j->value("tasks", Json::array())) {
      if (task.value("node", "") == f.name) here += task.value("gpus", Json::array()).size();
    }
    t.Add({"  " + id.dump(), Cell(*j, "name"), Cell(*j, "queue"), Cell(*j, "state"),
           std::to_string(here)});
  }
  std::cout << t.Render();
  return kExitOk;
}

int DescribeQueue(const Client& client, const DescribeFlags& f) {
  Result<Json> r = client.Call("GET", "/v1/queues/" + io::UrlEncode(f.name));
  if (!r.ok()) return Fail(r.status());
  if (!f.c.output.empty() && f.c.output != "wide") {
    Print(*r, f.c.output);
    return kExitOk;
  }
  const Json& q = *r;
  auto gpus = [&](const char* key) {
    return q.value(key, 0) == 0 ? std::string("none") : io::Count(q.value(key, 0), "GPU");
  };
  Field("Name", Cell(q, "name"));
  Field("Parent", Cell(q, "parent"));
  Field("Guarantee", gpus("guarantee"));
  Field("Limit", gpus("limit"));
  Field("Weight", Cell(q, "weight"));
  Field("Policy", Cell(q, "policy"));
  Field("Order", Cell(q, "order"));
  Field("Grace", Cell(q, "graceSeconds") + "s (to checkpoint when preempted)");
  Field("Used", io::Count(q.value("usedGpus", 0), "GPU") +
                    (q.value("guarantee", 0) > 0 && q.value("usedGpus", 0) > q.value("guarantee", 0)
                         ? " (borrowing " +
                               std::to_string(q.value("usedGpus", 0) - q.value("guarantee", 0)) +
                               " beyond its guarantee)"
                         : ""));
  Field("Running", io::Count(q.value("runningJobs", 0), "job"));
  Field("Pending", io::Count(q.value("pendingJobs", 0), "job") + ", " +
                       io::Count(q.value("pendingGpus", 0), "GPU") + " asked");
  Field("Max jobs", Cell(q, "maxJobs") + " unfinished (tenants)");
  Field("Submit rate", Cell(q, "maxSubmitsPerMinute") + " a minute per submitter (tenants)");
  Field("Run as", Cell(q, "runAs") + (q.value("allowRoot", false) ? " (root allowed)" : ""));
  char share[96];
  std::snprintf(share, sizeof share, "%.1f GPU-hours (decayed), %.0f%% of its level's use for %.0f%% "
                "of its weight: factor %.3f", q.value("usageGpuHours", 0.0),
                100 * q.value("usageShare", 0.0), 100 * q.value("weightShare", 0.0),
                q.value("fairShare", 1.0));
  Field("Fair share", share);
  Field("Infeasible", q.value("rejectInfeasible", false)
                          ? "refused at submission"
                          : "accepted, kept pending (reason Infeasible)");
  return kExitOk;
}

int RunDescribe(DescribeFlags& f) {
  // `describe 12` is a job, as in scontrol show job 12.
  int64_t id = 0;
  if (f.name.empty() && io::ParseInt64(f.what, &id)) f.name = f.what, f.what = "job";
  if (f.what.ends_with("s") && f.what != "s") f.what.pop_back();  // jobs, nodes, queues
  if (f.what != "job" && f.what != "node" && f.what != "queue") {
    std::cerr << "error: expected 'job ID', 'node NAME' or 'queue NAME', got '" << f.what << "'"
              << DidYouMean(f.what, {"job", "node", "queue"}) << "\n";
    return kExitBadInput;
  }
  if (f.name.empty()) {
    std::cerr << "error: describe " << f.what << ": which one? (unipool get " << f.what
              << "s lists them)\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    if (f.what == "job") return DescribeJob(client, f);
    if (f.what == "node") return DescribeNode(client, f);
    return DescribeQueue(client, f);
  });
}

struct DiagnoseFlags {
  Common c;
  std::string job;
};

// Exit 0 when nothing looks wrong, 1 when a cause was found: a script can
// gate on it.
int RunDiagnose(DiagnoseFlags& f) {
  int64_t id = 0;
  if (!io::ParseInt64(f.job, &id) || id <= 0) {
    std::cerr << "error: diagnose: expected a job id, got '" << f.job << "'\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    Result<Json> r = client.Call("GET", "/v1/jobs/" + std::to_string(id) + "/diagnosis");
    if (!r.ok()) return Fail(r.status());
    if (!f.c.output.empty()) {
      Print(*r, f.c.output);
    } else {
      std::cout << r->value("text", "");
    }
    return r->value("causes", Json::array()).empty() ? kExitOk : kExitFailed;
  });
}

}  // namespace

void AddDiagnoseCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<DiagnoseFlags>();
  CLI::App* cmd = AddSubcommand(
      app, "diagnose",
      "Say what is likely wrong with a job and how to fix it, with the evidence.\n"
      "  unipool diagnose 12            (OOM, NaN loss, timeouts, stragglers, stuck pending...)\n"
      "  unipool diagnose 12 -o json    (kind, summary, evidence and fix of each cause)");
  cmd->add_option("JOB", f->job, "job id")->required();
  AddCommon(cmd, f->c);
  cmd->callback([f, &exit_code] { exit_code = RunDiagnose(*f); });
}

void AddDescribeCommand(CLI::App& app, int& exit_code) {
  CLI::App* cmd = nullptr;
  auto describe = std::make_shared<DescribeFlags>();
  cmd = AddSubcommand(app, "describe",
                           "Show a job (placement, events, why pending, restarts), a node or a queue.\n"
                           "  unipool describe job 12     (or: unipool describe 12)\n"
                           "  unipool describe node node-3\n"
                           "  unipool describe queue team-a");
  cmd->add_option("KIND", describe->what, "job, node or queue (or a job id)")->required();
  cmd->add_option("NAME", describe->name, "job id, node or queue name");
  AddCommon(cmd, describe->c);
  cmd->callback([describe, &exit_code] { exit_code = RunDescribe(*describe); });
}

}  // namespace unipool::cli
