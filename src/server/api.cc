// ApiServer set-up, routing, authentication and admission; the shared
// request checks (api_call.h). The handlers are in api_jobs.cc,
// api_nodes.cc and api_cluster.cc.
#include "server/api.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "io/quote.h"
#include "server/api_call.h"
#include "server/web_assets.h"

namespace unipool::server {

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
    case StatusCode::kDeadlineExceeded:
      return 504;  // the change may still land: the message says how to look
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

bool ParseId(const std::string& s, int64_t* out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoll(s);
  return *out > 0;
}

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += path[i];
    }
  }
  return out;
}

// What Admit found, for Handle.
struct Admitted {
  size_t route = 0;
  Principal who;
  std::chrono::steady_clock::time_point start;
};

}  // namespace

Json ParseJsonNoDuplicates(const std::string& text, std::string* dup) {
  std::vector<std::set<std::string>> keys;
  auto cb = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) {
      keys.resize(static_cast<size_t>(depth) + 2);
      keys[static_cast<size_t>(depth) + 1].clear();
    } else if (event == Json::parse_event_t::key) {
      auto& seen = keys[static_cast<size_t>(depth)];
      if (!seen.insert(parsed.get<std::string>()).second && dup->empty()) {
        *dup = parsed.get<std::string>();
      }
    }
    return true;
  };
  return Json::parse(text, cb, false);
}

// ---- Call ------------------------------------------------------------------

bool ApiServer::Call::Allow(std::initializer_list<Role> roles) {
  for (Role r : roles) {
    if (who.role == r) return true;
  }
  Fail(PermissionDenied(std::string("role ") + RoleName(who.role) + " (" + who.name + ") may not " +
                        req.method + " " + req.path));
  return false;
}

bool ApiServer::Call::OwnNode(const std::string& node) {
  if (who.role != Role::kAgent || who.node == node) return true;
  Fail(PermissionDenied("agent of node " + who.node + " may not act for node " + node));
  return false;
}

bool ApiServer::Call::Query(std::initializer_list<const char*> known,
                            std::initializer_list<const char*> repeatable) {
  std::set<std::string> seen;
  for (const auto& [key, value] : req.params) {
    bool ok = false, many = false;
    for (const char* k : known) ok = ok || key == k;
    for (const char* k : repeatable) ok = many = many || key == k;
    if (!ok) {
      std::string list;
      for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
      for (const char* k : repeatable) list += std::string(list.empty() ? "" : ", ") + k;
      return Bad("query parameter " + io::Quote(key) + " is not known" +
                 (list.empty() ? "" : "; expected one of: " + list));
    }
    if (!many && !seen.insert(key).second) {
      return Bad("query parameter '" + key + "' appears more than once");
    }
  }
  return true;
}

bool ApiServer::Call::Int(const char* key, int64_t lo, int64_t hi, int64_t def, int64_t* out) {
  *out = def;
  if (!req.has_param(key)) return true;
  const std::string v = req.get_param_value(key);
  if (!io::ParseInt64(v, out) || *out < lo || *out > hi) {
    return Bad(std::string(key) + ": expected an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "], got " + io::Quote(v));
  }
  return true;
}

bool ApiServer::Call::AnyBody(Json* out) {
  std::string dup;
  *out = ParseJsonNoDuplicates(req.body, &dup);
  if (out->is_discarded() || !out->is_object()) {
    return Bad("body: expected a JSON object (UTF-8)");
  }
  if (!dup.empty()) return Bad("body: key " + io::Quote(dup) + " appears more than once");
  return true;
}

bool ApiServer::Call::Body(std::initializer_list<const char*> allowed, Json* out, bool required) {
  if (req.body.empty() && !required) {
    *out = Json::object();
    return true;
  }
  if (!AnyBody(out)) return false;
  for (const auto& [key, v] : out->items()) {
    bool ok = false;
    for (const char* k : allowed) ok = ok || key == k;
    if (!ok) return Bad("body." + io::OneLine(io::Truncate(key, 64)) + ": unknown field");
  }
  return true;
}

bool ApiServer::Call::String(const Json& body, const char* key, size_t max, std::string* out,
                             bool required) {
  if (!body.contains(key)) return required ? Bad(std::string("body.") + key + ": required") : true;
  if (!body[key].is_string()) return Bad(std::string("body.") + key + ": expected a string");
  *out = body[key].get<std::string>();
  if (out->size() > max) {
    return Bad(std::string("body.") + key + ": longer than " + std::to_string(max) + " bytes");
  }
  size_t at = 0;
  if (!CleanText(*out, &at)) {
    return Bad(std::string("body.") + key + ": a control character at byte " + std::to_string(at));
  }
  return true;
}

