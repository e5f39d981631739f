#include "server/http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <exception>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "io/quote.h"
#include "io/text.h"

namespace unipool::server {

// ---- Requests ----------------------------------------------------------------

bool HttpRequest::has_param(const std::string& key) const {
  for (const auto& [k, v] : params) {
    if (k == key) return true;
  }
  return false;
}

std::string HttpRequest::get_param_value(const std::string& key, size_t i) const {
  for (const auto& [k, v] : params) {
    if (k == key && i-- == 0) return v;
  }
  return "";
}

size_t HttpRequest::get_param_value_count(const std::string& key) const {
  size_t n = 0;
  for (const auto& [k, v] : params) n += k == key;
  return n;
}

std::string HttpRequest::header(const std::string& name) const {
  std::string lower = name;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto it = headers.find(lower);
  return it == headers.end() ? "" : it->second;
}

std::string ErrorBody(const char* code, const std::string& message) {
  return nlohmann::json{{"error", {{"code", code}, {"message", message}}}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool CleanText(const std::string& s, size_t* where) {
  *where = io::FirstBadText(s);
  return *where == std::string::npos;
}

namespace {

// ---- Worker lanes ------------------------------------------------------------

// A fixed set of threads over a bounded queue.
class WorkerPool {
 public:
  WorkerPool(int threads, int depth) : depth_(depth) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~WorkerPool() { Stop(); }

  // False when the queue is full or the pool stopped; with `idle_only`,
  // also when no thread is free to take it now.
  bool TrySubmit(std::function<void()> task, bool idle_only) {
    std::lock_guard lock(mu_);
    if (stopped_ || static_cast<int>(queue_.size()) >= depth_) return false;
    if (idle_only && idle_ <= static_cast<int>(queue_.size())) return false;
    queue_.push_back(std::move(task));
    cv_.notify_one();
    return true;
  }

  // Runs what is queued, then joins.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_ && threads_.empty()) return;
      stopped_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Work() {
    std::unique_lock lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopped and drained
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  const int depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stopped_ = false;
};

enum class CtxState { kReading, kRunning, kDone, kQueued };

// One request on one connection, from its headers to its completion.
struct Ctx {
  std::atomic<CtxState> state{CtxState::kReading};
  HttpRequest req;
  HttpResponse res;
  std::string client;  // holds a per-client slot while running
  MHD_Connection* conn = nullptr;
  bool too_large = false;  // the body is read and dropped, then 413
};

// Bodies over the limit but below this are read and dropped before the 413,
// so that a client that sends without waiting (no Expect: 100-continue)
// reads the answer instead of a reset; larger ones are cut at once.
constexpr uint64_t kMaxDrainBytes = 64 << 20;

HttpResponse Error(int status, const char* code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = ErrorBody(code, message);
  return r;
}

std::string PeerAddress(MHD_Connection* conn) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "";
  char buf[INET6_ADDRSTRLEN] = "";
  const sockaddr* a = info->client_addr;
  if (a->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a)->sin_addr, buf, sizeof buf);
  } else if (a->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

// Percent-decoding in place, as MHD's own but for %00 and %2F: a NUL would
// cut the C strings MHD hands over, and a decoded '/' would turn one path
// segment into two ("/v1/jobs/1%2Fevents"); both stay literal and fail the
// checks of whatever they land in.
size_t Unescape(void*, MHD_Connection*, char* s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  char* w = s;
  for (const char* r = s; *r;) {
    if (r[0] == '%' && r[1] && r[2] && hex(r[1]) >= 0 && hex(r[2]) >= 0) {
      const char v = static_cast<char>(hex(r[1]) * 16 + hex(r[2]));
      if (v != 0 && v != '/') {
        *w++ = v;
        r += 3;
        continue;
      }
    }
    *w++ = *r++;
  }
  *w = 0;
  return static_cast<size_t>(w - s);
}

}  // namespace

// ---- The server --------------------------------------------------------------

struct HttpServer::Impl {
  HttpLimits limits;
  Admit admit;
  Handle handle;
  Refused refused;
  std::string cert_pem, key_pem;
  int listen_fd = -1;
  bool keep_listener = false;  // StopAndRelease: Stop leaves listen_fd open
  MHD_Daemon* daemon = nullptr;
  std::unique_ptr<WorkerPool> lanes[3];
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;

  std::mutex clients_mu;
  std::unordered_map<std::string, int> in_flight;  // per client

  WorkerPool& lane(Lane l) { return *lanes[static_cast<int>(l)]; }

  static MHD_Result OnRequest(void* cls, MHD_Connection* conn, const char* url, const char* method,
                              const char*, const char* upload, size_t* upload_size, void** con_cls);
  static void OnCompleted(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode);

  MHD_Result Begin(MHD_Connection* conn, const char* url, const char* method, void** con_cls);
  MHD_Result Dispatch(Ctx* ctx);
  MHD_Result Answer(Ctx* ctx, const HttpResponse& res);
  HttpResponse TooLarge() const {
    return Error(413, "PAYLOAD_TOO_LARGE",
                 "body larger than " + std::to_string(limits.max_body) + " bytes");
  }
  // Fills the request from MHD; false with ctx->res set when it is bad.
  bool Decode(Ctx* ctx);
  bool TakeClientSlot(const std::string& client);
  void ReleaseClientSlot(const std::string& client);
  void Run(Ctx* ctx);
};

MHD_Result HttpServer::Impl::OnRequest(void* cls, MHD_Connection* conn, const char* url,
                                       const char* method, const char*, const char* upload,
                                       size_t* upload_size, void** con_cls) {
  Impl* s = static_cast<Impl*>(cls);
  auto* ctx = static_cast<Ctx*>(*con_cls);
  if (!ctx) return s->Begin(conn, url, method, con_cls);
  if (*upload_size > 0) {
    const size_t n = *upload_size;
    *upload_size = 0;
    if (ctx->state != CtxState::kReading || ctx->too_large) return MHD_YES;  // dropped
    if (ctx->req.body.size() + n > s->limits.max_body) {
      ctx->too_large = true;
      ctx->req.body.clear();
      ctx->req.body.shrink_to_fit();
      return MHD_YES;
    }
    ctx->req.body.append(upload, n);
    return MHD_YES;
  }
  switch (ctx->state.load()) {
    case CtxState::kReading:
      if (ctx->too_large) return s->Answer(ctx, s->TooLarge());
      return s->Dispatch(ctx);
    case CtxState::kDone:
      return s->Answer(ctx, ctx->res);
    case CtxState::kRunning:
    case CtxState::kQueued:
      return MHD_YES;
  }
  return MHD_YES;
}

MHD_Result HttpServer::Impl::Begin(MHD_Connection* conn, const char* url, const char* method,
                                   void** con_cls) {
  auto* ctx = new Ctx;
  *con_cls = ctx;
  ctx->conn = conn;
  ctx->req.method = method ? method : "";
  ctx->req.path = url ? url : "";
  if (const char* cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length")) {
    const std::string v = cl;
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
      return Answer(ctx, Error(400, "INVALID_ARGUMENT", "Content-Length: expected a number"));
    }
    if (std::stoull(v) > limits.max_body) {
      if (std::stoull(v) > kMaxDrainBytes ||
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect")) {
        return Answer(ctx, TooLarge());
      }
      ctx->too_large = true;
      return MHD_YES;
    }
    ctx->req.body.reserve(std::stoull(v));
  }
  return MHD_YES;
}

bool HttpServer::Impl::Decode(Ctx* ctx) {
  HttpRequest& req = ctx->req;
  size_t at = 0;
  auto bad = [&](const std::string& where) {
    ctx->res =
        Error(400, "INVALID_ARGUMENT",
              where + ": invalid UTF-8 or a control character at byte " + std::to_string(at));
    return false;
  };
  if (!CleanText(req.path, &at)) return bad("path");
  struct Collect {
    HttpRequest* req;
    std::string bad;
    size_t at = 0;
  } c{&req, "", 0};
  MHD_get_connection_values_n(
      ctx->conn, MHD_GET_ARGUMENT_KIND,
      [](void* cls, MHD_ValueKind, const char* k, size_t kn, const char* v,
         size_t vn) -> MHD_Result {
        auto* c = static_cast<Collect*>(cls);
        std::string key(k, kn), value = v ? std::string(v, vn) : std::string();
        if (!c->bad.empty()) return MHD_YES;
        if (!CleanText(key, &c->at)) {
          c->bad = "query parameter name";
        } else if (!CleanText(value, &c->at)) {
          c->bad = "query parameter " + io::Quote(key);
        }
        c->req->params.emplace_back(std::move(key), std::move(value));
        return MHD_YES;
      },
      &c);
  if (!c.bad.empty()) {
    at = c.at;
    return bad(c.bad);
  }
  c.bad.clear();
  MHD_get_connection_values_n(
      ctx->conn, MHD_HEADER_KIND,
      [](void* cls, MHD_ValueKind, const char* k, size_t kn, const char* v,
         size_t vn) -> MHD_Result {
        auto* c = static_cast<Collect*>(cls);
        std::string key(k, kn), value = v ? std::string(v, vn) : std::string();
        for (char& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (c->bad.empty() && !CleanText(value, &c->at)) c->bad = "header " + io::Quote(key);
        c->req->headers[key] = std::move(value);
        return MHD_YES;
      },
      &c);
  if (!c.bad.empty()) {
    at = c.at;
    return bad(c.bad);
  }
  req.peer = PeerAddress(ctx->conn);
  req.matches = {req.path};
  return true;
}

bool HttpServer::Impl::TakeClientSlot(const std::string& client) {
  if (client.empty()) return true;
  std::lock_guard lock(clients_mu);
  int& n = in_flight[client];
  if (n >= limits.max_in_flight_per_client) return false;
  ++n;
  return true;
}

void HttpServer::Impl::ReleaseClientSlot(const std::string& client) {
  if (client.empty()) return;
  std::lock_guard lock(clients_mu);
  auto it = in_flight.find(client);
  if (it != in_flight.end() && --it->second <= 0) in_flight.erase(it);
}

MHD_Result HttpServer::Impl::Dispatch(Ctx* ctx) {
  if (!Decode(ctx)) {
    refused(ctx->req, ctx->res);
    return Answer(ctx, ctx->res);
  }
  Admission adm;
  try {
    admit(ctx->req, ctx->res, adm);
  } catch (const std::exception&) {
    ctx->res = Error(500, "INTERNAL", "internal error while admitting the request");
    refused(ctx->req, ctx->res);
    return Answer(ctx, ctx->res);
  }
  if (adm.answered) return Answer(ctx, ctx->res);
  if (!TakeClientSlot(adm.client)) {
    HttpResponse r = Error(429, "RESOURCE_EXHAUSTED",
                           "too many requests in flight for " + adm.client + " (at most " +
                               std::to_string(limits.max_in_flight_per_client) + "); retry");
    r.set_header("Retry-After", "1");
    refused(ctx->req, r);
    return Answer(ctx, r);
  }
  ctx->client = adm.client;
  ctx->state = CtxState::kRunning;
  MHD_suspend_connection(ctx->conn);
  auto task = [this, ctx] { Run(ctx); };
  bool queued = false;
  if (adm.lane == Lane::kLongPoll) {
    queued = lane(Lane::kLongPoll).TrySubmit(task, /*idle_only=*/true);
    if (!queued) {
      // Every long-poll worker waits already: answer this one at once.
      ctx->req.no_wait = true;
      queued = lane(adm.fallback).TrySubmit(task, false);
    }
  } else {
    queued = lane(adm.lane).TrySubmit(task, false);
  }
  if (queued) return MHD_YES;
  MHD_resume_connection(ctx->conn);
  ReleaseClientSlot(ctx->client);
  ctx->client.clear();
  HttpResponse r =
      Error(503, "UNAVAILABLE", stopping ? "the server is stopping" : "the server is busy; retry");
  r.set_header("Retry-After", "1");
  refused(ctx->req, r);
  ctx->res = r;
  ctx->state = CtxState::kDone;
  return MHD_YES;  // answered when MHD calls again after the resume
}

void HttpServer::Impl::Run(Ctx* ctx) {
  try {
    handle(ctx->req, ctx->res);
  } catch (const std::exception& e) {
    ctx->res = Error(500, "INTERNAL", "internal error");
    refused(ctx->req, ctx->res);
  } catch (...) {
    ctx->res = Error(500, "INTERNAL", "internal error");
    refused(ctx->req, ctx->res);
  }
  ReleaseClientSlot(ctx->client);
  ctx->client.clear();
  ctx->state = CtxState::kDone;
  MHD_resume_connection(ctx->conn);
}

MHD_Result HttpServer::Impl::Answer(Ctx* ctx, const HttpResponse& res) {
  ctx->state = CtxState::kQueued;
  MHD_Response* r = MHD_create_response_from_buffer(
      res.body.size(), const_cast<char*>(res.body.data()), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  if (!res.content_type.empty()) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res.content_type.c_str());
  }
  for (const auto& [name, value] : res.headers) {
    MHD_add_response_header(r, name.c_str(), value.c_str());
  }
  const MHD_Result ok = MHD_queue_response(ctx->conn, static_cast<unsigned>(res.status), r);
  MHD_destroy_response(r);
  return ok;
}

void HttpServer::Impl::OnCompleted(void*, MHD_Connection*, void** con_cls,
                                   MHD_RequestTerminationCode) {
  delete static_cast<Ctx*>(*con_cls);
  *con_cls = nullptr;
}

// ---- Life cycle ----------------------------------------------------------------

HttpServer::HttpServer(HttpLimits limits, Admit admit, Handle handle, Refused refused)
    : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->admit = std::move(admit);
  impl_->handle = std::move(handle);
  impl_->refused = std::move(refused);
}

HttpServer::~HttpServer() {
  Stop();
  if (impl_->listen_fd >= 0) close(impl_->listen_fd);
}

Status HttpServer::SetTls(const std::string& cert_pem, const std::string& key_pem) {
  if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
    return FailedPrecondition("this libmicrohttpd was built without TLS");
  }
  impl_->cert_pem = cert_pem;
  impl_->key_pem = key_pem;
  return Status::Ok();
}

