#include "server/api.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <initializer_list>
#include <sstream>

#include "io/job_spec.h"
#include "io/yaml_fields.h"
#include "server/records.h"

namespace unipool::server {
namespace {

constexpr size_t kMaxBody = io::kMaxSpecBytes;
constexpr int64_t kMaxPage = 1000;
constexpr int64_t kMaxWatchSeconds = 300;

int HttpCode(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

const char* CodeForHttp(int status) {
  switch (status) {
    case 400:
      return "INVALID_ARGUMENT";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 405:
      return "METHOD_NOT_ALLOWED";
    case 413:
      return "PAYLOAD_TOO_LARGE";
    default:
      return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
}

std::string ErrorBody(const char* code, const std::string& message) {
  return Json{{"error", {{"code", code}, {"message", message}}}}.dump();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A positive integer of at most 18 digits.
bool ParseId(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoll(s);
  return *out > 0;
}

// Counts long polls in flight; ok() when under the cap.
class LongPoll {
 public:
  LongPoll(std::atomic<int>& n, int cap) : n_(n), ok_(++n_ <= cap) {}
  ~LongPoll() { --n_; }
  bool ok() const { return ok_; }

 private:
  std::atomic<int>& n_;
  bool ok_;
};

}  // namespace

// One request in flight.
struct ApiServer::Call {
  const httplib::Request& req;
  httplib::Response& res;
  Principal who;
  Scope scope;

  std::string Path(int i) const { return req.matches[i]; }
  void Reply(int status, const Json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }
  void Fail(const Status& st) {
    res.status = HttpCode(st.code());
    res.set_content(ErrorBody(StatusCodeName(st.code()), st.ToString()), "application/json");
  }
  bool Bad(const std::string& message) {
    Fail(InvalidArgument(message));
    return false;
  }
  // Only these roles may call; others get 403.
  bool Allow(std::initializer_list<Role> roles) {
    for (Role r : roles) {
      if (who.role == r) return true;
    }
    Fail(PermissionDenied(std::string("role ") + RoleName(who.role) + " (" + who.name +
                          ") may not " + req.method + " " + req.path));
    return false;
  }
  // Agents act only on their own node.
  bool OwnNode(const std::string& node) {
    if (who.role != Role::kAgent || who.node == node) return true;
    Fail(PermissionDenied("agent of node " + who.node + " may not act for node " + node));
    return false;
  }
  // Every query parameter must be one of `known`.
  bool Query(std::initializer_list<const char*> known) {
    for (const auto& [key, value] : req.params) {
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
        return Bad("query parameter '" + key + "' is not known" +
                   (list.empty() ? "" : "; expected one of: " + list));
      }
    }
    return true;
  }
  // An integer query parameter in [lo, hi], or `def` when absent.
  bool Int(const char* key, int64_t lo, int64_t hi, int64_t def, int64_t* out) {
    *out = def;
    if (!req.has_param(key)) return true;
    const std::string v = req.get_param_value(key);
    if (!io::ParseInt64(v, out) || *out < lo || *out > hi) {
      return Bad(std::string(key) + ": expected an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "], got '" + v + "'");
    }
    return true;
  }
  // The request body as a JSON object; `allowed` lists its fields.
  bool Body(std::initializer_list<const char*> allowed, Json* out, bool required = true) {
    if (req.body.empty() && !required) {
      *out = Json::object();
      return true;
    }
    *out = Json::parse(req.body, nullptr, false);
    if (out->is_discarded() || !out->is_object()) return Bad("body: expected a JSON object");
    for (const auto& [key, v] : out->items()) {
      bool ok = false;
      for (const char* k : allowed) ok = ok || key == k;
      if (!ok) return Bad("body." + key + ": unknown field");
    }
    return true;
  }
  bool String(const Json& body, const char* key, size_t max, std::string* out,
              bool required = false) {
    if (!body.contains(key))
      return required ? Bad(std::string("body.") + key + ": required") : true;
    if (!body[key].is_string()) return Bad(std::string("body.") + key + ": expected a string");
    *out = body[key].get<std::string>();
    if (out->size() > max) {
      return Bad(std::string("body.") + key + ": longer than " + std::to_string(max) + " bytes");
    }
    return true;
  }
  bool JobId(int64_t* id) {
    if (ParseId(Path(1), id)) return true;
    return Bad("job id '" + Path(1).substr(0, 40) + "': expected a positive integer");
  }
};

ApiServer::ApiServer(ControlPlane& control, Metrics& metrics, Logger& log, ApiOptions options)
    : control_(control), metrics_(metrics), log_(log), options_(std::move(options)) {}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::DeclareMetrics(Metrics& m) {
  m.Declare("unipool_api_requests_total", Metrics::Type::kCounter,
            "API requests by route, method and status code.");
  m.Declare("unipool_api_request_seconds", Metrics::Type::kHistogram,
            "API request latency by route.", Metrics::LatencyBuckets());
}

// ---- Set-up ----------------------------------------------------------------

Status ApiServer::Init() {
  Result<TokenFile> tokens = TokenFile::Load(options_.tokens_path);
  if (!tokens.ok()) return tokens.status();
  tokens_ = std::make_shared<const TokenFile>(std::move(tokens).value());
  struct stat st;
  if (stat(options_.tokens_path.c_str(), &st) == 0)
    tokens_mtime_ = st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;

  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    if (options_.tls_cert.empty() || options_.tls_key.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    auto ssl =
        std::make_unique<httplib::SSLServer>(options_.tls_cert.c_str(), options_.tls_key.c_str());
    if (!ssl->is_valid()) {
      return InvalidArgument("cannot load TLS certificate " + options_.tls_cert + " and key " +
                             options_.tls_key);
    }
    http_ = std::move(ssl);
  } else {
    http_ = std::make_unique<httplib::Server>();
  }
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(kMaxBody);
  http_->set_tcp_nodelay(true);  // small JSON replies: no Nagle/delayed-ACK stalls
  http_->set_keep_alive_max_count(100000);
  http_->set_read_timeout(30, 0);
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 404 ? "no route " + req.method + " " + req.path
                            : res.status == 413
                                ? "body larger than " + std::to_string(kMaxBody) + " bytes"
                                : "bad request";
    res.set_content(ErrorBody(CodeForHttp(res.status), msg), "application/json");
  });
  http_->set_exception_handler(
      [this](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
        log_.Error("api", "handler threw", {{"path", req.path}});
        res.status = 500;
        res.set_content(ErrorBody("INTERNAL", "internal error"), "application/json");
      });

  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    res.status = stopping_ ? 503 : 200;
    res.set_content(stopping_ ? "stopping\n" : "ok\n", "text/plain");
  });
  Route("GET", "/metrics", "/metrics", &ApiServer::Metrics_);
  Route("GET", "/v1/summary", "/v1/summary", &ApiServer::Summary);
  Route("POST", "/v1/jobs", "/v1/jobs", &ApiServer::SubmitJob);
  Route("GET", "/v1/jobs", "/v1/jobs", &ApiServer::ListJobs);
  Route("GET", "/v1/jobs/([^/]+)", "/v1/jobs/{id}", &ApiServer::GetJob);
  Route("DELETE", "/v1/jobs/([^/]+)", "/v1/jobs/{id}", &ApiServer::CancelJob);
  Route("POST", "/v1/jobs/([^/]+)/cancel", "/v1/jobs/{id}/cancel", &ApiServer::CancelJob);
  Route("GET", "/v1/jobs/([^/]+)/events", "/v1/jobs/{id}/events", &ApiServer::JobEvents);
  Route("GET", "/v1/jobs/([^/]+)/explain", "/v1/jobs/{id}/explain", &ApiServer::ExplainJob);
  Route("POST", "/v1/jobs/([^/]+)/report", "/v1/jobs/{id}/report", &ApiServer::ReportJob);
  Route("GET", "/v1/jobs/([^/]+)/logs", "/v1/jobs/{id}/logs", &ApiServer::JobLogs);
  Route("GET", "/v1/nodes", "/v1/nodes", &ApiServer::ListNodes);
  Route("GET", "/v1/nodes/([^/]+)", "/v1/nodes/{name}", &ApiServer::GetNode);
  Route("POST", "/v1/nodes/([^/]+)/(cordon|drain|uncordon)", "/v1/nodes/{name}/{action}",
        &ApiServer::NodeAction);
  Route("POST", "/v1/nodes/([^/]+)/join", "/v1/nodes/{name}/join", &ApiServer::JoinNode);
  Route("POST", "/v1/nodes/([^/]+)/heartbeat", "/v1/nodes/{name}/heartbeat", &ApiServer::Heartbeat);
  Route("GET", "/v1/nodes/([^/]+)/assignments", "/v1/nodes/{name}/assignments",
        &ApiServer::Assignments);
  Route("GET", "/v1/queues", "/v1/queues", &ApiServer::ListQueues);
  Route("GET", "/v1/queues/([^/]+)", "/v1/queues/{name}", &ApiServer::GetQueue);
  Route("PUT", "/v1/queues/([^/]+)", "/v1/queues/{name}", &ApiServer::PutQueue);
  Route("GET", "/v1/watch", "/v1/watch", &ApiServer::Watch);
  return Status::Ok();
}

