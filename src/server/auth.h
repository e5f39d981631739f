// Auth: who is calling (authentication) and what they may do (roles).
//
// Tokens come from a file the operator manages (YAML), hashed at rest:
//   tokens:
//     - name: ops            # who; shown in logs and as job owners
//       role: admin          # admin | tenant | read-only | join
//       sha256: 9f86d08...   # hex SHA-256 of the token
//     - name: team-a
//       role: tenant
//       queues: [team-a, team-a-dev]   # the queues a tenant owns
//       runAs: alice:team-a            # the Unix user[:group] its jobs run as
//     - name: rack-7
//       role: join
//       nodes: ["gpu-7-*"]             # the nodes it may register ("*": any text)
// `unipool token create` adds an entry and prints the token once.
// Agents join with a `join` token: the server gives each node its own agent
// token (kept hashed in the store); an agent token acts only on its node.
// A join token registers a node that has no live agent; re-joining a node
// whose agent is live needs that node's own token (which rotates it) or an
// admin.
//
// Roles: admin (everything), tenant (submit, see and cancel jobs of its own
// queues; read nodes and the summary), agent (its node's endpoints),
// read-only (every GET).
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"

namespace unipool::server {

enum class Role { kAdmin, kTenant, kAgent, kReadOnly, kJoin };
const char* RoleName(Role r);

struct Principal {
  std::string name;
  Role role = Role::kReadOnly;
  std::set<std::string> queues;    // tenant
  std::string node;                // agent
  std::string run_as;              // tenant, admin: "user" or "user:group"; "" = not set
  std::vector<std::string> nodes;  // join: patterns of the nodes it may register; empty = any
  // A join token may register `node` (its patterns; '*' matches any text).
  bool MayJoin(const std::string& node) const;
};

// A Unix identity as runAs names it: "user" or "user:group", each a name
// or a number ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 32 characters).
bool IsRunAs(const std::string& s);
inline constexpr const char* kRunAsRule =
    "user or user:group, each a Unix name or number of at most 32 characters";

// Hex SHA-256 of `text`.
std::string Sha256Hex(const std::string& text);
// A new random token: 32 bytes from the OS, hex.
Result<std::string> NewToken();

class TokenFile {
 public:
  // Reads and checks the file. Errors name the file, line and field;
  // kPermissionDenied when group or others may write it.
  static Result<TokenFile> Load(const std::string& path);
  // Parses the text of a token file (`source` names it in errors).
  static Result<TokenFile> Parse(const std::string& text, const std::string& source);

  // The principal for a presented token, by its hash.
  const Principal* Find(const std::string& token) const;
  size_t size() const { return by_hash_.size(); }

  // Appends an entry for `who` (name, role, queues, run_as, nodes) to the
  // file at `path` (created if missing; always left mode 0600, replaced
  // whole) and returns the new token. Errors: a tenant without queues, a
  // name in use, a name or queue outside io::kQueueNameRule, a bad runAs.
  static Result<std::string> Create(const std::string& path, const Principal& who);

 private:
  std::unordered_map<std::string, Principal> by_hash_;
};

std::optional<Role> ParseRole(const std::string& s);

}  // namespace unipool::server
