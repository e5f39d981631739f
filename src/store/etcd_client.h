// EtcdClient: etcd's v3 API through its JSON gateway (POST /v3/...), over
// the HTTP client the server already uses. Internal to store/: the etcd
// backend (etcd_store.cc), the leader election (election.h) and LocalEtcd
// use it.
//
// Why the gateway and not gRPC: Debian 12 packages cpp-httplib and
// nlohmann-json, which unipool already builds with; its gRPC C++ packages
// would add protobuf code generation to the build for the few calls used
// here (range, txn, lease grant/keep-alive/revoke, status). The gateway is
// part of every etcd server since 3.4 (docs/architecture.md).
//
// Endpoints: calls go to the endpoint that answered last; on a connection
// failure (or an etcd member that has no leader) the next one is tried,
// each once per call. Keys and values are bytes: the wire carries them in
// base64, this class in plain strings.
//
// Thread safety: every method may be called from any thread; each call
// takes a connection of its own from a small pool.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "store/store.h"

namespace httplib {
class Client;
}

namespace unipool::store {

class EtcdClient {
 public:
  using Json = nlohmann::json;

  // REQUIRES: options.endpoints is not empty.
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();

  // POST /v3/<method> with `body`. Errors: kUnavailable when no endpoint
  // answers, or etcd has no quorum, or it is out of space (the messages say
  // which and what to do); kDeadlineExceeded instead when the request may
  // have reached etcd (sent without an answer, or proposed and not yet
  // committed): a write may still land; kFailedPrecondition when etcd refuses the
  // request (its message, e.g. a compacted revision), kInternal for an
  // answer that is not JSON.
  Result<Json> Call(const std::string& method, const Json& body) const;
  // The same call to one endpoint only (maintenance acts per member), with
  // its own timeout (a defragmentation takes seconds on a big database).
  // REQUIRES: endpoint < endpoints().size().
  Result<Json> CallAt(size_t endpoint, const std::string& method, const Json& body,
                      std::chrono::milliseconds timeout) const;
  const std::vector<std::string>& endpoints() const { return options_.endpoints; }

  // A server-streaming call (watch): POST /v3/<method> with `body`, then
  // `on_message` gets each JSON object of the answer as it arrives (false
  // from it ends the call). Tries the endpoints as Call does until one
  // answers; then returns when the stream ends or breaks, `idle` passes
  // without a byte, or Cancel() (errors: kUnavailable; kAborted once cancelled).
  // One stream at a time per client.
  Status Stream(const std::string& method, const Json& body, std::chrono::milliseconds idle,
                const std::function<bool(const Json&)>& on_message) const;
  // Ends the Stream in progress, and every later one. Any thread.
  void Cancel() const;

  static std::string Base64(std::string_view bytes);
  static Result<std::string> Unbase64(std::string_view text);
  // An int64 field of an answer (the gateway writes them as strings, and
  // leaves zeros out); 0 when absent.
  static int64_t Int(const Json& j, const char* key);

 private:
  std::unique_ptr<httplib::Client> Connect(size_t endpoint,
                                           std::chrono::milliseconds timeout) const;
  std::unique_ptr<httplib::Client> Take(size_t endpoint) const;
  void Give(size_t endpoint, std::unique_ptr<httplib::Client> c) const;
  Result<Json> Decode(int status, const std::string& body, size_t endpoint) const;

  const EtcdOptions options_;
  mutable std::atomic<size_t> current_{0};
  mutable std::mutex mu_;
  mutable std::vector<std::vector<std::unique_ptr<httplib::Client>>> idle_;  // per endpoint
  mutable httplib::Client* streaming_ = nullptr;  // under mu_: the Stream in progress
  mutable bool cancelled_ = false;                // under mu_
};

}  // namespace unipool::store