void ApiServer::Route(const char* method, const std::string& pattern, const char* name, Handler h) {
  auto handler = [this, name, h, method](const httplib::Request& req, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    Call c{req, res, {}, {}};
    res.status = 200;  // handlers that only set content answer 200
    Status auth = Authenticate(req, &c.who);
    const bool form =
        req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded");
    if (auth.ok() && form && !req.body.empty()) {
      // httplib would read the body as query parameters: say what to send.
      res.status = 415;
      res.set_content(ErrorBody("UNSUPPORTED_MEDIA_TYPE",
                                "send JSON or YAML with Content-Type: application/json or "
                                "application/yaml (curl: -H 'Content-Type: application/yaml' "
                                "--data-binary @job.yaml)"),
                      "application/json");
    } else if (!auth.ok()) {
      c.Fail(auth);
      res.set_header("WWW-Authenticate", "Bearer");
    } else {
      c.scope.all = c.who.role != Role::kTenant;
      c.scope.queues = c.who.queues;
      (this->*h)(c);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    metrics_.Add("unipool_api_requests_total",
                 {{"route", name}, {"method", method}, {"code", std::to_string(res.status)}});
    metrics_.Observe("unipool_api_request_seconds", {{"route", name}}, secs);
    if (res.status >= 500) {
      log_.Error("api", "request failed", {{"route", name}, {"code", int64_t{res.status}}});
    }
  };
  const std::string m = method;
  if (m == "GET")
    http_->Get(pattern, handler);
  else if (m == "POST")
    http_->Post(pattern, handler);
  else if (m == "PUT")
    http_->Put(pattern, handler);
  else
    http_->Delete(pattern, handler);
}

void ApiServer::ReloadTokens() {
  const int64_t now = NowMs();
  std::lock_guard lock(tokens_mu_);
  if (now - tokens_checked_ < 1000) return;
  tokens_checked_ = now;
  struct stat st;
  if (stat(options_.tokens_path.c_str(), &st) != 0) return;
  const int64_t mtime = st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  if (mtime == tokens_mtime_) return;
  Result<TokenFile> fresh = TokenFile::Load(options_.tokens_path);
  if (!fresh.ok()) {
    log_.Error("auth", "token file not reloaded: " + fresh.status().message());
    return;
  }
  tokens_ = std::make_shared<const TokenFile>(std::move(fresh).value());
  tokens_mtime_ = mtime;
  log_.Info("auth", "token file reloaded", {{"tokens", static_cast<int64_t>(tokens_->size())}});
}

Status ApiServer::Authenticate(const httplib::Request& req, Principal* who) {
  const std::string header = req.get_header_value("Authorization");
  if (header.empty()) return Unauthenticated("missing 'Authorization: Bearer <token>' header");
  if (!header.starts_with("Bearer ") || header.size() > 512) {
    return Unauthenticated("Authorization header: expected 'Bearer <token>'");
  }
  const std::string token = header.substr(7);
  ReloadTokens();
  std::shared_ptr<const TokenFile> tokens;
  {
    std::lock_guard lock(tokens_mu_);
    tokens = tokens_;
  }
  if (const Principal* p = tokens->Find(token)) {
    *who = *p;
    return Status::Ok();
  }
  if (auto node = control_.NodeOfToken(Sha256Hex(token))) {
    who->name = "agent:" + *node;
    who->role = Role::kAgent;
    who->node = *node;
    return Status::Ok();
  }
  return Unauthenticated("unknown token");
}

// cpp-httplib 0.11 listens with a backlog of 5: a burst of new connections
// (agents reconnecting, a load test) overflows it and waits for SYN
// retransmits (1 s). Calling listen() again on the bound socket raises it.
static void RaiseListenBacklog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int listening = 0;
    socklen_t olen = sizeof listening;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) != 0 || !listening) continue;
    const int p = addr.ss_family == AF_INET ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                  : addr.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                      : -1;
    if (p == port) listen(fd, 4096);
  }
}

