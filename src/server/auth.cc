#include "server/auth.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "io/quote.h"
#include "io/text.h"
#include "io/yaml_fields.h"

namespace unipool::server {
namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[data[i] >> 4];
    out += kDigits[data[i] & 15];
  }
  return out;
}

bool IsHexSha256(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

bool IsUnixName(const std::string& s) {
  if (s.empty() || s.size() > 32 || s[0] == '-' || s[0] == '.') return false;
  return s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
         std::string::npos;
}

// A node pattern of a join token: node-name characters and '*'.
bool IsNodePattern(const std::string& s) {
  return !s.empty() && s.size() <= 253 &&
         s.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-*") ==
             std::string::npos;
}

// Checks what Parse and Create both require of an entry.
Status CheckEntry(const Principal& p) {
  if (!io::IsQueueName(p.name))
    return InvalidArgument(std::string("name: expected ") + io::kQueueNameRule);
  for (const std::string& q : p.queues) {
    if (!io::IsQueueName(q)) {
      return InvalidArgument("queues: " + io::Quote(q) +
                             " is not a queue name: " + io::kQueueNameRule);
    }
  }
  if (p.role == Role::kTenant && p.queues.empty()) {
    return InvalidArgument("queues: a tenant needs at least one queue");
  }
  if (!p.run_as.empty() && !IsRunAs(p.run_as)) {
    return InvalidArgument(std::string("runAs: expected ") + kRunAsRule);
  }
  if (!p.run_as.empty() && p.role != Role::kTenant && p.role != Role::kAdmin) {
    return InvalidArgument("runAs: only tenant and admin tokens submit jobs");
  }
  for (const std::string& n : p.nodes) {
    if (!IsNodePattern(n)) {
      return InvalidArgument(
          "nodes: " + io::Quote(n) +
          " is not a node name or pattern (letters, digits, '_', '.', '-', '*')");
    }
  }
  if (!p.nodes.empty() && p.role != Role::kJoin) {
    return InvalidArgument("nodes: only join tokens register nodes");
  }
  return Status::Ok();
}

}  // namespace

bool IsRunAs(const std::string& s) {
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return IsUnixName(s);
  return IsUnixName(s.substr(0, colon)) && IsUnixName(s.substr(colon + 1));
}

bool Principal::MayJoin(const std::string& node) const {
  if (nodes.empty()) return true;
  for (const std::string& pattern : nodes) {
    if (fnmatch(pattern.c_str(), node.c_str(), 0) == 0) return true;
  }
  return false;
}

const char* RoleName(Role r) {
  switch (r) {
    case Role::kAdmin:
      return "admin";
    case Role::kTenant:
      return "tenant";
    case Role::kAgent:
      return "agent";
    case Role::kReadOnly:
      return "read-only";
    case Role::kJoin:
      return "join";
  }
  return "read-only";
}

std::optional<Role> ParseRole(const std::string& s) {
  for (Role r : {Role::kAdmin, Role::kTenant, Role::kReadOnly, Role::kJoin}) {
    if (s == RoleName(r)) return r;
  }
  return std::nullopt;
}

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(text.data(), text.size(), digest, &n, EVP_sha256(), nullptr);
  return Hex(digest, n);
}

Result<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Unavailable("no random bytes from OpenSSL");
  return "up_" + Hex(bytes, sizeof bytes);
}

Result<TokenFile> TokenFile::Parse(const std::string& text, const std::string& source) {
  auto located = [&](const Status& st) { return Status(st.code(), source + ":" + st.ToString()); };
  Result<YAML::Node> doc = io::LoadDocument(text, "");
  if (!doc.ok()) return located(doc.status());
  Result<io::Fields> top = io::Fields::Of(*doc, "", {"tokens"});
  if (!top.ok()) return located(top.status());
  std::vector<YAML::Node> entries;
  Status st = top->Sequence("tokens", &entries, /*required=*/true);
  if (!st.ok()) return located(st);
  TokenFile file;
  std::set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string path = "tokens[" + std::to_string(i) + "]";
    Result<io::Fields> f =
        io::Fields::Of(entries[i], path, {"name", "role", "sha256", "queues", "runAs", "nodes"});
    if (!f.ok()) return located(f.status());
    Principal p;
    std::string role, hash;
    for (Status s : {f->String("name", &p.name, true), f->String("role", &role, true),
                     f->String("sha256", &hash, true), f->String("runAs", &p.run_as)}) {
      if (!s.ok()) return located(s);
    }
    auto r = ParseRole(role);
    if (!r) {
      return located(
          io::Expected(f->Get("role"), path + ".role", "admin, tenant, read-only or join"));
    }
    p.role = *r;
    if (!IsHexSha256(hash)) {
      return located(io::Expected(f->Get("sha256"), path + ".sha256",
                                  "64 lowercase hex digits (sha256sum of the token)"));
    }
    for (const char* list : {"queues", "nodes"}) {
      std::vector<YAML::Node> items;
      if (Status s = f->Sequence(list, &items); !s.ok()) return located(s);
      for (const YAML::Node& q : items) {
        if (!q.IsScalar()) return located(io::Expected(q, path + "." + list, "a list of names"));
        if (list[0] == 'q') {
          p.queues.insert(q.Scalar());
        } else {
          p.nodes.push_back(q.Scalar());
        }
      }
    }
    if (Status s = CheckEntry(p); !s.ok()) {
      return located(InvalidArgument(path + "." + s.message(), f->loc()));
    }
    if (!names.insert(p.name).second) {
      return located(InvalidArgument(path + ".name: '" + p.name + "' appears twice", f->loc()));
    }
    file.by_hash_[hash] = std::move(p);
  }
  return file;
}

Result<TokenFile> TokenFile::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return NotFound("cannot read token file " + path);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return PermissionDenied("token file " + path + " is writable by group or others (mode " + mode +
                            "): anyone who can write it can make tokens; chmod 600 " + path);
  }
  std::ifstream in(path);
  if (!in) return NotFound("cannot read token file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

const Principal* TokenFile::Find(const std::string& token) const {
  auto it = by_hash_.find(Sha256Hex(token));
  return it == by_hash_.end() ? nullptr : &it->second;
}

Result<std::string> TokenFile::Create(const std::string& path, const Principal& who) {
  if (Status st = CheckEntry(who); !st.ok()) return InvalidArgument("--" + st.message());
  const std::string& name = who.name;
  std::string text;
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      Result<TokenFile> existing = Parse(text, path);
      if (!existing.ok()) return existing.status();
      for (const auto& [hash, p] : existing->by_hash_) {
        if (p.name == name) return AlreadyExists("a token named '" + name + "' exists in " + path);
      }
    }
  }
  Result<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  if (text.empty()) text = "tokens:\n";
  if (text.back() != '\n') text += '\n';
  text += "  - name: " + name + "\n    role: " + RoleName(who.role) + "\n";
  auto list = [&](const char* key, const auto& items) {
    if (items.empty()) return;
    text += std::string("    ") + key + ": [";
    bool first = true;
    for (const std::string& item : items) {
      text += (first ? "\"" : ", \"") + item + "\"";
      first = false;
    }
    text += "]\n";
  };
  list("queues", who.queues);
  list("nodes", who.nodes);
  if (!who.run_as.empty()) text += "    runAs: \"" + who.run_as + "\"\n";
  text += "    sha256: " + Sha256Hex(*token) + "\n";
  // Owner-only (0600), written whole: a new file, then a rename.
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot write token file " + tmp);
  fchmod(fd, 0600);
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Unavailable("cannot write token file " + path);
  }
  return token;
}

}  // namespace unipool::server
