// Text rules shared by every reader at the edge: well-formed UTF-8, and the
// one charset for the names users give (queues, tokens' owners, labels).
//
// Names (docs/api.md, "Names"):
//   queue and owner names: 1 to 63 of [a-z0-9-_.], starting and ending with
//     a letter or digit (a DNS-1123 label that also allows '_' and '.');
//   label keys: an optional DNS prefix and '/', then 1 to 63 of
//     [A-Za-z0-9-_.] starting and ending with a letter or digit
//     (Kubernetes' label key syntax); values: empty or the same as a key's
//     name part.
// Nothing else (no spaces, control characters, quotes or non-ASCII) can
// appear in a name, so names are safe in keys, logs, metrics and paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace unipool::io {

// The offset of the first byte that is not well-formed UTF-8 (Unicode
// table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF), or
// npos when all of `s` is.
size_t FirstBadUtf8(std::string_view s);

// The offset of the first byte that is not UTF-8 or is a control character
// (C0 but tab, and DEL), or npos.
size_t FirstBadText(std::string_view s);

bool IsQueueName(std::string_view s);
bool IsLabelKey(std::string_view s);
bool IsLabelValue(std::string_view s);

// `s` percent-encoded for a URL's path segment or query value (RFC 3986:
// all but letters, digits and -_.~).
std::string UrlEncode(std::string_view s);

// `n` and `noun`, plural unless n is 1 or -1: Count(1, "GPU") is "1 GPU",
// Count(16, "node") is "16 nodes".
std::string Count(int64_t n, std::string_view noun);

// `v` rounded to 6 decimals, for numbers in JSON output: 259200 rather than
// the 259200.00000000003 its arithmetic left.
double Tidy(double v);

// What the rules above say, for error messages.
extern const char* const kQueueNameRule;
extern const char* const kLabelKeyRule;
extern const char* const kLabelValueRule;

}  // namespace unipool::io