Result<int> ApiServer::Bind(const std::string& host, int port) {
  if (port == 0) {
    port = http_->bind_to_any_port(host);
    if (port < 0) return Unavailable("cannot bind " + host);
  } else if (!http_->bind_to_port(host, port)) {
    return Unavailable("cannot bind " + host + ":" + std::to_string(port) +
                       " (in use, or not an address of this machine)");
  }
  RaiseListenBacklog(port);
  return port;
}

void ApiServer::Serve() { http_->listen_after_bind(); }

void ApiServer::Stop() {
  stopping_ = true;
  control_.store().Close();
  if (http_) http_->stop();
}

// ---- Cluster ---------------------------------------------------------------

void ApiServer::Metrics_(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly}) || !c.Query({})) return;
  control_.UpdateGauges();
  c.res.set_content(metrics_.Render(), "text/plain; version=0.0.4; charset=utf-8");
}

void ApiServer::Summary(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  c.Reply(200, SummaryToJson(control_.GetSummary(c.scope)));
}

// ---- Jobs ------------------------------------------------------------------

void ApiServer::SubmitJob(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kTenant}) || !c.Query({"dryRun"})) return;
  if (c.req.has_param("dryRun") && c.req.get_param_value("dryRun") != "true" &&
      c.req.get_param_value("dryRun") != "false") {
    c.Bad("dryRun: expected true or false");
    return;
  }
  Result<io::ParsedJob> parsed = io::ReadJobSpec(c.req.body, "body");
  if (!parsed.ok()) {
    c.Fail(parsed.status());
    return;
  }
  const io::JobRequest& r = parsed->job;
  if (!c.scope.Sees(r.queue)) {
    c.Fail(PermissionDenied("spec.queue: " + c.who.name + " may not submit to queue '" + r.queue +
                            "'"));
    return;
  }
  if (c.req.get_param_value("dryRun") == "true") {
    if (Status st = control_.Validate(r); !st.ok()) return c.Fail(st);
    c.Reply(
        200,
        Json{{"dryRun", true}, {"spec", io::JobRequestToJson(r)}, {"ignored", parsed->ignored}});
    return;
  }
  Result<JobRecord> job = control_.Submit(r, c.who.name);
  if (!job.ok()) {
    c.Fail(job.status());
    return;
  }
  Json out = JobToJson(*job);
  out["ignored"] = parsed->ignored;
  c.res.set_header("Location", "/v1/jobs/" + std::to_string(job->id));
  c.Reply(201, out);
}

