#include "io/quote.h"

namespace unipool::io {

std::string Truncate(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t end = max - 3;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) --end;
  return s.substr(0, end) + "...";
}

std::string OneLine(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Quote(const std::string& s) { return "'" + OneLine(Truncate(s, 40)) + "'"; }

}  // namespace unipool::io
