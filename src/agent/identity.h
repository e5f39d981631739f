// Identity: who a job's processes run as on this node, where they may work
// and what environment they start with. The server decides who
// (JobRecord::identity: the tenant token's runAs, else its queue's); the
// agent resolves that name on this node and refuses what it must not do:
//
//   - An agent running as root starts each task as the runAs user, with
//     that user's groups (or the group named), a clean environment and no
//     way to regain privileges (PR_SET_NO_NEW_PRIVS). A tenant's job with no
//     runAs does not start unless its queue allows root (allowRoot).
//   - An agent not running as root cannot switch users: a job whose runAs
//     names another user does not start; every other job runs as the
//     agent's user.
//   - A tenant's working and checkpoint directories are resolved without
//     ".." and must lie under the agent's allowed roots (--job-dirs).
//
// Errors are kFailedPrecondition with what the operator or user changes.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace unipool::agent {

// What the server says about a job's user (the assignment's "identity").
struct RunAsRequest {
  std::string run_as;  // "user" or "user:group"; "" = the agent's own user
  bool tenant = false;
  bool allow_root = false;
};

struct Identity {
  bool switch_user = false;  // the task drops to uid/gid/groups before exec
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary
  std::string user, home, shell;
  bool root() const { return uid == 0; }
};

// Resolves "user[:group]" (names or numbers) in this node's user database:
// the user's uid, primary group (or the named one), supplementary groups,
// home and shell. Errors: kFailedPrecondition "no user 'alice' on this node".
Result<Identity> LookUpUser(const std::string& run_as);

// Who a job runs as when the agent runs as `agent_uid` (see the rules at
// the top). Errors: kFailedPrecondition saying why it may not start.
Result<Identity> DecideIdentity(const RunAsRequest& req, uid_t agent_uid);

// `path` made absolute against `base` and normalized lexically ("a//b/./c"
// is "a/b/c"). Errors: kInvalidArgument when it has a ".." component.
Result<std::string> ResolveJobPath(const std::string& path, const std::string& base,
                                   const char* field);

// OK when `path` (absolute, normalized) is one of `roots` or lies under one.
// Errors: kFailedPrecondition naming `field`, the path and the roots.
Status CheckUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                       const char* field);

// The environment a task starts from, before the job's own variables:
// PATH, LANG, LC_*, TZ and TERM from the agent's (`agent_env`, as environ),
// and HOME, USER, LOGNAME and SHELL of `who`. Nothing else of the agent's
// environment (its tokens) reaches a job.
std::vector<std::pair<std::string, std::string>> BaseEnvironment(const Identity& who,
                                                                 char** agent_env);

// Creates `dir` and its missing parents as the calling process's user, the
// last one mode 0700; an existing `dir` must be that user's own directory
// (not a link) and is made 0700. For the child after it dropped privileges.
// Returns what is wrong, or "" on success.
std::string MakePrivateDirs(const std::string& dir);

}  // namespace unipool::agent
