#include "agent/identity.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace unipool::agent {
namespace {

bool IsNumber(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

// The passwd entry of a name or uid, copied out (getpwnam_r's buffer).
bool FindUser(const std::string& who, Identity* out) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  if (IsNumber(who)) {
    getpwuid_r(static_cast<uid_t>(std::stoul(who)), &pw, buf.data(), buf.size(), &found);
  } else {
    getpwnam_r(who.c_str(), &pw, buf.data(), buf.size(), &found);
  }
  if (found == nullptr) return false;
  out->uid = pw.pw_uid;
  out->gid = pw.pw_gid;
  out->user = pw.pw_name;
  out->home = pw.pw_dir;
  out->shell = pw.pw_shell;
  return true;
}

bool FindGroup(const std::string& which, gid_t* out) {
  if (IsNumber(which)) {
    *out = static_cast<gid_t>(std::stoul(which));
    return true;
  }
  std::vector<char> buf(16384);
  group gr{}, *found = nullptr;
  getgrnam_r(which.c_str(), &gr, buf.data(), buf.size(), &found);
  if (found == nullptr) return false;
  *out = gr.gr_gid;
  return true;
}

std::vector<gid_t> GroupsOf(const std::string& user, gid_t gid) {
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(user.c_str(), gid, groups.data(), &n) < 0) n = 0;
  }
  groups.resize(n);
  return groups;
}

}  // namespace

Result<Identity> LookUpUser(const std::string& run_as) {
  const size_t colon = run_as.find(':');
  const std::string user = run_as.substr(0, colon);
  Identity id;
  if (!FindUser(user, &id)) {
    if (!IsNumber(user)) {
      return FailedPrecondition("runAs " + run_as + ": no user '" + user +
                                "' on this node (create it, or give the token or queue an "
                                "existing runAs)");
    }
    id.uid = static_cast<uid_t>(std::stoul(user));  // a bare uid: its own group
    id.gid = static_cast<gid_t>(id.uid);
    id.user = user;
    id.home = "/";
    id.shell = "/bin/sh";
  }
  if (colon != std::string::npos && !FindGroup(run_as.substr(colon + 1), &id.gid)) {
    return FailedPrecondition("runAs " + run_as + ": no group '" + run_as.substr(colon + 1) +
                              "' on this node");
  }
  id.groups = GroupsOf(id.user, id.gid);  // the user's groups, with gid (named or primary)
  id.switch_user = true;
  return id;
}

Result<Identity> DecideIdentity(const RunAsRequest& req, uid_t agent_uid) {
  Identity self;
  FindUser(std::to_string(agent_uid), &self);
  self.uid = agent_uid;
  self.gid = getgid();
  if (req.run_as.empty()) {
    if (agent_uid == 0 && req.tenant && !req.allow_root) {
      return FailedPrecondition(
          "refused: this tenant's job names no runAs and would run as root; give the tenant's "
          "token (runAs) or its queue (runAs) a Unix user, or let the queue allow root "
          "(allowRoot: true)");
    }
    return self;
  }
  Result<Identity> who = LookUpUser(req.run_as);
  if (!who.ok()) return who.status();
  if (agent_uid == 0) {
    if (who->uid == 0 && req.tenant && !req.allow_root) {
      return FailedPrecondition("refused: runAs " + req.run_as +
                                " is root; a tenant's job runs as root only where its queue "
                                "allows it (allowRoot: true)");
    }
    return who;
  }
  if (who->uid != agent_uid) {
    return FailedPrecondition("runAs " + req.run_as + ": this agent runs as uid " +
                              std::to_string(agent_uid) +
                              " and cannot switch users; run the agent as root");
  }
  return self;
}

Result<std::string> ResolveJobPath(const std::string& path, const std::string& base,
                                   const char* field) {
  const std::string whole = path.starts_with("/") ? path : base + "/" + path;
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= whole.size()) {
    size_t end = whole.find('/', start);
    if (end == std::string::npos) end = whole.size();
    const std::string part = whole.substr(start, end - start);
    if (part == "..") {
      return InvalidArgument(std::string(field) + ": '" + path +
                             "' has a '..' component; give the directory itself");
    }
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

Status CheckUnderRoots(const std::string& path, const std::vector<std::string>& roots,
                       const char* field) {
  std::string listed;
  for (const std::string& root : roots) {
    if (root == "/" || path == root || path.starts_with(root + "/")) return Status::Ok();
    listed += (listed.empty() ? "" : ", ") + root;
  }
  return FailedPrecondition(std::string(field) + ": " + path +
                            " is outside the directories this node lets jobs use (" + listed +
                            "; the agent's --job-dirs)");
}

std::vector<std::pair<std::string, std::string>> BaseEnvironment(const Identity& who,
                                                                 char** agent_env) {
  std::vector<std::pair<std::string, std::string>> out;
  bool path = false;
  for (char** e = agent_env; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    if (name == "PATH" || name == "LANG" || name == "TZ" || name == "TERM" ||
        name.starts_with("LC_")) {
      out.emplace_back(name, kv.substr(eq + 1));
      path = path || name == "PATH";
    }
  }
  if (!path)
    out.emplace_back("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (!who.home.empty()) out.emplace_back("HOME", who.home);
  if (!who.user.empty()) {
    out.emplace_back("USER", who.user);
    out.emplace_back("LOGNAME", who.user);
  }
  if (!who.shell.empty()) out.emplace_back("SHELL", who.shell);
  return out;
}

std::string MakePrivateDirs(const std::string& dir) {
  for (size_t slash = dir.find('/', 1); slash != std::string::npos;
       slash = dir.find('/', slash + 1)) {
    const std::string parent = dir.substr(0, slash);
    if (mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
      return parent + ": " + std::strerror(errno);
    }
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return dir + ": " + std::strerror(errno);
  // One that was there already must be this user's own directory (not a
  // link, not another user's planted for it), and is made private.
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + ": not a directory";
  if (st.st_uid != getuid()) {
    return dir + ": belongs to uid " + std::to_string(st.st_uid) + ", not this job's user";
  }
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0) {
    return dir + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace unipool::agent
