// JSON forms of the control plane's records: what the store keeps and what
// the API returns (one shape for both). Times are RFC 3339 in UTC with
// milliseconds ("2026-11-29T15:04:05.123Z"); 0 is written as null.
#pragma once

#include <nlohmann/json.hpp>

#include "io/time_format.h"
#include "server/control.h"

namespace unipool::server {

using Json = nlohmann::json;

using io::FormatTime;
using io::ParseTime;

Json JobToJson(const JobRecord& job);
Result<JobRecord> JobFromJson(const Json& j);
Json EventToJson(const JobEvent& e);
Result<JobEvent> EventFromJson(const Json& j);
Json NodeToJson(const NodeRecord& n);
Json QueueToJson(const QueueRecord& q);
Result<sched::QueueSpec> QueueSpecFromJson(const Json& j, const std::string& where);
// The queue object's maxJobs, maxSpecBytes and maxSubmitsPerMinute (absent:
// the defaults).
Result<SubmitLimits> SubmitLimitsFromJson(const Json& j, const std::string& where);
Json SummaryToJson(const Summary& s);

// Store keys.
std::string JobKey(int64_t id);  // /jobs/000000000042
// A job's secret values, apart from the job (never in /jobs/, never listed
// or watched): /secrets/000000000042 holds {NAME: value}.
std::string SecretKey(int64_t id);
Json SecretsToJson(const io::JobRequest& r);
// Sets the values of r.secret_env (names from the job record) from `j`.
Status FillSecrets(const Json& j, io::JobRequest& r);
std::string EventKey(int64_t job, int64_t seq);  // /events/000000000042/000003
std::string NodeKey(const std::string& name);    // /nodes/NAME
std::string QueueKey(const std::string& name);   // /queues/NAME
std::string AgentKey(const std::string& name);   // /agents/NAME
// The queues' fair-share usage: {"at": ns since the epoch, "gpuSeconds":
// {queue: decayed GPU-seconds}}.
std::string UsageKey();  // /usage
inline constexpr const char* kNextIdKey = "/meta/next-job-id";
// The largest GPU index a stored record may hold.
inline constexpr int64_t kMaxGpuIndex = 65535;

}  // namespace unipool::server
