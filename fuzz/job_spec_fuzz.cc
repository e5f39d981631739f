// libFuzzer target for the job spec reader (the API's biggest input): any
// bytes give a JobRequest or a one-line error; an accepted request survives
// the store's JSON round trip unchanged. ASan and UBSan watch the rest.
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "io/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  unipool::Result<unipool::io::ParsedJob> parsed = unipool::io::ReadJobSpec(text, "fuzz");
  if (!parsed.ok()) {
    const std::string& m = parsed.status().message();
    if (m.empty() || m.find('\n') != std::string::npos) std::abort();  // one line, always
    return 0;
  }
  const nlohmann::json stored = unipool::io::JobRequestToJson(parsed->job);
  unipool::Result<unipool::io::JobRequest> back = unipool::io::JobRequestFromJson(stored);
  if (!back.ok() || unipool::io::JobRequestToJson(*back) != stored) std::abort();
  (void)stored.dump();  // must not throw on any accepted string
  return 0;
}