void ApiServer::ListJobs(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"state", "queue", "label", "limit", "continue"})) {
    return;
  }
  JobFilter f;
  int64_t limit = 0, before = 0;
  if (!c.Int("limit", 1, kMaxPage, 100, &limit) ||
      !c.Int("continue", 1, int64_t{1} << 62, 0, &before)) {
    return;
  }
  f.limit = static_cast<int32_t>(limit);
  f.before = before;
  if (c.req.has_param("state")) {
    f.state = ParseJobState(c.req.get_param_value("state"));
    if (!f.state) {
      c.Bad("state: expected Pending, Running, Preempting, Succeeded, Failed or Cancelled");
      return;
    }
  }
  f.queue = c.req.get_param_value("queue");
  for (size_t i = 0; i < c.req.get_param_value_count("label"); ++i) {
    const std::string sel = c.req.get_param_value("label", i);
    const size_t eq = sel.find('=');
    if (eq == std::string::npos || eq == 0) {
      c.Bad("label: expected key=value, got '" + sel.substr(0, 80) + "'");
      return;
    }
    f.labels.emplace_back(sel.substr(0, eq), sel.substr(eq + 1));
  }
  std::vector<JobRecord> jobs = control_.List(f, c.scope);
  Json items = Json::array();
  for (const JobRecord& j : jobs) items.push_back(JobToJson(j));
  Json out{{"items", items}, {"revision", control_.store().revision()}};
  if (static_cast<int64_t>(jobs.size()) == limit) out["continue"] = std::to_string(jobs.back().id);
  c.Reply(200, out);
}