bool ApiServer::Call::JobId(int64_t* id) {
  if (ParseId(Path(1), id)) return true;
  return Bad("job id '" + Path(1).substr(0, 40) + "': expected a positive integer");
}

// ---- Set-up ----------------------------------------------------------------

ApiServer::ApiServer(ControlPlane& control, Metrics& metrics, Logger& log, ApiOptions options)
    : control_(control), metrics_(metrics), log_(log), options_(std::move(options)) {
  if (options_.peer_evidence) {
    Result<std::string> secret = NewToken();
    if (secret.ok()) peer_secret_ = *secret;  // else none: no agent can ask its peers
  }
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::DeclareMetrics(Metrics& m) {
  m.Declare("unipool_api_requests_total", Metrics::Type::kCounter,
            "API requests by route, method and status code.");
  m.Declare("unipool_api_request_seconds", Metrics::Type::kHistogram,
            "API request latency by route.", Metrics::LatencyBuckets());
  m.Declare("unipool_api_connections", Metrics::Type::kGauge, "Open client connections.");
  m.Declare("unipool_token_file_valid", Metrics::Type::kGauge,
            "1 when the token file was read; 0 when it is missing or broken (its tokens are "
            "refused until it is repaired).");
}

static Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status ApiServer::Init() {
  Result<TokenFile> tokens = TokenFile::Load(options_.tokens_path);
  if (!tokens.ok()) return tokens.status();
  tokens_ = std::make_shared<const TokenFile>(std::move(tokens).value());
  metrics_.Set("unipool_token_file_valid", {}, 1);
  struct stat st;
  if (stat(options_.tokens_path.c_str(), &st) == 0)
    tokens_ctime_ = st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;

  options_.limits.max_body = io::kMaxSpecBytes;
  http_ = std::make_unique<HttpServer>(
      options_.limits,
      [this](HttpRequest& req, HttpResponse& res, Admission& adm) { Admit(req, res, adm); },
      [this](HttpRequest& req, HttpResponse& res) { Handle(req, res); },
      [this](const HttpRequest& req, const HttpResponse& res) { Refused(req, res); });
  if (!options_.tls_cert.empty() || !options_.tls_key.empty()) {
    if (options_.tls_cert.empty() || options_.tls_key.empty()) {
      return InvalidArgument("--tls-cert and --tls-key go together");
    }
    Result<std::string> cert = ReadFile(options_.tls_cert);
    if (!cert.ok()) return InvalidArgument("TLS certificate: " + cert.status().message());
    Result<std::string> key = ReadFile(options_.tls_key);
    if (!key.ok()) return InvalidArgument("TLS key: " + key.status().message());
    UNIPOOL_RETURN_IF_ERROR(http_->SetTls(*cert, *key));
  }

  Route("GET", "/metrics", "/metrics", &ApiServer::Metrics_);
  Route("GET", "/v1/summary", "/v1/summary", &ApiServer::Summary);
  Route("POST", "/v1/jobs", "/v1/jobs", &ApiServer::SubmitJob);
  Route("GET", "/v1/jobs", "/v1/jobs", &ApiServer::ListJobs);
  Route("GET", "/v1/jobs/*", "/v1/jobs/{id}", &ApiServer::GetJob);
  Route("DELETE", "/v1/jobs/*", "/v1/jobs/{id}", &ApiServer::CancelJob);
  Route("POST", "/v1/jobs/*/cancel", "/v1/jobs/{id}/cancel", &ApiServer::CancelJob);
  Route("GET", "/v1/jobs/*/events", "/v1/jobs/{id}/events", &ApiServer::JobEvents);
  Route("GET", "/v1/jobs/*/explain", "/v1/jobs/{id}/explain", &ApiServer::ExplainJob);
  Route("GET", "/v1/jobs/*/diagnosis", "/v1/jobs/{id}/diagnosis", &ApiServer::DiagnoseJob);
  Route("POST", "/v1/jobs/*/report", "/v1/jobs/{id}/report", &ApiServer::ReportJob, Lane::kAgent);
  Route("GET", "/v1/jobs/*/logs", "/v1/jobs/{id}/logs", &ApiServer::JobLogs);
  Route("GET", "/v1/nodes", "/v1/nodes", &ApiServer::ListNodes);
  Route("GET", "/v1/nodes/*", "/v1/nodes/{name}", &ApiServer::GetNode);
  for (const char* action : {"cordon", "drain", "uncordon"}) {
    Route("POST", std::string("/v1/nodes/*/") + action, "/v1/nodes/{name}/{action}",
          &ApiServer::NodeAction);
  }
  Route("POST", "/v1/nodes/*/join", "/v1/nodes/{name}/join", &ApiServer::JoinNode, Lane::kAgent);
  Route("POST", "/v1/nodes/*/heartbeat", "/v1/nodes/{name}/heartbeat", &ApiServer::Heartbeat,
        Lane::kAgent);
  Route("GET", "/v1/nodes/*/assignments", "/v1/nodes/{name}/assignments", &ApiServer::Assignments,
        Lane::kAgent);
  Route("GET", "/v1/queues", "/v1/queues", &ApiServer::ListQueues);
  Route("GET", "/v1/queues/*", "/v1/queues/{name}", &ApiServer::GetQueue);
  Route("PUT", "/v1/queues/*", "/v1/queues/{name}", &ApiServer::PutQueue);
  Route("GET", "/v1/watch", "/v1/watch", &ApiServer::Watch, Lane::kLongPoll);
  Route("GET", "/v1/topology", "/v1/topology", &ApiServer::TopologyView);
  Route("GET", "/v1/jobs/*/progress", "/v1/jobs/{id}/progress", &ApiServer::JobProgress);
  return Status::Ok();
}

void ApiServer::Route(const char* method, const std::string& pattern, const char* name, Handler h,
                      Lane lane) {
  routes_.push_back(RouteEntry{method, Segments(pattern), name, h, lane});
}

Result<int> ApiServer::Bind(const std::string& host, int port) { return http_->Bind(host, port); }

Result<int> ApiServer::Adopt(int fd) { return http_->Adopt(fd); }

void ApiServer::Serve() {
  if (Status st = http_->Start(); !st.ok()) {
    log_.Error("api", st.message());
    return;
  }
  std::unique_lock lock(serve_mu_);
  serve_cv_.wait(lock, [this] { return stopping_.load(); });
}

void ApiServer::Stop() {
  {
    std::lock_guard lock(serve_mu_);
    stopping_ = true;
  }
  serve_cv_.notify_all();
  control_.store().Close();  // ends the long polls
  if (http_) http_->Stop();
}

// ---- Admission (event loop) --------------------------------------------------

void ApiServer::Admit(HttpRequest& req, HttpResponse& res, Admission& adm) {
  adm.answered = true;
  auto answer = [&](int status, const char* code, const std::string& message) {
    res.status = status;
    res.set_content(ErrorBody(code, message), "application/json");
    Count("other", req.method, status, 0);
  };
  if (req.method == "GET" && (req.path == "/healthz" || req.path == "/readyz")) {
    const bool ready = req.path == "/healthz" || (!stopping_ && control_.Writable());
    res.status = ready ? 200 : 503;
    res.set_content(ready       ? "ok\n"
                    : stopping_ ? "stopping\n"
                                : control_.WhyNotWritable() + "\n",
                    "text/plain");
    return;
  }
  // The dashboard's page and files: public (the page asks for a token and
  // the API it calls enforces it), from memory, in the event loop.
  if (req.method == "GET" && (req.path == "/" || req.path.starts_with("/ui/"))) {
    if (const WebAsset* asset = FindWebAsset(req.path)) {
      res.status = 200;
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                     "frame-src 'self' blob:; frame-ancestors 'none'");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_header("Cache-Control", "no-cache");
      res.set_content(std::string(asset->body), std::string(asset->content_type));
      Count("/ui", req.method, 200, 0);
      return;
    }
  }
  const std::vector<std::string> segs = Segments(req.path);
  const RouteEntry* route = nullptr;
  bool other_method = false;
  std::vector<std::string> captures;
  for (const RouteEntry& r : routes_) {
    if (r.segments.size() != segs.size()) continue;
    std::vector<std::string> caps;
    bool match = true;
    for (size_t i = 0; i < segs.size() && match; ++i) {
      if (r.segments[i] == "*") {
        match = !segs[i].empty();
        caps.push_back(segs[i]);
      } else {
        match = r.segments[i] == segs[i];
      }
    }
    if (!match) continue;
    if (r.method != req.method) {
      other_method = true;
      continue;
    }
    route = &r;
    captures = std::move(caps);
    break;
  }
  if (!route) {
    const std::string what = req.method.substr(0, 16) + " " + req.path.substr(0, 200);
    return other_method ? answer(405, "METHOD_NOT_ALLOWED", "method not allowed: " + what)
                        : answer(404, "NOT_FOUND", "no route " + what);
  }
  Admitted a;
  a.route = static_cast<size_t>(route - routes_.data());
  a.start = std::chrono::steady_clock::now();
  if (Status auth = Authenticate(req, &a.who); !auth.ok()) {
    res.set_header("WWW-Authenticate", "Bearer");
    return answer(401, "UNAUTHENTICATED", auth.ToString());
  }
  if (req.header("Content-Type").starts_with("application/x-www-form-urlencoded") &&
      !req.body.empty()) {
    return answer(415, "UNSUPPORTED_MEDIA_TYPE",
                  "send JSON or YAML with Content-Type: application/json or application/yaml "
                  "(curl: -H 'Content-Type: application/yaml' --data-binary @job.yaml)");
  }
  for (std::string& cap : captures) req.matches.push_back(std::move(cap));
  // Most heartbeats change nothing: answered here, as a thread handoff
  // costs more than the beat itself.
  if (route->handler == &ApiServer::Heartbeat) {
    Call c{req, res, a.who, {}};
    if (HeartbeatNow(c)) {
      Count(route->name, req.method, res.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - a.start).count());
      return;
    }
  }
  adm.answered = false;
  adm.lane = route->lane;
  adm.fallback = a.who.role == Role::kAgent ? Lane::kAgent : Lane::kUser;
  if (route->handler == &ApiServer::Assignments && req.has_param("revision") &&
      req.get_param_value("revision") != "0") {
    adm.lane = Lane::kLongPoll;
  }
  // Admins are trusted and agents have their own lane; everyone else has
  // a cap on requests in flight.
  if (a.who.role != Role::kAdmin && a.who.role != Role::kAgent) adm.client = "token " + a.who.name;
  req.app = std::move(a);
}

