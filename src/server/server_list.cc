#include "server/server_list.h"

#include <algorithm>

#include "io/quote.h"

namespace unipool::server {

Result<ServerList> ServerList::Parse(const std::string& urls) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= urls.size()) {
    size_t comma = urls.find(',', at);
    if (comma == std::string::npos) comma = urls.size();
    std::string u = urls.substr(at, comma - at);
    u.erase(0, u.find_first_not_of(" \t"));
    u.erase(u.find_last_not_of(" \t") + 1);
    while (u.size() > 1 && u.back() == '/') u.pop_back();
    if (!u.empty()) {
      const bool scheme = u.starts_with("http://") || u.starts_with("https://");
      if (!scheme || u.find('/', u.find("//") + 2) != std::string::npos) {
        return InvalidArgument("server address " + io::Quote(u) +
                               ": expected http://HOST:PORT or https://HOST:PORT");
      }
      out.push_back(u);
    }
    at = comma + 1;
  }
  if (out.empty()) return InvalidArgument("no server address (give http://HOST:PORT)");
  return ServerList(std::move(out));
}

bool ServerList::Failed(const std::string& failed) {
  size_t i = index_.load();
  if (urls_[i % urls_.size()] != failed) return false;  // someone moved on already
  if (!index_.compare_exchange_strong(i, i + 1)) return false;
  return (i + 1) % urls_.size() == 0;
}

std::string ServerList::Joined() const {
  std::string out;
  for (const std::string& u : urls_) out += (out.empty() ? "" : ", ") + u;
  return out;
}

std::chrono::milliseconds ServerList::Backoff(int round, uint64_t seed) {
  const int64_t full = std::min<int64_t>(2000, int64_t{100} << std::min(round - 1, 5));
  // splitmix64: a well-spread number from the seed and the round.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(round + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return std::chrono::milliseconds(full / 2 +
                                   static_cast<int64_t>(z % static_cast<uint64_t>(full / 2 + 1)));
}

}  // namespace unipool::server
