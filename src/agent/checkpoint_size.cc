#include "agent/checkpoint_size.h"

#include <system_error>

namespace unipool::agent {

namespace fs = std::filesystem;

namespace {

// `p` is `root` or below it (both resolved).
bool Within(const fs::path& p, const fs::path& root) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (r->empty()) continue;  // a trailing separator
    if (q == p.end() || *q != *r) return false;
  }
  return true;
}

}  // namespace

std::optional<int64_t> CheckpointBytes(const std::string& path, const std::string& root,
                                       fs::file_time_type since, int64_t max_entries) {
  std::error_code ec;
  const fs::path top = fs::canonical(path, ec);
  if (ec) return std::nullopt;
  const fs::path base = fs::canonical(root, ec);
  if (ec || !Within(top, base)) return std::nullopt;
  const auto count = [&](const fs::directory_entry& e) -> int64_t {
    std::error_code err;
    if (!e.is_regular_file(err) || e.is_symlink(err)) return 0;
    if (e.last_write_time(err) < since || err) return 0;
    const uintmax_t size = e.file_size(err);
    return err ? 0 : static_cast<int64_t>(size);
  };
  const fs::directory_entry entry(top, ec);
  if (ec) return std::nullopt;
  if (!entry.is_directory(ec)) return count(entry);
  int64_t bytes = 0, seen = 0;
  fs::recursive_directory_iterator it(top, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > max_entries) return std::nullopt;
    bytes += count(*it);
  }
  if (ec) return std::nullopt;
  return bytes;
}

}  // namespace unipool::agent
