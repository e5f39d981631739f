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
// `unipool token create` adds an entry and prints the token once.
// Agents join with a `join` token: the server gives each node its own agent
// token (kept hashed in the store); an agent token acts only on its node.
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
  std::set<std::string> queues;  // tenant
  std::string node;              // agent
};

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

  // Appends an entry to the file at `path` (created if missing; always left
  // mode 0600, replaced whole) and returns the new token. Errors: bad role,
  // a tenant without queues, a name in use, a name or queue outside
  // io::kQueueNameRule.
  static Result<std::string> Create(const std::string& path, const std::string& name, Role role,
                                    const std::vector<std::string>& queues);

 private:
  std::unordered_map<std::string, Principal> by_hash_;
};

std::optional<Role> ParseRole(const std::string& s);

}  // namespace unipool::server
