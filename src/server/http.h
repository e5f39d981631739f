// HttpServer: the API's transport. An event loop (libmicrohttpd on epoll)
// owns every connection; handlers run on worker pools ("lanes"), so a
// connection costs a thread only while its request is being handled.
//
// Why not a thread per connection: a client that sends its headers slowly,
// or keeps an idle keep-alive connection open, must not hold a thread that
// an agent's heartbeat needs (issue: 300 slow connections fenced every
// node). Here:
//   - a connection that sends nothing for `idle_timeout` is closed, during
//     its headers, its body or between keep-alive requests;
//   - a request reaches a worker only once its headers and body are in;
//   - lanes keep traffic classes apart: agents' heartbeats and reports have
//     their own workers, user traffic cannot take them; long polls have
//     their own and are answered at once when all are busy;
//   - each client (token, or address when there is none) has a cap on
//     requests in flight; past it, 429 with Retry-After;
//   - a full lane answers 503 with Retry-After, never queues without bound.
//
// Requests are decoded and checked before any handler sees them: the path,
// every query parameter and every header used is valid UTF-8 without
// control characters, else 400 naming the place. A handler that throws
// gets a 500 and a log line with its route; the process never aborts.
//
// Thread safety: Start/Stop from one thread; handlers run concurrently.
#pragma once

#include <any>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace unipool::server {

struct HttpRequest {
  std::string method;
  std::string path;                                         // percent-decoded
  std::vector<std::pair<std::string, std::string>> params;  // query, in order
  std::map<std::string, std::string> headers;               // names lowercased
  std::string body;
  std::string peer;                  // the client's address
  std::vector<std::string> matches;  // route captures; [0] is the path
  bool no_wait = false;              // a long poll that must answer at once
  std::any app;                      // what the application's Admit found

  bool has_param(const std::string& key) const;
  // The i-th value of `key`, or "".
  std::string get_param_value(const std::string& key, size_t i = 0) const;
  size_t get_param_value_count(const std::string& key) const;
  // "" when absent. `name` in any case.
  std::string header(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;

  void set_content(std::string b, std::string type) {
    body = std::move(b);
    content_type = std::move(type);
  }
  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

// Which workers run a request.
enum class Lane { kAgent, kUser, kLongPoll };

struct HttpLimits {
  int event_threads = 2;        // epoll loops that own the connections
  int agent_workers = 32;       // heartbeats, reports, joins, assignments
  int user_workers = 64;        // everything else
  int long_poll_workers = 128;  // watch and assignments long polls
  int queue_depth = 4096;       // requests waiting per lane; then 503
  int idle_timeout_s = 10;      // nothing received for this long: closed
  int max_connections = 16384;
  int max_connections_per_ip = 0;  // 0: no cap (agents often share NAT)
  int max_in_flight_per_client = 32;
  size_t max_body = 1 << 20;
  size_t max_header_bytes = 32 << 10;
};

// What the application decides about a request before it is queued, on the
// event loop (so it must be quick and must not block).
struct Admission {
  Lane lane = Lane::kUser;
  // For a long poll that finds every long-poll worker busy: where it runs,
  // answered at once (HttpRequest::no_wait).
  Lane fallback = Lane::kUser;
  // Requests in flight per client are capped when set ("" = no cap: admins
  // and agents, who have their own lanes or are trusted).
  std::string client;
  // Set to answer at once without a worker (401, 404, /healthz).
  bool answered = false;
};

class HttpServer {
 public:
  using Admit = std::function<void(HttpRequest&, HttpResponse&, Admission&)>;
  using Handle = std::function<void(HttpRequest&, HttpResponse&)>;
  // Called for a request that found a full lane or an exhausted client, or
  // whose handler threw: for metrics and logs.
  using Refused = std::function<void(const HttpRequest&, const HttpResponse&)>;

  HttpServer(HttpLimits limits, Admit admit, Handle handle, Refused refused);
  ~HttpServer();

  // PEM text of the certificate chain and key: HTTPS. Before Bind.
  Status SetTls(const std::string& cert_pem, const std::string& key_pem);
  // Binds and listens (backlog 4096); port 0 picks a free one.
  Result<int> Bind(const std::string& host, int port);
  // Serves on `fd`, a listening socket another HttpServer released (a
  // follower handing its address to the leader it became: connections that
  // arrive meanwhile wait in the socket's backlog). Returns its port.
  // Takes ownership.
  Result<int> Adopt(int fd);
  // Stop(), keeping the listening socket open: returns it (the caller
  // owns it), or -1.
  int StopAndRelease();
  // Starts the event loops and workers; returns at once.
  Status Start();
  // Stops accepting, waits for handlers in flight, closes. Idempotent; a
  // concurrent second call returns once the first is done.
  void Stop();

  int connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// {"error": {"code": CODE, "message": MESSAGE}}: the body of every error
// answer (bytes that are not UTF-8 are replaced, never thrown on).
std::string ErrorBody(const char* code, const std::string& message);

// True when `s` is valid UTF-8 without C0 control characters (tab allowed)
// or DEL; else sets *where to the byte offset of the first bad byte.
bool CleanText(const std::string& s, size_t* where);

}  // namespace unipool::server