void ApiServer::GetJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<JobRecord> job = control_.Get(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  Json out = JobToJson(*job);
  if (Result<std::string> why = control_.Explain(id, c.scope); why.ok()) out["explain"] = *why;
  c.Reply(200, out);
}

void ApiServer::CancelJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) return;
  Result<JobRecord> job = control_.Cancel(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  c.Reply(200, JobToJson(*job));
}

void ApiServer::JobEvents(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<std::vector<JobEvent>> events = control_.Events(id, c.scope);
  if (!events.ok()) return c.Fail(events.status());
  Json items = Json::array();
  for (const JobEvent& e : *events) items.push_back(EventToJson(e));
  c.Reply(200, Json{{"items", items}});
}

void ApiServer::ExplainJob(Call& c) {
  int64_t id = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({}) || !c.JobId(&id)) {
    return;
  }
  Result<std::string> why = control_.Explain(id, c.scope);
  if (!why.ok()) return c.Fail(why.status());
  c.Reply(200, Json{{"id", id}, {"explain", *why}});
}

void ApiServer::ReportJob(Call& c) {
  int64_t id = 0;
  Json body;
  if (!c.Allow({Role::kAdmin, Role::kAgent}) || !c.Query({}) || !c.JobId(&id) ||
      !c.Body({"generation", "kind", "message", "data"}, &body)) {
    return;
  }
  std::string data;
  if (body.contains("data")) {
    if (!body["data"].is_object() || body["data"].size() > 64) {
      return (void)c.Bad("body.data: expected a JSON object of at most 64 fields");
    }
    data = body["data"].dump();
  }
  if (!body.contains("generation") || !body["generation"].is_number_integer()) {
    c.Bad("body.generation: expected the job's run number (an integer)");
    return;
  }
  std::string kind, message;
  if (!c.String(body, "kind", 32, &kind, true) || !c.String(body, "message", 4096, &message)) {
    return;
  }
  if (c.who.role == Role::kAgent) {
    // An agent reports only jobs that run on its node.
    const std::vector<int64_t> mine = control_.JobsOn(c.who.node, Scope{});
    if (std::find(mine.begin(), mine.end(), id) == mine.end()) {
      c.Fail(PermissionDenied("job " + std::to_string(id) + " has no task on node " + c.who.node));
      return;
    }
  }
  Status st = control_.Report(id, body["generation"].get<int64_t>(), kind, message, data,
                              c.who.role == Role::kAgent ? c.who.node : "");
  if (!st.ok()) return c.Fail(st);
  c.Reply(200, Json{{"ok", true}});
}

// ---- Nodes -----------------------------------------------------------------

void ApiServer::ListNodes(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"state", "partition"})) {
    return;
  }
  const std::string state = c.req.get_param_value("state");
  const std::string partition = c.req.get_param_value("partition");
  if (!state.empty() && !ParseNodeState(state)) {
    c.Bad("state: expected up, cordoned, drained, flaky or down");
    return;
  }
  Json items = Json::array();
  for (const NodeRecord& n : control_.Nodes()) {
    if (!state.empty() && NodeStateName(n.state) != state) continue;
    if (!partition.empty() && n.partition != partition) continue;
    items.push_back(NodeToJson(n));
  }
  c.Reply(200, Json{{"items", items}, {"revision", control_.store().revision()}});
}

void ApiServer::GetNode(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant, Role::kAgent}) || !c.Query({}) ||
      !c.OwnNode(c.Path(1))) {
    return;
  }
  Result<NodeRecord> n = control_.Node(c.Path(1));
  if (!n.ok()) return c.Fail(n.status());
  Json out = NodeToJson(*n);
  out["jobs"] = control_.JobsOn(n->name, c.scope);
  c.Reply(200, out);
}

