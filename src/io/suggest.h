// "Did you mean": the nearest of a few known words to what a user typed.
#pragma once

#include <string>
#include <vector>

namespace unipool::io {

// Levenshtein distance: the fewest one-character edits from `a` to `b`.
size_t EditDistance(const std::string& a, const std::string& b);

// The one of `choices` within two edits of `got` (or that starts with it,
// for two characters or more), the nearest first; "" when none is.
std::string Nearest(const std::string& got, const std::vector<std::string>& choices);

// "; did you mean 'jobs'?" for Nearest, else "".
std::string DidYouMean(const std::string& got, const std::vector<std::string>& choices);

}  // namespace unipool::io
