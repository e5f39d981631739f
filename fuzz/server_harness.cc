#include "check.h"
#include "harness.h"
#include "server/auth.h"
#include "server/records.h"

namespace unipool::fuzz {

using nlohmann::json;

int FuzzTokenFile(const uint8_t* data, size_t size) {
  return Guard("token file", data, size, [](std::string_view text) {
    Result<server::TokenFile> file = server::TokenFile::Parse(std::string(text), "tokens.yaml");
    if (!file.ok()) return CheckError("TokenFile::Parse", file.status());
    return 0;
  });
}

int FuzzRecords(const uint8_t* data, size_t size) {
  return Guard("records", data, size, [](std::string_view text) {
    // Bodies and stored values reach the readers parsed; the JSON parser is
    // nlohmann's, not ours.
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return 0;
    // The three readers see the same value, each its own way.
    Result<sched::QueueSpec> queue = server::QueueSpecFromJson(j, "body");
    if (!queue.ok()) {
      CheckError("QueueSpecFromJson", queue.status());
    } else {
      auto write = [](const sched::QueueSpec& q) { return server::QueueToJson({q}); };
      auto read = [](const json& v) { return server::QueueSpecFromJson(v, "queue"); };
      CheckRoundTrip("the stored queue", write(*queue).dump(), read, write);
    }
    Result<server::JobRecord> job = server::JobFromJson(j);
    if (!job.ok()) {
      CheckError("JobFromJson", job.status());
    } else {
      CheckRoundTrip("the stored job record", server::JobToJson(*job).dump(), server::JobFromJson,
                     server::JobToJson);
    }
    Result<server::JobEvent> event = server::EventFromJson(j);
    if (!event.ok()) return CheckError("EventFromJson", event.status());
    return CheckRoundTrip("the stored event", server::EventToJson(*event).dump(),
                          server::EventFromJson, server::EventToJson);
  });
}

}  // namespace unipool::fuzz
