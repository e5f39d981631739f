#include "server/follower.h"

#include "io/cluster_reader.h"
#include "io/text.h"

namespace unipool::server {
namespace {

// The request's path and query, percent-encoded again (they arrive decoded).
std::string Target(const HttpRequest& req) {
  std::string out;
  for (size_t at = 0; at < req.path.size();) {
    const size_t slash = req.path.find('/', at);
    const size_t end = slash == std::string::npos ? req.path.size() : slash;
    out += io::UrlEncode(std::string_view(req.path).substr(at, end - at));
    if (slash != std::string::npos) out += '/';
    at = end + 1;
  }
  for (size_t i = 0; i < req.params.size(); ++i) {
    out += (i ? "&" : "?") + io::UrlEncode(req.params[i].first) + "=" +
           io::UrlEncode(req.params[i].second);
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
  res.set_header("Location", leader + Target(req));
  res.body = ErrorBody("REDIRECT", "this server follows; the leader is " + leader);
}

}  // namespace unipool::server
