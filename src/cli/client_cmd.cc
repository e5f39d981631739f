// The kubectl-style commands that talk to a server: submit, get, describe,
// cancel, cordon, drain, uncordon, queue set, status. Output: tables that
// fit a terminal by default; -o wide|json|yaml.
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "io/cluster_reader.h"
#include "io/resource_tables.h"
#include "io/suggest.h"
#include "io/table.h"
#include "io/text.h"
#include "io/yaml_fields.h"
#include "server/records.h"

namespace unipool::cli {
namespace {

using io::Cell;
using io::Clip;
using io::DidYouMean;
using io::ElapsedCell;
using io::ExitCell;
using io::Kind;
using io::KindOf;
using io::ObjectName;

struct Common {
  ClientConfig config;
  std::string output;  // "" (table), wide, json, yaml
};

void AddCommon(CLI::App* cmd, Common& c, bool output = true) {
  cmd->add_option("--server", c.config.server, "server URL (else $UNIPOOL_SERVER, config file)");
  cmd->add_option("--token", c.config.token, "bearer token (else $UNIPOOL_TOKEN, config file)");
  cmd->add_option("--ca-cert", c.config.ca_cert, "PEM file to trust for https");
  if (output) {
    cmd->add_option("-o,--output", c.output, "wide, json, yaml or name (kind/name per line)")
        ->check(CLI::IsMember({"wide", "json", "yaml", "name"}));
  }
}

int Fail(const Status& st) {
  std::cerr << "error: " << st.message() << "\n";
  return ExitCodeFor(st);
}

// Runs `fn` with a ready client; config errors exit 2.
template <class Fn>
int WithClient(Common& c, Fn fn) {
  if (Status st = ResolveClientConfig(&c.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  return fn(Client(c.config));
}

void EmitYaml(YAML::Emitter& out, const Json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      EmitYaml(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& v : j) EmitYaml(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    // Quote what YAML would read back as another type ("200", "true", "").
    const std::string v = j.get<std::string>();
    const YAML::Node probe = YAML::Load(v.empty() ? "''" : v);
    int64_t n;
    const bool plain = !v.empty() && probe.IsScalar() && probe.Scalar() == v &&
                       !io::ParseInt64(v, &n) && v != "true" && v != "false" && v != "null" &&
                       v != "~" && v.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos;
    if (plain) {
      out << v;
    } else {
      out << YAML::DoubleQuoted << v;
    }
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();
  }
}

void Print(const Json& j, const std::string& output) {
  if (output == "yaml") {
    YAML::Emitter out;
    EmitYaml(out, j);
    std::cout << out.c_str() << "\n";
  } else {
    std::cout << j.dump(2) << "\n";
  }
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- get ---------------------------------------------------------------------

struct GetFlags {
  Common c;
  std::string what, name, state, queue, partition, since;
  std::vector<std::string> labels;
  int limit = 100;
  bool watch = false;
};

// What a watch prints: the rows of the list first, then a row each time an
// object changes in a column it shows (not its age: a checkpoint or a
// heartbeat alone prints nothing), in the list's column widths, flushed at
// once so that a pipe sees each line as it comes.
class WatchPrinter {
 public:
  WatchPrinter(const Kind& kind, const std::string& output) : kind_(kind), output_(output) {
    header_ = kind.header(output == "wide");
  }
  void List(const std::vector<Json>& items) {
    if (output_ == "json" || output_ == "yaml" || output_ == "name") {
      for (const Json& o : items) Seen(o);
      return;
    }
    io::Table t(header_);
    std::vector<std::vector<std::string>> rows;
    for (const Json& o : items) {
      rows.push_back(Row(o));
      t.Add(rows.back());
      Seen(o);
    }
    // Room for any state from the start (Preempting, Succeeded), so the
    // rows a change prints later line up with these.
    widths_ = t.Widths();
    for (size_t c = 0; c < header_.size(); ++c) {
      if (header_[c] == "STATE") widths_[c] = std::max<size_t>(widths_[c], 10);
    }
    std::string out = io::Table::Row(header_, widths_);
    for (const auto& row : rows) out += io::Table::Row(row, widths_);
    std::cout << out << std::flush;
  }
  void Change(const Json& event) {
    const Json& obj = event["object"];
    if (output_ == "json" || output_ == "yaml") {
      Print(event, output_);
      std::cout << std::flush;
      return;
    }
    if (event["type"] == "DELETE" || !obj.is_object() || !Seen(obj)) return;
    if (output_ == "name") {
      std::cout << ObjectName(kind_, obj) << "\n" << std::flush;
    } else {
      std::cout << io::Table::Row(Row(obj), widths_) << std::flush;
    }
  }

 private:
  std::vector<std::string> Row(const Json& o) const {
    return kind_.row(o, output_ == "wide", NowSeconds());
  }
  // Records what `o` shows; false when that is what was shown last.
  bool Seen(const Json& o) {
    std::vector<std::string> row = Row(o);
    for (size_t c = 0; c < header_.size(); ++c) {
      if (header_[c] == "AGE" || header_[c] == "ELAPSED" || header_[c] == "HEARTBEAT") row[c] = "";
    }
    std::string key = Cell(o, kind_.key);
    auto [it, fresh] = shown_.try_emplace(key, row);
    if (fresh) return true;
    if (it->second == row) return false;
    it->second = std::move(row);
    return true;
  }

  Kind kind_;
  std::string output_;
  std::vector<std::string> header_;
  std::vector<size_t> widths_;
  std::map<std::string, std::vector<std::string>> shown_;
};

int RunWatch(const Client& client, const Kind& kind, const GetFlags& f, int64_t revision,
             WatchPrinter& out) {
  while (true) {
    Result<Json> r = client.Call("GET",
                                 std::string("/v1/watch?kind=") + kind.watch +
                                     "&revision=" + std::to_string(revision) + "&timeoutSeconds=30",
                                 "", "application/json", 40);
    if (!r.ok()) return Fail(r.status());
    revision = (*r)["revision"].get<int64_t>();
    for (const Json& e : (*r)["events"]) {
      if (!f.name.empty() && e["object"].is_object() && Cell(e["object"], kind.key) != f.name) {
        continue;
      }
      out.Change(e);
    }
  }
}

// The query of a list of `kind` for the flags.
std::string ListPath(const Kind& kind, const GetFlags& f) {
  std::string path = kind.path;
  if (std::string(kind.watch) == "nodes") {
    std::string q;
    if (!f.state.empty()) q += "&state=" + io::UrlEncode(f.state);
    if (!f.partition.empty()) q += "&partition=" + io::UrlEncode(f.partition);
    if (!q.empty()) path += "?" + q.substr(1);
  } else if (std::string(kind.watch) == "jobs") {
    path += "?limit=" + std::to_string(f.limit);
    if (!f.state.empty()) path += "&state=" + io::UrlEncode(f.state);
    if (!f.queue.empty()) path += "&queue=" + io::UrlEncode(f.queue);
    if (!f.since.empty()) path += "&since=" + io::UrlEncode(f.since);
    for (const std::string& l : f.labels) path += "&label=" + io::UrlEncode(l);
  }
  return path;
}

int RunGet(GetFlags& f) {
  auto kind = KindOf(f.what);
  if (!kind) {
    std::cerr << "error: expected jobs, nodes or queues, got '" << f.what << "'"
              << DidYouMean(f.what, {"jobs", "nodes", "queues"}) << "\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    const std::string path =
        f.name.empty() ? ListPath(*kind, f) : kind->path + ("/" + io::UrlEncode(f.name));
    Result<Json> r = client.Call("GET", path);
    if (!r.ok()) return Fail(r.status());
    std::vector<Json> items;
    if (f.name.empty()) {
      for (const Json& item : (*r)["items"]) items.push_back(item);
    } else {
      items.push_back(*r);
    }
    if (f.c.output == "json" || f.c.output == "yaml") {
      Print(*r, f.c.output);
    } else if (f.c.output == "name") {
      for (const Json& o : items) std::cout << ObjectName(*kind, o) << "\n";
    }
    WatchPrinter printer(*kind, f.c.output);
    printer.List(items);  // (prints the table; the other forms are out already)
    std::cout << std::flush;
    if (!f.watch) return kExitOk;
    // Watch from the list's own revision, so no change in between is lost.
    int64_t rev = r->value("revision", int64_t{0});
    if (rev == 0) {
      Result<Json> s = client.Call("GET", "/v1/summary");
      if (!s.ok()) return Fail(s.status());
      rev = (*s)["revision"].get<int64_t>();
    }
    return RunWatch(client, *kind, f, rev, printer);
  });
}

// ---- submit ------------------------------------------------------------------

struct SubmitFlags {
  Common c;
  std::string file;
  bool dry_run = false;
};

// The documents of a YAML stream (kubectl apply's "---" separators), each
// with the line it starts on; documents of only blanks and comments are
// left out.
struct Document {
  std::string text;
  int first_line = 1;
};
std::vector<Document> SplitDocuments(const std::string& text) {
  std::vector<Document> docs(1);
  bool content = false;
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string l = text.substr(pos, end - pos);
    pos = end + 1;
    const bool separator = l.starts_with("---") &&
                           (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
    if (separator) {
      if (!content) docs.pop_back();
      docs.push_back(Document{"", line + 1});
      content = false;
      continue;
    }
    const size_t first = l.find_first_not_of(" \t\r");
    if (first != std::string::npos && l[first] != '#') content = true;
    docs.back().text += l + "\n";
  }
  if (!content) docs.pop_back();
  return docs;
}

// "body:3:5: msg" from the server, as "FILE:LINE:5: msg" with the
// document's first line added.
std::string InFile(const std::string& msg, const std::string& file, int first_line) {
  if (!msg.starts_with("body:")) return msg;
  size_t end = 5;
  while (end < msg.size() && std::isdigit(static_cast<unsigned char>(msg[end]))) ++end;
  int64_t line = 0;
  if (end > 5 && end < msg.size() && msg[end] == ':' && io::ParseInt64(msg.substr(5, end - 5), &line)) {
    return file + ":" + std::to_string(line + first_line - 1) + msg.substr(end);
  }
  return file + msg.substr(4);
}

int SubmitOne(const Client& client, const SubmitFlags& f, const Document& doc) {
  Result<Json> r =
      client.Call("POST", std::string("/v1/jobs") + (f.dry_run ? "?dryRun=true" : ""), doc.text,
                  "application/yaml");
  if (!r.ok()) {
    // The server names the place in the body; name the file instead.
    std::cerr << "error: " << InFile(r.status().message(), f.file, doc.first_line) << "\n";
    return ExitCodeFor(r.status());
  }
  for (const char* list : {"warnings", "ignored"}) {
    for (const Json& w : r->value(list, Json::array())) {
      std::cerr << "warning: " << w.get<std::string>() << "\n";
    }
  }
  if (f.c.output == "name") {
    std::cout << (f.dry_run ? "job (dry run)" : "job/" + Cell(*r, "id")) << "\n";
  } else if (!f.c.output.empty() && f.c.output != "wide") {
    Print(*r, f.c.output);
  } else if (f.dry_run) {
    std::cout << "spec is valid and can run (dry run; nothing submitted)\n";
  } else {
    std::cout << "job/" << (*r)["id"] << " submitted (" << (*r)["name"].get<std::string>()
              << ", queue " << (*r)["queue"].get<std::string>() << ", "
              << io::Count((*r)["spec"]["gpus"].get<int64_t>(), "GPU") << ")\n";
  }
  return kExitOk;
}

int RunSubmit(SubmitFlags& f) {
  Result<std::string> text =
      f.file == "-" ? Result<std::string>(std::string(std::istreambuf_iterator<char>(std::cin), {}))
                    : io::ReadFile(f.file);
  if (!text.ok()) {
    std::cerr << "error: " << text.status().message() << "\n";
    return kExitBadInput;
  }
  std::vector<Document> docs = SplitDocuments(*text);
  if (docs.empty()) docs.push_back(Document{*text, 1});  // the server says what is wrong
  return WithClient(f.c, [&](const Client& client) {
    int code = kExitOk;  // each document is submitted; the first failure's code
    for (const Document& doc : docs) {
      const int c = SubmitOne(client, f, doc);
      if (code == kExitOk) code = c;
    }
    return code;
  });
}

// ---- describe ----------------------------------------------------------------

struct DescribeFlags {
  Common c;
  std::string what, name;
};

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
                               " written");
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

// ---- cancel, cordon, drain, uncordon, queue set, status ------------------------

struct ActionFlags {
  Common c;
  std::vector<std::string> names;
  std::string reason;
  // cancel's filters (scancel's --partition/--state/--user, kubectl's -l).
  std::vector<std::string> labels;
  std::string queue, state, user;
  bool dry_run = false;
};

// The unfinished jobs that match cancel's filters, every page of them.
Result<std::vector<std::string>> MatchingJobs(const Client& client, const ActionFlags& f) {
  std::vector<std::string> ids;
  std::string next;
  const std::vector<std::string> states =
      f.state.empty() ? std::vector<std::string>{"Pending", "Running", "Preempting"}
                      : std::vector<std::string>{f.state};
  for (const std::string& state : states) {
    do {
      std::string path = "/v1/jobs?limit=1000&state=" + io::UrlEncode(state);
      if (!f.queue.empty()) path += "&queue=" + io::UrlEncode(f.queue);
      for (const std::string& l : f.labels) path += "&label=" + io::UrlEncode(l);
      if (!next.empty()) path += "&continue=" + io::UrlEncode(next);
      Result<Json> r = client.Call("GET", path);
      if (!r.ok()) return r.status();
      for (const Json& j : (*r)["items"]) {
        if (!f.user.empty() && j.value("owner", "") != f.user) continue;
        ids.push_back(Cell(j, "id"));
      }
      next = r->value("continue", "");
    } while (!next.empty());
  }
  return ids;
}

int RunCancel(ActionFlags& f) {
  const bool filtered = !f.labels.empty() || !f.queue.empty() || !f.state.empty() ||
                        !f.user.empty();
  if (f.names.empty() && !filtered) {
    std::cerr << "error: cancel: give job ids, or select jobs with -l, --queue, --state or "
                 "--user\n";
    return kExitBadInput;
  }
  if (!f.names.empty() && filtered) {
    std::cerr << "error: cancel: give job ids or filters, not both\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    if (filtered) {
      Result<std::vector<std::string>> ids = MatchingJobs(client, f);
      if (!ids.ok()) return Fail(ids.status());
      if (ids->empty()) std::cout << "no unfinished job matches\n";
      f.names = *ids;
    }
    if (f.dry_run) {
      for (const std::string& id : f.names) std::cout << "job/" << id << " (dry run)\n";
      return kExitOk;
    }
    int code = kExitOk;
    for (const std::string& id : f.names) {
      Result<Json> r = client.Call("DELETE", "/v1/jobs/" + io::UrlEncode(id));
      if (!r.ok()) {
        code = Fail(r.status());
        continue;
      }
      std::cout << "job/" << id << " cancelled\n";
    }
    return code;
  });
}

int RunNodeAction(ActionFlags& f, const std::string& action) {
  return WithClient(f.c, [&](const Client& client) {
    int code = kExitOk;
    const std::string body = f.reason.empty() ? "" : Json{{"reason", f.reason}}.dump();
    for (const std::string& node : f.names) {
      Result<Json> r = client.Call("POST", "/v1/nodes/" + io::UrlEncode(node) + "/" + action, body);
      if (!r.ok()) {
        code = Fail(r.status());
        continue;
      }
      std::cout << "node/" << node << " " << (action == "drain" ? "drained" : action + "ed")
                << " (state " << (*r)["state"].get<std::string>() << ")\n";
    }
    return code;
  });
}

struct QueueFlags {
  Common c;
  std::string name, parent, policy, grace;
  std::optional<int64_t> guarantee, limit, weight;
  std::optional<bool> reject_infeasible;
};

int RunQueueSet(QueueFlags& f) {
  return WithClient(f.c, [&](const Client& client) {
    // Start from the queue as it is, so that unset flags keep their values.
    Json body = Json::object();
    Result<Json> cur = client.Call("GET", "/v1/queues/" + io::UrlEncode(f.name));
    if (cur.ok()) {
      for (const char* k : {"parent", "guarantee", "limit", "weight", "policy", "graceSeconds",
                            "maxJobs", "maxSpecBytes", "maxSubmitsPerMinute", "runAs", "allowRoot",
                            "rejectInfeasible"}) {
        if (!cur->contains(k)) continue;
        body[k] = (*cur)[k];
      }
    } else if (cur.status().code() != StatusCode::kNotFound) {
      return Fail(cur.status());
    }
    if (!f.parent.empty()) body["parent"] = f.parent;
    if (f.guarantee) body["guarantee"] = *f.guarantee;
    if (f.limit) body["limit"] = *f.limit;
    if (f.weight) body["weight"] = *f.weight;
    if (!f.policy.empty()) body["policy"] = f.policy;
    if (f.reject_infeasible) body["rejectInfeasible"] = *f.reject_infeasible;
    if (!f.grace.empty()) {
      Duration d;
      if (!io::ParseDuration(f.grace, &d)) {
        std::cerr << "error: --grace: expected a duration like 120s, got '" << f.grace << "'\n";
        return kExitBadInput;
      }
      body["graceSeconds"] = d.value() / 1000000000;
    }
    Result<Json> r = client.Call("PUT", "/v1/queues/" + io::UrlEncode(f.name), body.dump());
    if (!r.ok()) return Fail(r.status());
    if (!f.c.output.empty() && f.c.output != "wide") {
      Print(*r, f.c.output);
    } else {
      std::cout << "queue/" << f.name << (cur.ok() ? " updated" : " created") << "\n";
    }
    return kExitOk;
  });
}

int RunStatus(Common& c) {
  return WithClient(c, [&](const Client& client) {
    Result<Json> r = client.Call("GET", "/v1/summary");
    if (!r.ok()) return Fail(r.status());
    if (!c.output.empty() && c.output != "wide") {
      Print(*r, c.output);
      return kExitOk;
    }
    const Json& s = *r;
    std::cout << "server:  " << client.config().server << "\n"
              << "nodes:   " << s["nodes"]["up"] << " up of " << s["nodes"]["total"] << "\n"
              << "gpus:    " << s["gpus"]["allocated"] << " allocated, " << s["gpus"]["free"]
              << " free, " << s["gpus"]["unavailable"] << " unavailable, of " << s["gpus"]["total"]
              << "\njobs:   ";
    for (const auto& [state, n] : s["jobs"].items()) std::cout << " " << state << " " << n;
    std::cout << "\n";
    return kExitOk;
  });
}

}  // namespace

