// libFuzzer target: the JSON readers of server/records.h (API bodies, the store). fuzz/harness.h
// says what is checked.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return unipool::fuzz::FuzzRecords(data, size);
}
