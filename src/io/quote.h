// Input text inside error messages: the readers' errors are one line, so
// whatever they quote of their input (a value, a field name, a cell) is
// bounded and has its line breaks escaped.
#pragma once

#include <string>

namespace unipool::io {

// The first `max` bytes of `s`, or fewer, never ending inside a UTF-8
// sequence; "..." marks a cut. REQUIRES: max >= 3.
std::string Truncate(const std::string& s, size_t max);

// `s` with "\n" and "\r" written as the two characters \n and \r.
std::string OneLine(const std::string& s);

// At most 40 bytes of `s`, on one line, in single quotes: 'value'.
std::string Quote(const std::string& s);

}  // namespace unipool::io
