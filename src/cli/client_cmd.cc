// The kubectl-style commands that talk to a server: submit, get, describe,
// cancel, cordon, drain, uncordon, queue set, status. Output: tables that
// fit a terminal by default; -o wide|json|yaml.
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "cli/client.h"
#include "cli/commands.h"
#include "io/cluster_reader.h"
#include "io/table.h"
#include "io/text.h"
#include "io/yaml_fields.h"
#include "server/records.h"

namespace unipool::cli {
namespace {

struct Common {
  ClientConfig config;
  std::string output;  // "" (table), wide, json, yaml
};

void AddCommon(CLI::App* cmd, Common& c, bool output = true) {
  cmd->add_option("--server", c.config.server, "server URL (else $UNIPOOL_SERVER, config file)");
  cmd->add_option("--token", c.config.token, "bearer token (else $UNIPOOL_TOKEN, config file)");
  cmd->add_option("--ca-cert", c.config.ca_cert, "PEM file to trust for https");
  if (output) {
    cmd->add_option("-o,--output", c.output, "wide, json or yaml")
        ->check(CLI::IsMember({"wide", "json", "yaml"}));
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

std::string Age(const Json& t) {
  if (!t.is_string()) return "-";
  Result<Time> at = server::ParseTime(t.get<std::string>());
  if (!at.ok()) return "-";
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int64_t s = std::max<int64_t>(0, now - at->value() / 1000000000);
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string Str(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  if (j[key].is_string())
    return j[key].get<std::string>().empty() ? "-" : j[key].get<std::string>();
  return j[key].dump();
}

std::string Clip(std::string s, size_t n) {
  if (s.size() > n) s = s.substr(0, n - 3) + "...";
  return s;
}

// ---- Tables ----------------------------------------------------------------

std::vector<std::string> JobHeader(bool wide) {
  std::vector<std::string> h = {"ID", "NAME", "QUEUE", "STATE", "GPUS", "RESTARTS", "AGE"};
  if (wide) h.insert(h.end(), {"OWNER", "NODES", "MESSAGE"});
  return h;
}
std::vector<std::string> JobRow(const Json& j, bool wide) {
  const Json& spec = j.value("spec", Json::object());
  std::vector<std::string> r = {Str(j, "id"),
                                Clip(Str(j, "name"), 30),
                                Str(j, "queue"),
                                Str(j, "state"),
                                Str(spec, "gpus"),
                                Str(j, "restarts"),
                                Age(j.value("submitted", Json()))};
  if (wide) {
    std::string nodes;
    for (const Json& t : j.value("tasks", Json::array())) {
      const std::string n = t.value("node", "");
      if (nodes.find(n) == std::string::npos) nodes += (nodes.empty() ? "" : ",") + n;
    }
    r.insert(r.end(),
             {Str(j, "owner"), Clip(nodes.empty() ? "-" : nodes, 40), Clip(Str(j, "message"), 60)});
  }
  return r;
}
std::vector<std::string> NodeHeader(bool wide) {
  std::vector<std::string> h = {"NAME", "STATE", "GPUS", "PARTITION", "HEALTH"};
  if (wide) h.insert(h.end(), {"MODEL", "ADMIN", "WHY", "HEARTBEAT"});
  return h;
}
std::vector<std::string> NodeRow(const Json& n, bool wide) {
  std::vector<std::string> r = {Str(n, "name"), Str(n, "state"), Str(n, "gpus"),
                                Str(n, "partition"), Clip(Str(n, "health"), 30)};
  if (wide) {
    r.insert(r.end(), {Str(n, "gpuModel"), Str(n, "admin"), Clip(Str(n, "why"), 40),
                       Age(n.value("lastHeartbeat", Json()))});
  }
  return r;
}
std::vector<std::string> QueueHeader(bool wide) {
  std::vector<std::string> h = {"NAME",   "PARENT", "GUARANTEE", "LIMIT",
                                "WEIGHT", "USED",   "PENDING",   "RUNNING"};
  if (wide) h.insert(h.end(), {"POLICY", "GRACE", "PENDING-GPUS"});
  return h;
}
std::vector<std::string> QueueRow(const Json& q, bool wide) {
  std::vector<std::string> r = {Str(q, "name"),        Str(q, "parent"),     Str(q, "guarantee"),
                                Str(q, "limit"),       Str(q, "weight"),     Str(q, "usedGpus"),
                                Str(q, "pendingJobs"), Str(q, "runningJobs")};
  if (wide)
    r.insert(r.end(), {Str(q, "policy"), Str(q, "graceSeconds") + "s", Str(q, "pendingGpus")});
  return r;
}

struct Kind {
  const char* path;  // API collection
  const char* watch;
  std::vector<std::string> (*header)(bool);
  std::vector<std::string> (*row)(const Json&, bool);
};

std::optional<Kind> KindOf(const std::string& what) {
  if (what == "jobs" || what == "job") return Kind{"/v1/jobs", "jobs", JobHeader, JobRow};
  if (what == "nodes" || what == "node") return Kind{"/v1/nodes", "nodes", NodeHeader, NodeRow};
  if (what == "queues" || what == "queue") {
    return Kind{"/v1/queues", "queues", QueueHeader, QueueRow};
  }
  return std::nullopt;
}

// ---- get ---------------------------------------------------------------------

struct GetFlags {
  Common c;
  std::string what, name, state, queue, partition, since;
  std::vector<std::string> labels;
  int limit = 100;
  bool watch = false;
};

int RunWatch(const Client& client, const Kind& kind, const GetFlags& f, int64_t revision) {
  const bool wide = f.c.output == "wide";
  while (true) {
    Result<Json> r = client.Call("GET",
                                 std::string("/v1/watch?kind=") + kind.watch +
                                     "&revision=" + std::to_string(revision) + "&timeoutSeconds=30",
                                 "", "application/json", 40);
    if (!r.ok()) return Fail(r.status());
    revision = (*r)["revision"].get<int64_t>();
    for (const Json& e : (*r)["events"]) {
      const Json& obj = e["object"];
      if (f.c.output == "json" || f.c.output == "yaml") {
        Print(e, f.c.output);
        continue;
      }
      if (e["type"] == "DELETE" || !obj.is_object()) continue;
      if (!f.name.empty() &&
          Str(obj, kind.watch == std::string("jobs") ? "id" : "name") != f.name) {
        continue;
      }
      io::Table t(kind.header(wide));
      t.Add(kind.row(obj, wide));
      std::string text = t.Render();
      std::cout << text.substr(text.find('\n') + 1) << std::flush;  // the row alone
    }
  }
}

int RunGet(GetFlags& f) {
  auto kind = KindOf(f.what);
  if (!kind) {
    std::cerr << "error: expected jobs, nodes or queues, got '" << f.what << "'\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    std::string path = kind->path;
    if (!f.name.empty()) {
      path += "/" + io::UrlEncode(f.name);
    } else if (std::string(kind->watch) == "nodes") {
      std::string q;
      if (!f.state.empty()) q += "&state=" + io::UrlEncode(f.state);
      if (!f.partition.empty()) q += "&partition=" + io::UrlEncode(f.partition);
      if (!q.empty()) path += "?" + q.substr(1);
    } else if (std::string(kind->watch) == "jobs") {
      path += "?limit=" + std::to_string(f.limit);
      if (!f.state.empty()) path += "&state=" + io::UrlEncode(f.state);
      if (!f.queue.empty()) path += "&queue=" + io::UrlEncode(f.queue);
      if (!f.since.empty()) path += "&since=" + io::UrlEncode(f.since);
      for (const std::string& l : f.labels) path += "&label=" + io::UrlEncode(l);
    }
    Result<Json> r = client.Call("GET", path);
    if (!r.ok()) return Fail(r.status());
    if (f.c.output == "json" || f.c.output == "yaml") {
      Print(*r, f.c.output);
    } else {
      const bool wide = f.c.output == "wide";
      io::Table t(kind->header(wide));
      if (f.name.empty()) {
        for (const Json& item : (*r)["items"]) t.Add(kind->row(item, wide));
      } else {
        t.Add(kind->row(*r, wide));
      }
      std::cout << t.Render();
    }
    if (!f.watch) return kExitOk;
    // Watch from the list's own revision, so no change in between is lost.
    int64_t rev = r->value("revision", int64_t{0});
    if (rev == 0) {
      Result<Json> s = client.Call("GET", "/v1/summary");
      if (!s.ok()) return Fail(s.status());
      rev = (*s)["revision"].get<int64_t>();
    }
    return RunWatch(client, *kind, f, rev);
  });
}

// ---- submit ------------------------------------------------------------------

struct SubmitFlags {
  Common c;
  std::string file;
  bool dry_run = false;
};

int RunSubmit(SubmitFlags& f) {
  Result<std::string> text =
      f.file == "-" ? Result<std::string>(std::string(std::istreambuf_iterator<char>(std::cin), {}))
                    : io::ReadFile(f.file);
  if (!text.ok()) {
    std::cerr << "error: " << text.status().message() << "\n";
    return kExitBadInput;
  }
  return WithClient(f.c, [&](const Client& client) {
    Result<Json> r =
        client.Call("POST", std::string("/v1/jobs") + (f.dry_run ? "?dryRun=true" : ""), *text,
                    "application/yaml");
    if (!r.ok()) {
      // The server names the place in the body; name the file instead.
      std::string msg = r.status().message();
      if (msg.starts_with("body:")) msg = f.file + msg.substr(4);
      std::cerr << "error: " << msg << "\n";
      return ExitCodeFor(r.status());
    }
    for (const char* list : {"warnings", "ignored"}) {
      for (const Json& w : r->value(list, Json::array())) {
        std::cerr << "warning: " << w.get<std::string>() << "\n";
      }
    }
    if (!f.c.output.empty() && f.c.output != "wide") {
      Print(*r, f.c.output);
    } else if (f.dry_run) {
      std::cout << "spec is valid (dry run; nothing submitted)\n";
    } else {
      std::cout << "job/" << (*r)["id"] << " submitted (" << (*r)["name"].get<std::string>()
                << ", queue " << (*r)["queue"].get<std::string>() << ", " << (*r)["spec"]["gpus"]
                << " GPUs)\n";
    }
    return kExitOk;
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
  Field("ID", Str(j, "id"));
  Field("Name", Str(j, "name"));
  Field("Queue", Str(j, "queue"));
  Field("Owner", Str(j, "owner"));
  Field("State", Str(j, "state"));
  std::string shape;
  if (spec.value("gpusPerNode", 0) > 0) {
    shape = " (" +
            std::to_string(spec["gpus"].get<int64_t>() / spec["gpusPerNode"].get<int64_t>()) +
            " nodes x " + Str(spec, "gpusPerNode") + ")";
  } else if (spec.value("gpusPerTask", 0) > 0) {
    shape = " (tasks of " + Str(spec, "gpusPerTask") + ")";
  }
  if (spec.value("exclusive", false)) shape += ", exclusive nodes";
  if (spec.value("placement", "") == "spread") shape += ", spread";
  Field("GPUs", Str(spec, "gpus") + shape);
  Field("Priority", spec.value("priorityClass", "").empty() ? Str(spec, "priority")
                                                            : Str(spec, "priorityClass"));
  Field("Preemptible", Str(spec, "preemptible"));
  Field("Command", Clip(spec.value("command", Json::array()).dump(), 200));
  Field("Submitted", Str(j, "submitted"));
  Field("Started", Str(j, "started"));
  Field("Finished", Str(j, "finished"));
  Field("Checkpoint", Str(j, "lastCheckpoint"));
  Field("Restarts", Str(j, "restarts") + " (max " + Str(spec["restart"], "maxRestarts") + ")");
  Field("Disruptions", Str(j, "disruptions") + " (nodes lost; not counted against maxRestarts)");
  Field("Preemptions", Str(j, "preemptions"));
  Field("Lost work", Str(j, "lostGpuSeconds") + " GPU-seconds");
  Field("Why", Str(j, "explain"));
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
  for (const Json& e : (*ev)["items"]) {
    t.Add({"  " + Str(e, "time"), Str(e, "type"), Clip(Str(e, "message"), 100)});
  }
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
  for (const char* k : {"name", "state", "gpus", "gpuModel", "partition", "admin", "why",
                        "registered", "alive", "health", "lastHeartbeat"}) {
    std::string key = k;
    key[0] = static_cast<char>(std::toupper(key[0]));
    Field(key, Str(n, k));
  }
  Field("Jobs", n["jobs"].empty() ? "-" : n["jobs"].dump());
  return kExitOk;
}

int RunDescribe(DescribeFlags& f) {
  return WithClient(f.c, [&](const Client& client) {
    if (f.what == "job") return DescribeJob(client, f);
    if (f.what == "node") return DescribeNode(client, f);
    std::cerr << "error: expected 'job ID' or 'node NAME', got '" << f.what << "'\n";
    return kExitBadInput;
  });
}

// ---- cancel, cordon, drain, uncordon, queue set, status ------------------------

struct ActionFlags {
  Common c;
  std::vector<std::string> names;
  std::string reason;
};

int RunCancel(ActionFlags& f) {
  return WithClient(f.c, [&](const Client& client) {
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
};

int RunQueueSet(QueueFlags& f) {
  return WithClient(f.c, [&](const Client& client) {
    // Start from the queue as it is, so that unset flags keep their values.
    Json body = Json::object();
    Result<Json> cur = client.Call("GET", "/v1/queues/" + io::UrlEncode(f.name));
    if (cur.ok()) {
      for (const char* k : {"parent", "guarantee", "limit", "weight", "policy", "graceSeconds"}) {
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
                                     "Submit a job spec (unipool/v1 Job, Pod, batch/v1 "
                                     "Job or PyTorchJob; YAML or JSON)");
  cmd->add_option("-f,--filename", submit->file, "spec file, or - for standard input")->required();
  cmd->add_flag("--dry-run", submit->dry_run, "validate only");
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
                           "Show a job (placement, events, why pending, restarts) or a node");
  cmd->add_option("KIND", describe->what, "job or node")->required();
  cmd->add_option("NAME", describe->name, "job id or node name")->required();
  AddCommon(cmd, describe->c);
  cmd->callback([describe, &exit_code] { exit_code = RunDescribe(*describe); });

  auto cancel = std::make_shared<ActionFlags>();
  cmd = app.add_subcommand("cancel", "Cancel jobs: pending ones are removed, running ones stopped");
  cmd->add_option("ID", cancel->names, "job ids")->required();
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
  AddCommon(cmd, queue->c);
  cmd->callback([queue, &exit_code] { exit_code = RunQueueSet(*queue); });

  auto status = std::make_shared<Common>();
  cmd = app.add_subcommand("status", "Summarize the cluster: nodes, GPUs, jobs");
  AddCommon(cmd, *status);
  cmd->callback([status, &exit_code] { exit_code = RunStatus(*status); });
}

}  // namespace unipool::cli