void ApiServer::NodeAction(Call& c) {
  Json body;
  if (!c.Allow({Role::kAdmin}) || !c.Query({}) || !c.Body({"reason"}, &body, false)) return;
  std::string reason;
  if (!c.String(body, "reason", 1024, &reason)) return;
  Result<NodeRecord> n = control_.SetNodeAdmin(c.Path(1), c.Path(2), reason);
  if (!n.ok()) return c.Fail(n.status());
  c.Reply(200, NodeToJson(*n));
}

void ApiServer::JoinNode(Call& c) {
  Json body;
  if (!c.Allow({Role::kAdmin, Role::kJoin}) || !c.Query({}) || !c.Body({"gpus"}, &body, false)) {
    return;
  }
  if (body.contains("gpus")) {
    Result<NodeRecord> n = control_.Node(c.Path(1));
    if (!n.ok()) return c.Fail(NotFound("node '" + c.Path(1) + "' is not in the cluster file"));
    if (!body["gpus"].is_number_integer() || body["gpus"].get<int64_t>() != n->gpus) {
      return (void)c.Bad("body.gpus: the agent has " + body["gpus"].dump() +
                         " GPUs; the cluster file gives node " + c.Path(1) + " " +
                         std::to_string(n->gpus));
    }
  }
  Result<std::string> token = NewToken();
  if (!token.ok()) return c.Fail(token.status());
  Status st = control_.Register(c.Path(1), Sha256Hex(*token));
  if (!st.ok()) return c.Fail(st);
  log_.Info("auth", "agent joined", {{"node", c.Path(1)}, {"by", c.who.name}});
  c.Reply(200, Json{{"node", c.Path(1)}, {"token", *token}});
}

void ApiServer::Heartbeat(Call& c) {
  Json body;
  if (!c.Allow({Role::kAgent, Role::kAdmin}) || !c.Query({}) || !c.OwnNode(c.Path(1)) ||
      !c.Body({"health", "address", "agentUrl", "agentSecret"}, &body, false)) {
    return;
  }
  ControlPlane::HeartbeatInfo info;
  if (!c.String(body, "health", 1024, &info.health) ||
      !c.String(body, "address", 255, &info.address) ||
      !c.String(body, "agentUrl", 255, &info.agent_url) ||
      !c.String(body, "agentSecret", 255, &info.agent_secret)) {
    return;
  }
  if (info.health.empty()) return (void)c.Bad("body.health: empty; send ok or what is wrong");
  Status st = control_.Heartbeat(c.Path(1), info);
  if (!st.ok()) return c.Fail(st);
  c.Reply(200, Json{{"ok", true}});
}

// The rendezvous of a run: MASTER_PORT is chosen per job and run from
// 20000-39999, so a restarted run does not meet its predecessor's sockets.
static int MasterPort(int64_t job, int64_t generation) {
  return 20000 + static_cast<int>((job * 131 + generation * 17) % 20000);
}

// What an agent needs to run its part of a job: the spec, every task in
// rank order with its node's address, and the rendezvous.
Json ApiServer::AssignmentJson(const JobRecord& j) {
  Json tasks = Json::array();
  int64_t rank = 0;
  std::string master;
  for (size_t k = 0; k < j.tasks.size(); ++k) {
    const TaskView& t = j.tasks[k];
    Result<NodeRecord> n = control_.Node(t.node);
    const std::string address = n.ok() && !n->address.empty() ? n->address : t.node;
    if (k == 0) master = address;
    tasks.push_back({{"node", t.node},
                     {"address", address},
                     {"gpus", t.gpus},
                     {"nodeRank", k},
                     {"firstRank", rank}});
    rank += static_cast<int64_t>(t.gpus.size());
  }
  Json out = JobToJson(j);
  out["tasks"] = tasks;
  out["world"] = {{"masterAddr", master},
                  {"masterPort", MasterPort(j.id, j.generation)},
                  {"worldSize", rank},
                  {"nnodes", j.tasks.size()}};
  out["graceSeconds"] = control_.GraceSeconds(j.request.queue);
  return out;
}

