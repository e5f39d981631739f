#include "io/suggest.h"

#include <algorithm>

namespace unipool::io {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string Nearest(const std::string& got, const std::vector<std::string>& choices) {
  std::string best;
  size_t best_d = 3;
  for (const std::string& c : choices) {
    const size_t d = got.size() >= 2 && c.starts_with(got) ? 1 : EditDistance(got, c);
    if (d < best_d) best = c, best_d = d;
  }
  return best;
}

std::string DidYouMean(const std::string& got, const std::vector<std::string>& choices) {
  const std::string best = Nearest(got, choices);
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

}  // namespace unipool::io
