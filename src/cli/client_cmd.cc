// The kubectl-style commands that talk to a server: submit, get, cancel,
// cordon, drain, uncordon, queue set, status (describe is describe_cmd.cc).
// Output: tables that fit a terminal by default; -o wide|json|yaml|name.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "cli/client_common.h"
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
  WatchPrinter(const Kind& kind, const std::string& output, bool watch)
      : kind_(kind), output_(output), watch_(watch) {
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
    // Watching: room for any state from the start (Preempting, Succeeded),
    // so the rows a change prints later line up with these.
    widths_ = t.Widths();
    for (size_t c = 0; c < header_.size() && watch_; ++c) {
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
  bool watch_;
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
    WatchPrinter printer(*kind, f.c.output, f.watch);
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

// The unfinished jobs that match cancel's filters, every page of them,
// each once: a job that starts between the Pending and the Running query
// is in both answers. (Pending first: a job that starts meanwhile is
// never missed.)
Result<std::vector<std::string>> MatchingJobs(const Client& client, const ActionFlags& f) {
  std::vector<std::string> ids;
  std::set<std::string> seen;
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
        if (seen.insert(Cell(j, "id")).second) ids.push_back(Cell(j, "id"));
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
  std::string name, parent, policy, order, grace;
  std::optional<int64_t> guarantee, limit, weight;
  std::optional<bool> reject_infeasible;
};

int RunQueueSet(QueueFlags& f) {
  return WithClient(f.c, [&](const Client& client) {
    // Start from the queue as it is, so that unset flags keep their values.
    Json body = Json::object();
    Result<Json> cur = client.Call("GET", "/v1/queues/" + io::UrlEncode(f.name));
    if (cur.ok()) {
      for (const char* k :
           {"parent", "guarantee", "limit", "weight", "policy", "order", "graceSeconds", "maxJobs",
            "maxSpecBytes", "maxSubmitsPerMinute", "runAs", "allowRoot", "rejectInfeasible"}) {
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
    if (!f.order.empty()) body["order"] = f.order;
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
  CLI::App* cmd = AddSubcommand(app, "submit",
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
  cmd = AddSubcommand(app, "get",
                      "List jobs, nodes or queues (or show one)\n"
                      "  unipool get jobs --state Pending            why each waits: REASON\n"
                      "  unipool get jobs --since 7d -o wide         the week's, ended ones too\n"
                      "  unipool get nodes -o wide                   GPUs used and free per node\n"
                      "  unipool get jobs -w                         changes as they happen\n"
                      "  unipool get job 12 -o yaml");
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

  auto cancel = std::make_shared<ActionFlags>();
  cmd = AddSubcommand(app, "cancel",
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
  cmd->add_option("--order", queue->order,
                  "order of jobs of the same priority: submission (first come, first served), "
                  "sjf (shortest time limit first) or las (least GPU-time received first)")
      ->check(CLI::IsMember({"submission", "sjf", "las"}));
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
