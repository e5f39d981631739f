#include "server/follower.h"

#include "io/cluster_reader.h"

namespace unipool::server {
namespace {

// The request's query string, as received ("" when none).
std::string Query(const HttpRequest& req) {
  std::string q;
  for (const auto& [k, v] : req.params) {
    q += (q.empty() ? "?" : "&") + k + "=" + v;
  }
  return q;
}

// Percent-encodes what a URL's path and query may not hold as is.
std::string Escape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) ||
        std::string_view("-._~/?&=:,").find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

FollowerFront::FollowerFront(std::function<std::string()> leader, HttpLimits limits)
    : leader_(std::move(leader)) {
  http_ = std::make_unique<HttpServer>(
      limits,
      [this](HttpRequest& req, HttpResponse& res, Admission& adm) {
        Answer(req, res);
        adm.answered = true;
      },
      [](HttpRequest&, HttpResponse& res) { res.status = 500; },
      [](const HttpRequest&, const HttpResponse&) {});
}

FollowerFront::~FollowerFront() { Stop(); }

Status FollowerFront::SetTls(const std::string& cert_file, const std::string& key_file) {
  Result<std::string> cert = io::ReadFile(cert_file);
  if (!cert.ok()) return InvalidArgument("TLS certificate: " + cert.status().message());
  Result<std::string> key = io::ReadFile(key_file);
  if (!key.ok()) return InvalidArgument("TLS key: " + key.status().message());
  return http_->SetTls(*cert, *key);
}

Result<int> FollowerFront::Bind(const std::string& host, int port) {
  return http_->Bind(host, port);
}

Status FollowerFront::Start() { return http_->Start(); }

void FollowerFront::Stop() {
  if (http_) http_->Stop();
}

int FollowerFront::StopAndRelease() { return http_->StopAndRelease(); }

void FollowerFront::Answer(const HttpRequest& req, HttpResponse& res) const {
  const std::string leader = leader_();
  if (req.path == "/healthz") {
    res.set_content("ok (follower)\n", "text/plain");
    return;
  }
  if (leader.empty()) {
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.body = ErrorBody("UNAVAILABLE", "no leader is elected yet; retry in a second");
    return;
  }
  if (req.path == "/readyz") {
    res.status = 503;
    res.set_content("follower of " + leader + "\n", "text/plain");
    return;
  }
  res.status = 307;
  res.set_header("Location", leader + Escape(req.path + Query(req)));
  res.body = ErrorBody("REDIRECT", "this server follows; the leader is " + leader);
}

}  // namespace unipool::server