// ---- Handling (workers) -------------------------------------------------------

void ApiServer::Handle(HttpRequest& req, HttpResponse& res) {
  const Admitted& a = std::any_cast<const Admitted&>(req.app);
  const RouteEntry& route = routes_[a.route];
  Call c{req, res, a.who, {}};
  res.status = 200;  // handlers that only set content answer 200
  c.scope.all = c.who.role != Role::kTenant;
  c.scope.queues = c.who.queues;
  (this->*route.handler)(c);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - a.start).count();
  Count(route.name, route.method, res.status, secs);
  if (res.status >= 500) {
    log_.Error("api", "request failed",
               {{"route", route.name}, {"code", int64_t{res.status}}, {"body", res.body}});
  }
}

void ApiServer::Refused(const HttpRequest& req, const HttpResponse& res) {
  const Admitted* a = std::any_cast<Admitted>(&req.app);
  const char* route = a ? routes_[a->route].name : "other";
  Count(route, req.method.substr(0, 16), res.status, 0);
  if (res.status >= 500) {
    log_.Error("api", "request failed",
               {{"route", route}, {"code", int64_t{res.status}}, {"body", res.body}});
  }
}

void ApiServer::Count(const char* route, const std::string& method, int status, double secs) {
  static const std::set<std::string> kMethods = {"GET", "POST", "PUT", "DELETE"};
  metrics_.Add("unipool_api_requests_total",
               {{"route", route},
                {"method", kMethods.contains(method) ? method : "other"},
                {"code", std::to_string(status)}});
  metrics_.Observe("unipool_api_request_seconds", {{"route", route}}, secs);
}

