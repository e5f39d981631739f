// LocalEtcd: etcd members started on this machine, on loopback, for
// `unipool up --ha` and the tests (etcd from Debian's etcd-server package).
// Each member keeps its data in DIR/mI and writes its log to DIR/mI.log;
// ports are chosen free at the first start and kept (DIR/ports) for
// restarts of a member and later starts in the same directory.
//
// Thread safety: none; one owner.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace unipool::store {

// A loopback port that was free a moment ago (the kernel's pick for port 0).
int FreeLoopbackPort();

class LocalEtcd {
 public:
  // Starts `members` members in `dir` (created) and waits until they have
  // elected a leader. Errors: no `etcd` binary (install etcd-server), a
  // member that exits or no leader within 30 s (the message quotes its log).
  // `flags`: more of etcd's flags for every member (e.g. a small
  // --quota-backend-bytes).
  static Result<std::unique_ptr<LocalEtcd>> Start(const std::string& dir, int members,
                                                  const std::string& binary = "etcd",
                                                  std::vector<std::string> flags = {});
  ~LocalEtcd();  // stops every member (SIGTERM, then SIGKILL after 5 s)

  // "http://127.0.0.1:PORT" of each member, in member order.
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  void Kill(int member);       // SIGKILL; the member is down until Restart
  Status Restart(int member);  // starts a member that was killed again, with its data
  // Waits (up to `seconds`) until the members up answer with a leader.
  Status WaitForLeader(int seconds) const;

 private:
  LocalEtcd() = default;
  Status Spawn(int member);

  std::string dir_, binary_, token_, initial_cluster_;
  std::vector<std::string> flags_;
  std::vector<int> client_ports_, peer_ports_;
  std::vector<std::string> endpoints_;
  std::vector<pid_t> pids_;  // 0: down
};

}  // namespace unipool::store
