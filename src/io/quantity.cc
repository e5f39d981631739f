#include "io/quantity.h"

#include <string>

#include "io/quote.h"

namespace unipool::io {
namespace {

// A quantity as written: digits (with the decimal point removed), how many
// of them followed the point, and the scale its suffix gives (10^exp10 *
// 2^exp2).
struct Written {
  __int128 digits = 0;
  int fraction = 0;
  int exp10 = 0;
  int exp2 = 0;
};

Status Bad(std::string_view text, const std::string& why) {
  return InvalidArgument(Quote(std::string(text)) + " is not a quantity: " + why);
}

// The suffix after the number: binary (Ki..Ei), decimal (n..E) or an
// exponent (e3, E-2).
bool ReadSuffix(std::string_view s, Written* w) {
  static constexpr struct {
    const char* text;
    int exp10, exp2;
  } kSuffixes[] = {{"", 0, 0},    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30},
                   {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}, {"n", -9, 0},
                   {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
                   {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0}};
  for (const auto& x : kSuffixes) {
    if (s == x.text) {
      w->exp10 = x.exp10;
      w->exp2 = x.exp2;
      return true;
    }
  }
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) return false;
  size_t i = 1;
  const bool negative = s[i] == '-';
  if (s[i] == '-' || s[i] == '+') ++i;
  if (i == s.size() || s.size() - i > 2) return false;  // |exponent| < 100
  int e = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    e = e * 10 + (s[i] - '0');
  }
  w->exp10 = negative ? -e : e;
  return true;
}

Result<Written> ReadWritten(std::string_view text) {
  Written w;
  size_t i = 0;
  int significant = 0;
  bool point = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (w.digits == 0 && c == '0') {
      if (point) ++w.fraction;
      continue;
    }
    if (++significant > 18) return Bad(text, "more than 18 significant digits");
    w.digits = w.digits * 10 + (c - '0');
    if (point) ++w.fraction;
  }
  if (!any) return Bad(text, "expected a number such as 2, 0.5, 500m or 64Gi");
  if (!ReadSuffix(text.substr(i), &w)) {
    return Bad(text, "unknown suffix " + Quote(std::string(text.substr(i))) +
                         " (Ki Mi Gi Ti Pi Ei, m k M G T P E, or an exponent e3)");
  }
  return w;
}

// The written value in units of 10^-unit_exp10, rounded up; in [1, max].
Result<int64_t> Scale(std::string_view text, int unit_exp10, int64_t max, const char* unit) {
  Result<Written> w = ReadWritten(text);
  if (!w.ok()) return w.status();
  if (w->digits == 0) return Bad(text, "must be more than 0");
  // digits < 10^18 < 2^60 and exp2 <= 60: the shift cannot overflow 128 bits.
  __int128 v = w->digits << w->exp2;
  const __int128 limit = static_cast<__int128>(max);
  auto too_large = [&] { return Bad(text, "more than " + std::to_string(max) + " " + unit); };
  for (int e = w->exp10 + unit_exp10 - w->fraction; e != 0;) {
    if (e > 0) {
      v *= 10;
      --e;
      if (v > limit) return too_large();  // only grows from here
    } else {
      v = v / 10 + (v % 10 != 0 ? 1 : 0);  // a fraction of the unit rounds up
      ++e;
      if (v == 1) break;  // stays 1 however far it goes
    }
  }
  if (v > limit) return too_large();
  return static_cast<int64_t>(v);
}

}  // namespace

Result<int64_t> ParseMilliCpu(std::string_view text) {
  return Scale(text, 3, kMaxMilliCpu, "thousandths of a CPU");
}

Result<int64_t> ParseByteQuantity(std::string_view text) {
  return Scale(text, 0, kMaxQuantityBytes, "bytes");
}

}  // namespace unipool::io