// ---- Authentication ---------------------------------------------------------

// Fails closed: a token file that is missing, unreadable, unsafe or broken
// revokes every token it held until it is repaired. Node tokens live in the
// store and keep working, so running jobs are not disturbed.
void ApiServer::ReloadTokens() {
  const int64_t now = NowMs();
  std::lock_guard lock(tokens_mu_);
  if (now - tokens_checked_ < 1000) return;
  tokens_checked_ = now;
  struct stat st;
  const int64_t mtime = stat(options_.tokens_path.c_str(), &st) == 0
                            ? st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec
                            : -1;
  if (mtime == tokens_ctime_) return;
  tokens_ctime_ = mtime;
  Result<TokenFile> fresh = TokenFile::Load(options_.tokens_path);
  if (!fresh.ok()) {
    tokens_ = std::make_shared<const TokenFile>();
    metrics_.Set("unipool_token_file_valid", {}, 0);
    log_.Error("auth", "token file rejected; every token it held is refused until it is fixed: " +
                           fresh.status().message());
    return;
  }
  tokens_ = std::make_shared<const TokenFile>(std::move(fresh).value());
  metrics_.Set("unipool_token_file_valid", {}, 1);
  log_.Info("auth", "token file reloaded", {{"tokens", static_cast<int64_t>(tokens_->size())}});
}

Status ApiServer::Authenticate(const HttpRequest& req, Principal* who) {
  const std::string header = req.header("Authorization");
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

}  // namespace unipool::server
