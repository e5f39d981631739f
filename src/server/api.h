// ApiServer: the REST API (/v1, docs/api.md) over HTTP or HTTPS, on top of
// the ControlPlane. Every route authenticates the caller (bearer token),
// checks its role, validates the request (unknown query parameters and
// fields are errors; sizes bounded) and answers JSON. Errors are
//   {"error": {"code": "INVALID_ARGUMENT", "message": "spec.gpus: ..."}}
// with 400 (bad input), 401 (no or unknown token), 403 (role), 404 (no such
// thing, or not visible to the caller), 405 (a known path, another method),
// 409 (conflict with the current state), 413 (body too large), 415 (a form
// body), 429 (a limit; Retry-After says when to retry), 503 (store failed,
// or busy: Retry-After).
//
// Also: GET /healthz and /readyz (no token), GET /metrics (admin and
// read-only tokens) in the Prometheus text format, with request counts and
// latencies by route and code.
//
// The transport is HttpServer (http.h): an event loop owns connections;
// routing, authentication and the choice of worker lane happen there
// (Admit), the handlers run on the lane's workers (Handle). The handlers of
// each resource live in their own file: api_jobs.cc, api_nodes.cc,
// api_cluster.cc; api_call.h is the request helper they share.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/auth.h"
#include "server/control.h"
#include "server/http.h"

namespace unipool::server {

struct ApiOptions {
  std::string tokens_path;  // the token file (re-read when it changes)
  std::string tls_cert;     // both set: HTTPS
  std::string tls_key;
  HttpLimits limits;
  // Outage grace on (ControlOptions::outage_grace): a heartbeat asking for
  // peers (?peers=1) is answered with the live nodes' agents and a secret
  // they ask each other with.
  bool peer_evidence = false;
};

using Json = nlohmann::json;

class ApiServer {
 public:
  ApiServer(ControlPlane& control, Metrics& metrics, Logger& log, ApiOptions options);
  ~ApiServer();

  // Reads the token file and sets up routes. Errors: token file, TLS files.
  Status Init();
  // Binds; port 0 picks a free one. Returns the port.
  Result<int> Bind(const std::string& host, int port);
  // Serves on a listening socket handed over (HttpServer::Adopt).
  Result<int> Adopt(int fd);
  // Serves until Stop(). REQUIRES: Bind succeeded.
  void Serve();
  void Stop();

  static void DeclareMetrics(Metrics& m);

 private:
  struct Call;
  using Handler = void (ApiServer::*)(Call&);
  struct RouteEntry {
    std::string method;
    std::vector<std::string> segments;  // "*" captures one segment
    const char* name;                   // the route's label in metrics
    Handler handler;
    Lane lane;
  };
  void Route(const char* method, const std::string& pattern, const char* name, Handler h,
             Lane lane = Lane::kUser);
  // On the event loop: route, authenticate, pick the lane.
  void Admit(HttpRequest& req, HttpResponse& res, Admission& adm);
  // On a worker: the route's handler.
  void Handle(HttpRequest& req, HttpResponse& res);
  void Refused(const HttpRequest& req, const HttpResponse& res);
  void Count(const char* route, const std::string& method, int status, double secs);
  Status Authenticate(const HttpRequest& req, Principal* who);
  void ReloadTokens();

  // Handlers.
  void Summary(Call& c);
  void Metrics_(Call& c);
  void SubmitJob(Call& c);
  void ListJobs(Call& c);
  void GetJob(Call& c);
  void CancelJob(Call& c);
  void JobEvents(Call& c);
  void ExplainJob(Call& c);
  void DiagnoseJob(Call& c);
  void ReportJob(Call& c);
  void ListNodes(Call& c);
  void GetNode(Call& c);
  void NodeAction(Call& c);
  void JoinNode(Call& c);
  void Heartbeat(Call& c);
  // A heartbeat on the event loop (ControlPlane::RenewLease): true when
  // answered (renewed, or refused as bad); false: run Heartbeat on a worker.
  bool HeartbeatNow(Call& c);
  bool ReadHeartbeat(Call& c, ControlPlane::HeartbeatInfo* info);
  void ReplyHeartbeat(Call& c);
  void Assignments(Call& c);
  void JobLogs(Call& c);
  Json AssignmentJson(const JobRecord& j);
  void ListQueues(Call& c);
  void GetQueue(Call& c);
  void PutQueue(Call& c);
  void Watch(Call& c);
  void TopologyView(Call& c);
  void JobProgress(Call& c);

  ControlPlane& control_;
  Metrics& metrics_;
  Logger& log_;
  ApiOptions options_;
  std::string peer_secret_;  // this server process's; agents keep it through an outage
  std::unique_ptr<HttpServer> http_;
  std::vector<RouteEntry> routes_;
  std::mutex tokens_mu_;
  std::shared_ptr<const TokenFile> tokens_;
  int64_t tokens_ctime_ = 0;  // of the file read last: a change of content or mode reloads
  int64_t tokens_checked_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex serve_mu_;
  std::condition_variable serve_cv_;
};

}  // namespace unipool::server
