// Client: the CLI's side of the REST API. Where the server is and which
// token to present come from, first to last: flags (--server, --token),
// the environment (UNIPOOL_SERVER, UNIPOOL_TOKEN), then a config file
// ($UNIPOOL_CONFIG, else $HOME/.config/unipool/config.yaml) with keys
// `server`, `token` and `caCert`; the default server is
// http://127.0.0.1:8460. `server` may list several URLs ("URL,URL,..."):
// the servers of `unipool server --ha`; a call follows a follower's
// redirect to the leader and moves on to the next URL when one does not
// answer (server/server_list.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/base/status.h"
#include "server/server_list.h"

namespace unipool::cli {

using Json = nlohmann::json;

struct ClientConfig {
  std::string server;
  std::string token;
  std::string ca_cert;  // PEM file to trust for https
};

// Fills what flags left empty. Errors: an unreadable or malformed config file.
Status ResolveClientConfig(ClientConfig* c);

// The HTTP status of a failed call travels in the Status code:
// 400 kInvalidArgument, 401 kUnauthenticated, 403 kPermissionDenied,
// 404 kNotFound, 409 kFailedPrecondition, 504 kDeadlineExceeded (the change may
// still land), other 5xx and no connection kUnavailable.
class Client {
 public:
  // REQUIRES: ResolveClientConfig(&config) succeeded.
  explicit Client(ClientConfig config);
  // `timeout_s` bounds the whole call (long-poll watches pass more).
  // `headers`, when given, receives the answer's headers (names as sent).
  Result<Json> Call(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::string& content_type = "application/json", int timeout_s = 30,
                    std::map<std::string, std::string>* headers = nullptr) const;
  const ClientConfig& config() const { return config_; }

 private:
  ClientConfig config_;
  mutable server::ServerList servers_;
};

// The exit code for a failed call (commands.h).
int ExitCodeFor(const Status& st);

}  // namespace unipool::cli