Result<int> HttpServer::Bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 ||
      !found) {
    return Unavailable("cannot bind " + host + ": not an address of this machine");
  }
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return Unavailable("cannot bind " + host + ":" + std::to_string(port) +
                       " (in use, or not an address of this machine)");
  }
  return Adopt(fd);
}

Result<int> HttpServer::Adopt(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return InvalidArgument("not a listening socket");
  }
  if (impl_->listen_fd >= 0) close(impl_->listen_fd);
  impl_->listen_fd = fd;
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

int HttpServer::StopAndRelease() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.stop_mu);
    s.keep_listener = true;
  }
  Stop();
  const int fd = s.listen_fd;
  s.listen_fd = -1;
  return fd;
}

Status HttpServer::Start() {
  Impl& s = *impl_;
  if (s.listen_fd < 0) return FailedPrecondition("HttpServer::Start before Bind");
  const HttpLimits& l = s.limits;
  s.lanes[static_cast<int>(Lane::kAgent)] =
      std::make_unique<WorkerPool>(l.agent_workers, l.queue_depth);
  s.lanes[static_cast<int>(Lane::kUser)] =
      std::make_unique<WorkerPool>(l.user_workers, l.queue_depth);
  s.lanes[static_cast<int>(Lane::kLongPoll)] =
      std::make_unique<WorkerPool>(l.long_poll_workers, l.long_poll_workers);

  std::vector<MHD_OptionItem> opts = {
      {MHD_OPTION_LISTEN_SOCKET, s.listen_fd, nullptr},
      {MHD_OPTION_THREAD_POOL_SIZE, l.event_threads, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, l.idle_timeout_s, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, l.max_connections, nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(l.max_header_bytes), nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Impl::OnCompleted), &s},
      {MHD_OPTION_UNESCAPE_CALLBACK, reinterpret_cast<intptr_t>(&Unescape), nullptr},
      {MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, nullptr},
  };
  if (l.max_connections_per_ip > 0) {
    opts.push_back({MHD_OPTION_PER_IP_CONNECTION_LIMIT, l.max_connections_per_ip, nullptr});
  }
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ITC | MHD_USE_SUPPRESS_DATE_NO_CLOCK | MHD_USE_TURBO;
  if (!s.cert_pem.empty()) {
    flags |= MHD_USE_TLS;
    opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(s.cert_pem.c_str())});
    opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(s.key_pem.c_str())});
  }
  opts.push_back({MHD_OPTION_END, 0, nullptr});
  s.daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Impl::OnRequest, &s, MHD_OPTION_ARRAY,
                              opts.data(), MHD_OPTION_END);
  if (!s.daemon) {
    return Unavailable(s.cert_pem.empty() ? "cannot start the HTTP server"
                                          : "cannot start the HTTPS server (certificate or key?)");
  }
  return Status::Ok();
}

void HttpServer::Stop() {
  Impl& s = *impl_;
  // A second caller (the destructor, while a signal handler's thread
  // stops it) waits here until the first is done.
  std::lock_guard lock(s.stop_mu);
  s.stopping = true;
  if (!s.daemon) return;
  MHD_quiesce_daemon(s.daemon);  // no new connections
  // Handlers in flight finish (long polls end at `stopping` on their side)
  // and resume their connections; then everything closes.
  for (auto& lane : s.lanes) {
    if (lane) lane->Stop();
  }
  MHD_stop_daemon(s.daemon);
  s.daemon = nullptr;
  // Quiesced, MHD gave the socket back: close it, so that the address is
  // free at once, unless StopAndRelease hands it on.
  if (s.listen_fd >= 0 && !s.keep_listener) {
    close(s.listen_fd);
    s.listen_fd = -1;
  }
}

int HttpServer::connections() const {
  if (!impl_->daemon) return 0;
  const MHD_DaemonInfo* info =
      MHD_get_daemon_info(impl_->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
  return info ? static_cast<int>(info->num_connections) : 0;
}

}  // namespace unipool::server
