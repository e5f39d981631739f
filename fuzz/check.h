// The checks the harnesses (harness.cc, server_harness.cc) share: reporting
// a broken contract, the one-line error, no escaping exception, and the
// round trip through a JSON writer.
#pragma once

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace unipool::fuzz {

// Reports a broken contract to the failure handler (harness.h); returns
// what a Fuzz* function returns.
int Fail(const std::string& cause);

// An error must say why, on one line.
int CheckError(const std::string& reader, const Status& status);

// Runs one reader's checks on the bytes; an exception that escapes breaks
// the contract.
template <class Check>
int Guard(const char* reader, const uint8_t* data, size_t size, Check check) {
  try {
    return check(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception& e) {
    return Fail(std::string(reader) + ": an exception escaped: " + e.what());
  } catch (...) {
    return Fail(std::string(reader) + ": an exception escaped");
  }
}

// What the store keeps is text: `written` (the JSON a writer made of a
// value the reader accepted) is parsed, read back and written again, and
// must come out the same.
template <class Read, class Write>
int CheckRoundTrip(const std::string& what, const std::string& written, Read read, Write write) {
  const nlohmann::json parsed = nlohmann::json::parse(written, nullptr, false);
  if (parsed.is_discarded()) return Fail(what + ": wrote JSON it cannot parse: " + written);
  auto back = read(parsed);
  if (!back.ok()) return Fail(what + ": cannot read what it wrote: " + back.status().message());
  const std::string again = write(*back).dump();
  if (again != written)
    return Fail(what + ": changed in a round trip: " + written + " -> " + again);
  return 0;
}

}  // namespace unipool::fuzz
