// ApiServer: the REST API (/v1, docs/api.md) over HTTP or HTTPS, on top of
// the ControlPlane. Every route authenticates the caller (bearer token),
// checks its role, validates the request (unknown query parameters and
// fields are errors; sizes bounded) and answers JSON. Errors are
//   {"error": {"code": "INVALID_ARGUMENT", "message": "spec.gpus: ..."}}
// with 400 (bad input), 401 (no or unknown token), 403 (role), 404 (no such
// thing, or not visible to the caller), 409 (conflict with the current
// state), 413 (body too large), 503 (store failed).
//
// Also: GET /healthz and /readyz (no token), GET /metrics (admin and
// read-only tokens) in the Prometheus text format, with request counts and
// latencies by route and code.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/auth.h"
#include "server/control.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace unipool::server {

struct ApiOptions {
  std::string tokens_path;  // the token file (re-read when it changes)
  std::string tls_cert;     // both set: HTTPS
  std::string tls_key;
  int threads = 256;  // long polls hold a thread each, at most half of them
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
  // Serves until Stop(). REQUIRES: Bind succeeded.
  void Serve();
  void Stop();

  static void DeclareMetrics(Metrics& m);

 private:
  struct Call;
  using Handler = void (ApiServer::*)(Call&);
  void Route(const char* method, const std::string& pattern, const char* name, Handler h);
  Status Authenticate(const httplib::Request& req, Principal* who);
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
  void ReportJob(Call& c);
  void ListNodes(Call& c);
  void GetNode(Call& c);
  void NodeAction(Call& c);
  void JoinNode(Call& c);
  void Heartbeat(Call& c);
  void Assignments(Call& c);
  void JobLogs(Call& c);
  Json AssignmentJson(const JobRecord& j);
  void ListQueues(Call& c);
  void GetQueue(Call& c);
  void PutQueue(Call& c);
  void Watch(Call& c);

  ControlPlane& control_;
  Metrics& metrics_;
  Logger& log_;
  ApiOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::mutex tokens_mu_;
  std::shared_ptr<const TokenFile> tokens_;
  int64_t tokens_mtime_ = 0;
  int64_t tokens_checked_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> long_polls_{0};
};

}  // namespace unipool::server