// Long poll when `revision` is given: answers once a job of this node, or
// one of the `jobs` the agent runs, changes after it (or at the timeout).
void ApiServer::Assignments(Call& c) {
  if (!c.Allow({Role::kAgent, Role::kAdmin}) || !c.Query({"revision", "timeoutSeconds", "jobs"}) ||
      !c.OwnNode(c.Path(1))) {
    return;
  }
  const std::string node = c.Path(1);
  if (!control_.Node(node).ok()) return c.Fail(NotFound("node '" + node + "' not found"));
  int64_t since = 0, timeout = 0;
  if (!c.Int("revision", 0, int64_t{1} << 62, 0, &since) ||
      !c.Int("timeoutSeconds", 0, kMaxWatchSeconds, 30, &timeout)) {
    return;
  }
  std::set<int64_t> known;
  std::stringstream ids(c.req.get_param_value("jobs"));
  for (std::string id; std::getline(ids, id, ',');) {
    int64_t v = 0;
    if (!ParseId(id, &v)) return (void)c.Bad("jobs: expected job ids separated by commas");
    known.insert(v);
  }
  int64_t rev = control_.store().revision();
  // Long polls hold a server thread each: past the cap, answer at once so
  // heartbeats and reports always find a thread.
  LongPoll slot(long_polls_, options_.threads / 2);
  if (since > 0 && slot.ok()) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
    bool mine = false;
    while (!mine && !stopping_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      Result<std::vector<store::Event>> events = control_.store().Watch("/jobs/", since, left);
      if (!events.ok()) break;  // compacted: answer the current state
      if (events->empty()) break;
      for (const store::Event& e : *events) {
        since = std::max(since, e.kv.mod_revision);
        const Json obj = Json::parse(e.kv.value, nullptr, false);
        if (!obj.is_object()) continue;
        mine = mine || known.contains(obj.value("id", int64_t{0}));
        for (const Json& t : obj.value("tasks", Json::array())) {
          mine = mine || t.value("node", "") == node;
        }
      }
    }
    rev = std::max(since, rev);
  }
  Json items = Json::array();
  for (const JobRecord& j : control_.Assignments(node)) items.push_back(AssignmentJson(j));
  // Act only on durable decisions: a run the server could forget in a
  // crash must not start.
  if (Status st = control_.store().Sync(control_.store().revision()); !st.ok()) return c.Fail(st);
  c.Reply(200, Json{{"items", items}, {"revision", rev}});
}

// Logs live on the agents: the server finds the node of the rank and asks
// its agent (with the secret the agent gave in its heartbeats).
void ApiServer::JobLogs(Call& c) {
  int64_t id = 0, rank = 0, offset = 0, limit = 0;
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"rank", "offset", "limitBytes"}) || !c.JobId(&id) ||
      !c.Int("rank", 0, int64_t{1} << 24, 0, &rank) ||
      !c.Int("offset", 0, int64_t{1} << 50, 0, &offset) ||
      !c.Int("limitBytes", 1, 16 << 20, 1 << 20, &limit)) {
    return;
  }
  Result<JobRecord> job = control_.Get(id, c.scope);
  if (!job.ok()) return c.Fail(job.status());
  std::string node;
  int64_t first = 0;
  for (const TaskView& t : job->tasks) {
    const int64_t n = static_cast<int64_t>(t.gpus.size());
    if (rank >= first && rank < first + n) node = t.node;
    first += n;
  }
  if (node.empty()) {
    return c.Fail(NotFound("job " + std::to_string(id) + " has no rank " + std::to_string(rank) +
                           (job->tasks.empty() ? " (it has not run yet)" : "")));
  }
  Result<NodeRecord> n = control_.Node(node);
  if (!n.ok() || n->agent_url.empty()) {
    return c.Fail(Unavailable("node " + node + " has no agent to read logs from"));
  }
  httplib::Client agent(n->agent_url);
  agent.set_connection_timeout(2, 0);
  agent.set_read_timeout(10, 0);
  httplib::Headers h = {{"Authorization", "Bearer " + n->agent_secret}};
  auto r = agent.Get("/logs/" + std::to_string(id) + "/" + std::to_string(rank) + "?generation=" +
                         std::to_string(job->generation) + "&offset=" + std::to_string(offset) +
                         "&limitBytes=" + std::to_string(limit),
                     h);
  if (!r) return c.Fail(Unavailable("the agent of node " + node + " did not answer"));
  if (r->status != 200) {
    return c.Fail(Status(r->status == 404 ? StatusCode::kNotFound : StatusCode::kUnavailable,
                         "agent of node " + node + ": " + r->body.substr(0, 200)));
  }
  c.res.set_header("X-Unipool-Offset", r->get_header_value("X-Unipool-Offset"));
  c.res.set_header("X-Unipool-Node", node);
  c.res.set_content(r->body, "text/plain; charset=utf-8");
}

