// FollowerFront: what a server that is not the leader serves (`unipool
// server --ha`, docs/operations.md "High availability"). Servers share one
// etcd; the elected leader runs the control plane, the others wait to take
// over and meanwhile send every client to the leader:
//   - every API request: 307 Temporary Redirect to the leader's URL, same
//     path and query (a 307 keeps the method and body; the CLI and agents
//     follow it, and fail over to the next server when one does not answer);
//   - no leader elected yet: 503 with Retry-After: 1;
//   - GET /healthz: 200 (the process is fine); GET /readyz: 503 "follower of
//     URL", so that a load balancer sends traffic to the leader only.
// Every answer is made on the event loop: no worker, no store, no lock.
//
// Thread safety: Bind/Start/Stop from one thread; `leader` is called on the
// event loops.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/http.h"

namespace unipool::server {

class FollowerFront {
 public:
  // `leader` returns the leader's URL, or "" when there is none.
  FollowerFront(std::function<std::string()> leader, HttpLimits limits);
  ~FollowerFront();

  // PEM files: HTTPS, as the leader serves. Before Bind.
  Status SetTls(const std::string& cert_file, const std::string& key_file);
  Result<int> Bind(const std::string& host, int port);
  Status Start();
  void Stop();
  // Stops answering and returns the listening socket (for the server that
  // takes over on this address; connections wait in its backlog meanwhile).
  int StopAndRelease();

 private:
  void Answer(const HttpRequest& req, HttpResponse& res) const;

  std::function<std::string()> leader_;
  std::unique_ptr<HttpServer> http_;
};

}  // namespace unipool::server
