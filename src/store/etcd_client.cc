#include "store/etcd_client.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <algorithm>

namespace unipool::store {
namespace {

constexpr size_t kIdlePerEndpoint = 16;

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

// Errors of an etcd member that another member may not have.
bool TryAnother(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded;
}

// Whether a request that got no answer may have reached etcd: only a
// connection that was never made says it did not.
bool MaybeSent(httplib::Error e) {
  return e != httplib::Error::Connection && e != httplib::Error::ConnectionTimeout &&
         e != httplib::Error::SSLConnection && e != httplib::Error::BindIPAddress;
}

// An answer, or why there was none.
struct Answer {
  bool ok = false;
  int status = 0;
  std::string body;
  httplib::Error error = httplib::Error::Success;
};

// POST with a JSON body. etcd's gateway sends its errors chunked with a
// trailer, which Debian 12's cpp-httplib (0.11) cannot parse: the call
// fails as a Read error (cpp-httplib issue 1486) after the status and the
// whole body were read. Such an answer is taken as it is, so etcd's own
// message ("database space exceeded", "compacted") reaches the caller.
Answer Post(httplib::Client& c, const std::string& path, std::string body) {
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = std::move(body);
  req.headers.emplace("Content-Type", "application/json");
  httplib::Response res;
  Answer a;
  a.ok = c.send(req, res, a.error);
  if (!a.ok && a.error == httplib::Error::Read && res.status >= 400 &&
      res.get_header_value("Trailer").size() > 0 && !res.body.empty() &&
      nlohmann::json::accept(res.body)) {
    a.ok = true;
  }
  a.status = res.status;
  a.body = std::move(res.body);
  return a;
}

// Splits a stream of JSON objects (the gateway writes one per line, but a
// chunk may end anywhere, and objects may follow each other without one)
// into whole objects: tracks the nesting outside strings.
class ObjectSplitter {
 public:
  // Feeds `data`; calls `on_object` with each object completed by it.
  // False when `on_object` returned false or the stream is not JSON objects.
  bool Feed(const char* data, size_t n, const std::function<bool(std::string_view)>& on_object) {
    for (size_t i = 0; i < n; ++i) {
      const char c = data[i];
      if (depth_ == 0) {
        if (c == '{') {
          depth_ = 1;
          buf_.assign(1, c);
          continue;
        }
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        return false;
      }
      buf_.push_back(c);
      if (in_string_) {
        if (escaped_)
          escaped_ = false;
        else if (c == '\\')
          escaped_ = true;
        else if (c == '"')
          in_string_ = false;
        continue;
      }
      if (c == '"')
        in_string_ = true;
      else if (c == '{' || c == '[')
        ++depth_;
      else if ((c == '}' || c == ']') && --depth_ == 0 && !on_object(buf_))
        return false;
    }
    return true;
  }

