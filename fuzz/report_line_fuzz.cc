// libFuzzer target: a job's report lines. fuzz/harness.h says what is checked.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return unipool::fuzz::FuzzReportLine(data, size);
}