void AddClientCommands(CLI::App& app, int& exit_code) {
  auto submit = std::make_shared<SubmitFlags>();
  CLI::App* cmd = app.add_subcommand("submit",
                                     "Submit job specs (unipool/v1 Job, Pod, batch/v1 "
                                     "Job or PyTorchJob; YAML or JSON).\n"
                                     "  unipool submit -f examples/jobs/train.yaml\n"
                                     "  unipool submit -f sweep.yaml --dry-run\n"
                                     "  cat job.yaml | unipool submit -f -");
  cmd->add_option("-f,--filename", submit->file,
                  "spec file, or - for standard input; several jobs separated by ---")
      ->required();
  cmd->add_flag("--dry-run", submit->dry_run,
                "validate only: exit 2 for a bad spec, 1 for a job that can never run");
  AddCommon(cmd, submit->c);
  cmd->callback([submit, &exit_code] { exit_code = RunSubmit(*submit); });

  auto get = std::make_shared<GetFlags>();
  cmd = app.add_subcommand("get", "List jobs, nodes or queues (or show one)");
  cmd->add_option("KIND", get->what, "jobs, nodes or queues")->required();
  cmd->add_option("NAME", get->name, "one job id, node or queue name");
  cmd->add_option("--state", get->state,
                  "jobs (Pending, Running, ...) or nodes (up, cordoned, ...) in this state only");
  cmd->add_option("--partition", get->partition, "nodes of this partition only");
  cmd->add_option("--queue", get->queue, "jobs of this queue only");
  cmd->add_option("-l,--selector", get->labels, "jobs with this label (key=value), repeatable");
  cmd->add_option("--since", get->since,
                  "jobs running, pending or ended since then: a duration before now (7d, 12h) "
                  "or a time (2026-12-01T00:00:00.000Z); ended jobs come from the history too");
  cmd->add_option("--limit", get->limit, "at most this many jobs, newest first")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("-w,--watch", get->watch, "after listing, print changes as they happen");
  AddCommon(cmd, get->c);
  cmd->callback([get, &exit_code] { exit_code = RunGet(*get); });

  auto describe = std::make_shared<DescribeFlags>();
  cmd = app.add_subcommand("describe",
                           "Show a job (placement, events, why pending, restarts), a node or a queue.\n"
                           "  unipool describe job 12     (or: unipool describe 12)\n"
                           "  unipool describe node node-3\n"
                           "  unipool describe queue team-a");
  cmd->add_option("KIND", describe->what, "job, node or queue (or a job id)")->required();
  cmd->add_option("NAME", describe->name, "job id, node or queue name");
  AddCommon(cmd, describe->c);
  cmd->callback([describe, &exit_code] { exit_code = RunDescribe(*describe); });

  auto cancel = std::make_shared<ActionFlags>();
  cmd = app.add_subcommand("cancel",
                           "Cancel jobs: pending ones are removed, running ones stopped.\n"
                           "  unipool cancel 12 13\n"
                           "  unipool cancel --queue team-a --state Pending\n"
                           "  unipool cancel -l experiment=sweep-7 --dry-run");
  cmd->add_option("ID", cancel->names, "job ids");
  cmd->add_option("-l,--selector", cancel->labels, "jobs with this label (key=value), repeatable");
  cmd->add_option("--queue", cancel->queue, "jobs of this queue");
  cmd->add_option("--state", cancel->state, "jobs in this state (Pending, Running, Preempting)");
  cmd->add_option("--user", cancel->user, "jobs this token name submitted");
  cmd->add_flag("--dry-run", cancel->dry_run, "print the jobs the filters select; cancel none");
  AddCommon(cmd, cancel->c, false);
  cmd->callback([cancel, &exit_code] { exit_code = RunCancel(*cancel); });

  for (const char* action : {"cordon", "drain", "uncordon"}) {
    auto flags = std::make_shared<ActionFlags>();
    const std::string a = action;
    const char* help = a == "cordon" ? "Place no new work on nodes; running jobs stay"
                       : a == "drain"
                           ? "Empty nodes: their jobs are preempted with a checkpoint grace"
                           : "Make cordoned or drained nodes schedulable again";
    cmd = app.add_subcommand(action, help);
    cmd->add_option("NODE", flags->names, "node names")->required();
    if (a != "uncordon") cmd->add_option("--reason", flags->reason, "why (shown on the node)");
    AddCommon(cmd, flags->c, false);
    cmd->callback([flags, a, &exit_code] { exit_code = RunNodeAction(*flags, a); });
  }

  auto queue = std::make_shared<QueueFlags>();
  CLI::App* q = app.add_subcommand("queue", "Manage queues (quotas, limits, weights)");
  q->require_subcommand(1);
  cmd = q->add_subcommand("set", "Create a queue or change it; unset flags keep their values");
  cmd->add_option("NAME", queue->name, "queue name")->required();
  cmd->add_option("--parent", queue->parent, "parent queue (at creation only)");
  cmd->add_option("--guarantee", queue->guarantee, "guaranteed GPUs (0: none)");
  cmd->add_option("--limit", queue->limit, "GPU limit (0: none)");
  cmd->add_option("--weight", queue->weight, "fair-share weight (>= 1)");
  cmd->add_option("--policy", queue->policy, "best-effort or fifo")
      ->check(CLI::IsMember({"best-effort", "fifo"}));
  cmd->add_option("--grace", queue->grace, "checkpoint grace for its preempted jobs, e.g. 120s");
  cmd->add_option("--reject-infeasible", queue->reject_infeasible,
                  "true: refuse at submission a job that can never run (more GPUs than the "
                  "limit or the cluster holds)");
  AddCommon(cmd, queue->c);
  cmd->callback([queue, &exit_code] { exit_code = RunQueueSet(*queue); });

  auto status = std::make_shared<Common>();
  cmd = app.add_subcommand("status", "Summarize the cluster: nodes, GPUs, jobs");
  AddCommon(cmd, *status);
  cmd->callback([status, &exit_code] { exit_code = RunStatus(*status); });
}

}  // namespace unipool::cli