 private:
  std::string buf_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace

EtcdClient::EtcdClient(EtcdOptions options)
    : options_(std::move(options)), idle_(options_.endpoints.size()) {}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::Base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> EtcdClient::Unbase64(std::string_view text) {
  if (text.size() % 4 != 0)
    return Internal("etcd sent bad base64 (length " + std::to_string(text.size()) + ")");
  std::string out(3 * (text.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return Internal("etcd sent bad base64");
  size_t len = static_cast<size_t>(n);  // EVP_DecodeBlock counts the padding as bytes
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) --len;
  out.resize(len);
  return out;
}

int64_t EtcdClient::Int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_string()) {
    try {
      return std::stoll(it->get<std::string>());
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

std::unique_ptr<httplib::Client> EtcdClient::Connect(size_t endpoint,
                                                     std::chrono::milliseconds t) const {
  auto c = std::make_unique<httplib::Client>(options_.endpoints[endpoint], options_.cert_file,
                                             options_.key_file);
  if (!options_.ca_file.empty()) c->set_ca_cert_path(options_.ca_file);
  c->set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(t).count(),
                            (t.count() % 1000) * 1000);
  c->set_read_timeout(t.count() / 1000, (t.count() % 1000) * 1000);
  c->set_write_timeout(t.count() / 1000, (t.count() % 1000) * 1000);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // small requests: no Nagle wait for the ACK of the last one
  return c;
}

std::unique_ptr<httplib::Client> EtcdClient::Take(size_t endpoint) const {
  {
    std::lock_guard lock(mu_);
    auto& idle = idle_[endpoint];
    if (!idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      return c;
    }
  }
  return Connect(endpoint, options_.timeout);
}

void EtcdClient::Give(size_t endpoint, std::unique_ptr<httplib::Client> c) const {
  std::lock_guard lock(mu_);
  if (idle_[endpoint].size() < kIdlePerEndpoint) idle_[endpoint].push_back(std::move(c));
}

Result<EtcdClient::Json> EtcdClient::Decode(int status, const std::string& body,
                                            size_t endpoint) const {
  const std::string& at = options_.endpoints[endpoint];
  Json j = Json::parse(body, nullptr, false);
  if (status == 200) {
    if (j.is_discarded() || !j.is_object()) {
      return Internal("etcd at " + at + " answered something that is not JSON");
    }
    return j;
  }
  std::string msg = j.is_object() ? j.value("error", j.value("message", "")) : "";
  if (msg.empty()) msg = "HTTP " + std::to_string(status);
  if (Contains(msg, "database space exceeded")) {
    return Unavailable("etcd at " + at +
                       " is out of space (alarm NOSPACE): the control plane is read-only until "
                       "etcd is compacted, defragmented and the alarm disarmed (etcdctl alarm "
                       "disarm; docs/operations.md, \"etcd\")");
  }
  if (Contains(msg, "leader changed") || Contains(msg, "timed out")) {
    // Proposed, not yet committed: raft may still commit it.
    return DeadlineExceeded("etcd at " + at + ": " + msg +
                            " (no quorum: is a majority of its members up?)");
  }
  if (Contains(msg, "no leader") || Contains(msg, "not capable") || status == 503) {
    return Unavailable("etcd at " + at + ": " + msg +
                       " (no quorum: is a majority of its members up?)");
  }
  return FailedPrecondition("etcd at " + at + ": " + msg);
}

Result<EtcdClient::Json> EtcdClient::Call(const std::string& method, const Json& body) const {
  const size_t n = options_.endpoints.size();
  const size_t first = current_.load();
  Status last = Unavailable("no etcd endpoint");
  std::string tried;
  bool in_doubt = false;  // an attempt may have reached etcd without an answer
  for (size_t k = 0; k < n; ++k) {
    const size_t e = (first + k) % n;
    std::unique_ptr<httplib::Client> c = Take(e);
    Answer r = Post(*c, "/v3/" + method, body.dump());
    tried += (tried.empty() ? "" : ", ") + options_.endpoints[e];
    if (!r.ok) {
      last = Unavailable("cannot reach etcd at " + options_.endpoints[e] + " (" +
                         httplib::to_string(r.error) + ")");
      in_doubt = in_doubt || MaybeSent(r.error);
      continue;
    }
    Result<Json> j = Decode(r.status, r.body, e);
    Give(e, std::move(c));
    if (!j.ok() && TryAnother(j.status())) {
      last = j.status();
      in_doubt = in_doubt || j.status().code() == StatusCode::kDeadlineExceeded;
      continue;
    }
    current_.store(e);
    return j;
  }
  const StatusCode code = in_doubt ? StatusCode::kDeadlineExceeded : last.code();
  if (n == 1) return Status(code, last.message());
  return Status(code, last.message() + " (tried " + tried + ")");
}

Result<EtcdClient::Json> EtcdClient::CallAt(size_t endpoint, const std::string& method,
                                            const Json& body,
                                            std::chrono::milliseconds timeout) const {
  std::unique_ptr<httplib::Client> c = Connect(endpoint, timeout);
  Answer r = Post(*c, "/v3/" + method, body.dump());
  if (!r.ok) {
    return Status(MaybeSent(r.error) ? StatusCode::kDeadlineExceeded : StatusCode::kUnavailable,
                  "cannot reach etcd at " + options_.endpoints[endpoint] + " (" +
                      httplib::to_string(r.error) + ")");
  }
  return Decode(r.status, r.body, endpoint);
}

Status EtcdClient::Stream(const std::string& method, const Json& body,
                          std::chrono::milliseconds idle,
                          const std::function<bool(const Json&)>& on_message) const {
  const size_t n = options_.endpoints.size();
  const size_t first = current_.load();
  Status last = Unavailable("no etcd endpoint");
  for (size_t k = 0; k < n; ++k) {
    const size_t e = (first + k) % n;
    std::unique_ptr<httplib::Client> c = Connect(e, options_.timeout);
    c->set_read_timeout(idle.count() / 1000, (idle.count() % 1000) * 1000);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return Aborted("etcd stream cancelled");
      streaming_ = c.get();
    }
    bool answered = false, stopped = false;  // some bytes came; on_message said stop
    ObjectSplitter split;
    std::string error_body;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v3/" + method;
    req.body = body.dump();
    req.headers.emplace("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
      answered = true;
      return split.Feed(data, len, [&](std::string_view object) {
        const Json j = Json::parse(object, nullptr, false);
        if (j.is_object() && j.contains("error")) {  // {"error": {"message": ...}} or its text
          const Json& err = j["error"];
          const std::string msg = err.is_object()   ? err.value("message", "")
                                  : err.is_string() ? err.get<std::string>()
                                                    : "";
          error_body = Json{{"error", msg.empty() ? err.dump() : msg}}.dump();
          return false;
        }
        if (!j.is_object() || !on_message(j)) {
          stopped = j.is_object();
          return false;
        }
        return true;
      });
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    c->send(req, res, error);
    bool cancelled;
    {
      std::lock_guard lock(mu_);
      streaming_ = nullptr;
      cancelled = cancelled_;
    }
    if (cancelled) return Aborted("etcd stream cancelled");
    if (stopped) return Status::Ok();
    if (!error_body.empty() || res.status >= 400) {
      Result<Json> j = Decode(res.status >= 400 ? res.status : 500,
                              error_body.empty() ? res.body : error_body, e);
      last = j.ok() ? Unavailable("etcd at " + options_.endpoints[e] + " ended the stream")
                    : j.status();
      if (!TryAnother(last) || answered) return last;
      continue;
    }
    if (answered) {
      current_.store(e);
      return Unavailable("etcd stream from " + options_.endpoints[e] + " ended (" +
                         httplib::to_string(error) + ")");
    }
    last = Unavailable("cannot reach etcd at " + options_.endpoints[e] + " (" +
                       httplib::to_string(error) + ")");
  }
  return last;
}

void EtcdClient::Cancel() const {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (streaming_ != nullptr) streaming_->stop();
}

}  // namespace unipool::store
