#include "cli/client.h"

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/commands.h"
#include "io/cluster_reader.h"
#include "io/yaml_fields.h"

namespace unipool::cli {
namespace {

StatusCode CodeOf(int http) {
  switch (http) {
    case 400:
    case 413:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    case 409:
      return StatusCode::kFailedPrecondition;
    case 429:
      return StatusCode::kResourceExhausted;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      return http >= 500 ? StatusCode::kUnavailable : StatusCode::kInternal;
  }
}

}  // namespace

Status ResolveClientConfig(ClientConfig* c) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (c->server.empty()) c->server = env("UNIPOOL_SERVER");
  if (c->token.empty()) c->token = env("UNIPOOL_TOKEN");
  std::string path = env("UNIPOOL_CONFIG");
  if (path.empty() && !env("HOME").empty()) path = env("HOME") + "/.config/unipool/config.yaml";
  Result<std::string> text = io::ReadFile(path);
  if (text.ok() && text->find_first_not_of(" \t\r\n") != std::string::npos) {
    Result<YAML::Node> doc = io::LoadDocument(*text, "");
    if (!doc.ok()) return InvalidArgument(io::WithFile(path, doc.status()));
    Result<io::Fields> f = io::Fields::Of(*doc, "config", {"server", "token", "caCert"});
    if (!f.ok()) return InvalidArgument(io::WithFile(path, f.status()));
    std::string server, token, ca;
    for (Status st :
         {f->String("server", &server), f->String("token", &token), f->String("caCert", &ca)}) {
      if (!st.ok()) return InvalidArgument(io::WithFile(path, st));
    }
    if (c->server.empty()) c->server = server;
    if (c->token.empty()) c->token = token;
    if (c->ca_cert.empty()) c->ca_cert = ca;
  } else if (!text.ok() && !env("UNIPOOL_CONFIG").empty()) {
    return InvalidArgument(text.status().message());
  }
  if (c->server.empty()) c->server = "http://127.0.0.1:8460";
  return server::ServerList::Parse(c->server).status();
}

namespace {

server::ServerList ServersOf(const std::string& urls) {
  Result<server::ServerList> l = server::ServerList::Parse(urls);
  return l.ok() ? *l : server::ServerList({urls});  // (checked by ResolveClientConfig)
}

// One request to `url`, following a follower's 307 to the leader.
httplib::Result Send(const std::string& url, const std::string& ca_cert, int timeout_s,
                     const std::string& method, const std::string& path,
                     const httplib::Headers& headers, const std::string& body,
                     const std::string& content_type) {
  httplib::Client http(url);
  if (!ca_cert.empty()) http.set_ca_cert_path(ca_cert.c_str());
  http.set_connection_timeout(5, 0);
  http.set_tcp_nodelay(true);
  http.set_read_timeout(timeout_s, 0);
  http.set_follow_location(true);
  return method == "GET"      ? http.Get(path, headers)
         : method == "DELETE" ? http.Delete(path, headers)
         : method == "PUT"    ? http.Put(path, headers, body, content_type)
                              : http.Post(path, headers, body, content_type);
}

}  // namespace

Client::Client(ClientConfig config)
    : config_(std::move(config)), servers_(ServersOf(config_.server)) {}

Result<Json> Client::Call(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& content_type, int timeout_s,
                          std::map<std::string, std::string>* headers_out) const {
  httplib::Headers headers;
  if (!config_.token.empty()) headers.emplace("Authorization", "Bearer " + config_.token);
  // Each server once per round; after a round without an answer, a
  // jittered backoff, for up to 15 s with several servers (a failover
  // takes the leader's TTL and a second or two). A 503 with Retry-After
  // (no leader elected yet) counts as no answer.
  const auto answered = [](const httplib::Result& r) {
    return r && !(r->status == 503 && r->has_header("Retry-After"));
  };
  const uint64_t seed = static_cast<uint64_t>(getpid()) * 2654435761u;
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::seconds(servers_.size() > 1 ? std::min(timeout_s, 15) : 0);
  httplib::Result res{nullptr, httplib::Error::Unknown};
  std::string tried;
  for (int round = 1;; ++round) {
    for (size_t k = 0; k < servers_.size() && !answered(res); ++k) {
      const std::string url = servers_.current();
      res = Send(url, config_.ca_cert, timeout_s, method, path, headers, body, content_type);
      if (answered(res)) break;
      tried =
          res ? "HTTP 503 from " + url
              : "cannot reach the server at " + url + " (" + httplib::to_string(res.error()) + ")";
      servers_.Failed(url);
    }
    if (answered(res) || std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(server::ServerList::Backoff(round, seed));
  }
  if (!res) {
    return Unavailable(servers_.size() == 1 ? tried
                                            : "cannot reach any server of " + servers_.Joined() +
                                                  " (last: " + tried + ")");
  }
  if (headers_out) {
    for (const auto& [k, v] : res->headers) (*headers_out)[k] = v;
  }
  if (res->status >= 200 && res->status < 300 &&
      res->get_header_value("Content-Type").starts_with("text/")) {
    return Json(res->body);  // text (logs, metrics): never parsed
  }
  Json j = Json::parse(res->body, nullptr, false);
  if (res->status >= 200 && res->status < 300) {
    if (j.is_discarded()) return Json(res->body);
    return j;
  }
  std::string message = "HTTP " + std::to_string(res->status);
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    message = j["error"].value("message", message);
  }
  if (res->status == 401) {
    message += config_.token.empty()
                   ? "; no token given: set UNIPOOL_TOKEN, pass --token, or put token: in "
                     "~/.config/unipool/config.yaml"
                   : "; check the token in --token, UNIPOOL_TOKEN or the config file";
  }
  return Status(CodeOf(res->status), message);
}

int ExitCodeFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidArgument:
      return kExitBadInput;
    case StatusCode::kNotFound:
      return kExitNotFound;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return kExitDenied;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    default:
      return kExitFailed;
  }
}

}  // namespace unipool::cli
