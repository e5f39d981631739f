#include "io/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace unipool::io {

const char* const kQueueNameRule =
    "1 to 63 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or "
    "digit";
const char* const kLabelKeyRule =
    "an optional DNS prefix and '/', then 1 to 63 letters, digits, '-', '_' or '.', starting and "
    "ending with a letter or digit";
const char* const kLabelValueRule =
    "empty, or 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or "
    "digit";

size_t FirstBadUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t tail = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
    if (c < 0x80) {
      tail = 0;
    } else if (c >= 0xc2 && c <= 0xdf) {
      tail = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      tail = 2;
      lo = c == 0xe0 ? 0xa0 : 0x80;
      hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
      tail = 3;
      lo = c == 0xf0 ? 0x90 : 0x80;
      hi = c == 0xf4 ? 0x8f : 0xbf;
    } else {
      return i;
    }
    if (i + tail >= s.size()) return i;
    for (size_t k = 1; k <= tail; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return i;
    }
    i += tail + 1;
  }
  return std::string_view::npos;
}

size_t FirstBadText(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      const size_t utf8 = FirstBadUtf8(s.substr(0, i));
      return std::min(i, utf8);
    }
  }
  return FirstBadUtf8(s);
}

namespace {

bool Alnum(char c, bool upper) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (upper && c >= 'A' && c <= 'Z');
}

// 1..63 of [alnum-_.], alnum at both ends.
bool IsWord(std::string_view s, bool upper) {
  if (s.empty() || s.size() > 63 || !Alnum(s.front(), upper) || !Alnum(s.back(), upper)) {
    return false;
  }
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return Alnum(c, upper) || c == '-' || c == '_' || c == '.'; });
}

// A DNS subdomain: dot-separated labels of [a-z0-9-], at most 253 bytes.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) dot = s.size();
    const std::string_view label = s.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || !Alnum(label.front(), false) ||
        !Alnum(label.back(), false) || !std::all_of(label.begin(), label.end(), [](char c) {
          return Alnum(c, false) || c == '-';
        })) {
      return false;
    }
    start = dot + 1;
  }
  return true;
}

}  // namespace

bool IsQueueName(std::string_view s) { return IsWord(s, false); }

bool IsLabelKey(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) return IsWord(s, true);
  return IsDnsSubdomain(s.substr(0, slash)) && IsWord(s.substr(slash + 1), true);
}

bool IsLabelValue(std::string_view s) { return s.empty() || IsWord(s, true); }

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

std::string Count(int64_t n, std::string_view noun) {
  std::string out = std::to_string(n) + " " + std::string(noun);
  if (n != 1 && n != -1) out += "s";
  return out;
}

double Tidy(double v) { return std::round(v * 1e6) / 1e6; }

}  // namespace unipool::io
