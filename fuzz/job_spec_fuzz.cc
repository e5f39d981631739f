// libFuzzer target: the job spec reader (the API's biggest input) and the stored form.
// fuzz/harness.h says what is checked.
#include "harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return unipool::fuzz::FuzzJobSpec(data, size);
}