// ---- Queues ----------------------------------------------------------------

void ApiServer::ListQueues(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  Json items = Json::array();
  for (const QueueRecord& q : control_.Queues(c.scope)) items.push_back(QueueToJson(q));
  c.Reply(200, Json{{"items", items}, {"revision", control_.store().revision()}});
}

void ApiServer::GetQueue(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) || !c.Query({})) return;
  for (const QueueRecord& q : control_.Queues(c.scope)) {
    if (q.spec.name == c.Path(1)) return c.Reply(200, QueueToJson(q));
  }
  c.Fail(NotFound("queue '" + c.Path(1) + "' not found"));
}

void ApiServer::PutQueue(Call& c) {
  if (!c.Allow({Role::kAdmin}) || !c.Query({})) return;
  Json body = Json::parse(c.req.body, nullptr, false);
  if (body.is_discarded()) return (void)c.Bad("body: expected a JSON object");
  Result<sched::QueueSpec> spec = QueueSpecFromJson(body, "body");
  if (!spec.ok()) return c.Fail(spec.status());
  if (!spec->name.empty() && spec->name != c.Path(1)) {
    return (void)c.Bad("body.name: '" + spec->name + "' differs from the path's '" + c.Path(1) +
                       "'");
  }
  spec->name = c.Path(1);
  Result<QueueRecord> q = control_.SetQueue(*spec);
  if (!q.ok()) return c.Fail(q.status());
  c.Reply(200, QueueToJson(*q));
}

// ---- Watch -----------------------------------------------------------------

// Long poll: the changes after `revision`, waiting up to `timeoutSeconds`
// for the first. Answers {revision, events: [{type, kind, object}]}; watch
// again from the returned revision. 409 when the revision is compacted.
void ApiServer::Watch(Call& c) {
  if (!c.Allow({Role::kAdmin, Role::kReadOnly, Role::kTenant}) ||
      !c.Query({"kind", "revision", "timeoutSeconds"})) {
    return;
  }
  const std::string kind = c.req.has_param("kind") ? c.req.get_param_value("kind") : "jobs";
  if (kind != "jobs" && kind != "nodes" && kind != "queues") {
    return (void)c.Bad("kind: expected jobs, nodes or queues, got '" + kind.substr(0, 40) + "'");
  }
  int64_t since = 0, timeout = 0;
  if (!c.Int("revision", 0, int64_t{1} << 62, control_.store().revision(), &since) ||
      !c.Int("timeoutSeconds", 0, kMaxWatchSeconds, 30, &timeout)) {
    return;
  }
  LongPoll slot(long_polls_, options_.threads / 2);
  Result<std::vector<store::Event>> events = control_.store().Watch(
      "/" + kind + "/", since, std::chrono::seconds(slot.ok() ? timeout : 0));
  if (!events.ok()) return c.Fail(events.status());
  Json items = Json::array();
  int64_t rev = since;
  for (const store::Event& e : *events) {
    rev = std::max(rev, e.kv.mod_revision);
    Json obj = e.type == store::Event::Type::kPut ? Json::parse(e.kv.value, nullptr, false)
                                                  : Json{{"key", e.kv.key}};
    if (kind == "jobs" && obj.is_object() && !c.scope.Sees(obj.value("queue", ""))) continue;
    if (kind == "queues" && obj.is_object() && !c.scope.Sees(obj.value("name", ""))) continue;
    items.push_back(Json{{"type", e.type == store::Event::Type::kPut ? "PUT" : "DELETE"},
                         {"kind", kind},
                         {"revision", e.kv.mod_revision},
                         {"object", obj}});
  }
  c.Reply(200, Json{{"revision", rev}, {"events", items}});
}

}  // namespace unipool::server
