// ServerList: the control plane's URLs as a client knows them ("URL,URL,..."
// in $UNIPOOL_SERVER or an agent's --server), tried in turn. With `unipool
// server --ha` one of them leads and the others redirect to it (307, which
// clients follow); when the one a client uses stops answering, the client
// moves on to the next, after a jittered backoff once it went round them all.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace unipool::server {

class ServerList {
 public:
  // Errors: an empty list, or a URL that is not http://HOST:PORT or
  // https://HOST:PORT (the message names it).
  static Result<ServerList> Parse(const std::string& urls);
  // The URLs as given. REQUIRES: not empty.
  explicit ServerList(std::vector<std::string> urls) : urls_(std::move(urls)) {}

  ServerList(const ServerList& o) : urls_(o.urls_), index_(o.index_.load()) {}
  ServerList& operator=(const ServerList& o) {
    urls_ = o.urls_;
    index_ = o.index_.load();
    return *this;
  }

  // The URL to use now.
  std::string current() const { return urls_[index_.load() % urls_.size()]; }
  // `failed` did not answer: the next one becomes current (unless another
  // caller moved on already). Returns true when that completed a round of
  // every URL (time to back off).
  bool Failed(const std::string& failed);
  size_t size() const { return urls_.size(); }
  // "URL, URL, ..." for messages.
  std::string Joined() const;

  // How long to wait before round `round` (1, 2, ...) of the list: 100 ms
  // doubling up to 2 s, each time between half and all of it (jitter from
  // `seed`, so clients that lost the same server do not return in step).
  static std::chrono::milliseconds Backoff(int round, uint64_t seed);

 private:
  std::vector<std::string> urls_;
  std::atomic<size_t> index_{0};
};

}  // namespace unipool::server
