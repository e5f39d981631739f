#include "harness.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "check.h"
#include "core/perf/model.h"
#include "core/topology/summary.h"
#include "io/cluster_reader.h"
#include "io/job_spec.h"
#include "io/model_reader.h"
#include "io/report_line.h"
#include "io/sim_reader.h"
#include "io/summary_writer.h"
#include "io/trace_reader.h"

namespace unipool::fuzz {
namespace {

using nlohmann::json;

// Clusters above this many GPUs are read but not built: building takes
// time in proportion to the size, and fuzzing wants thousands a second.
constexpr int64_t kMaxBuildGpus = 1 << 12;

int64_t ClusterGpus(const ClusterSpec& spec) {
  if (spec.generator) return spec.generator->gpus;
  int64_t gpus = 0;
  for (const NodeSpec& n : spec.nodes) gpus += n.gpus;
  return gpus;
}

FailureHandler g_handler = nullptr;

// `s` as a JSON string, for causes: escapes show what broke the line.
std::string Escaped(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

void SetFailureHandler(FailureHandler handler) { g_handler = handler; }

int Fail(const std::string& cause) {
  if (g_handler != nullptr) {
    g_handler(cause);
    return 0;
  }
  std::fprintf(stderr, "fuzz: contract broken: %s\n", cause.c_str());
  std::abort();
}

int CheckError(const std::string& reader, const Status& status) {
  const std::string& m = status.message();
  if (status.ok()) return Fail(reader + ": an error without a status");
  if (m.empty()) return Fail(reader + ": an empty error message");
  if (m.find('\n') != std::string::npos) {
    return Fail(reader + ": an error message of more than one line: " + Escaped(m));
  }
  return 0;
}

int FuzzClusterFile(const uint8_t* data, size_t size) {
  return Guard("cluster file", data, size, [](std::string_view text) {
    Result<ClusterSpec> spec = io::ParseClusterSpec(text);
    if (!spec.ok()) return CheckError("ParseClusterSpec", spec.status());
    const int64_t gpus = ClusterGpus(*spec);
    if (gpus > kMaxBuildGpus) return 0;
    Result<Topology> topo = Topology::Build(*spec);
    if (!topo.ok()) return CheckError("Topology::Build", topo.status());
    if (topo->num_gpus().value() != gpus) {
      return Fail("Topology::Build: " + std::to_string(topo->num_gpus().value()) +
                  " GPUs from a file of " + std::to_string(gpus));
    }
    // What `unipool topo` prints of it.
    const ClusterSummary summary = Summarize(*topo);
    (void)io::SummaryText(summary);
    (void)io::SummaryJson(summary);
    return 0;
  });
}

int FuzzJobSpec(const uint8_t* data, size_t size) {
  return Guard("job spec", data, size, [](std::string_view text) {
    Result<io::ParsedJob> parsed = io::ReadJobSpec(text, "job.yaml");
    if (!parsed.ok()) return CheckError("ReadJobSpec", parsed.status());
    for (const std::string& why : parsed->ignored) {
      if (why.empty() || why.find('\n') != std::string::npos) {
        return Fail("ReadJobSpec: an ignored field not named on one line: " + Escaped(why));
      }
    }
    return CheckRoundTrip("the stored job", io::JobRequestToJson(parsed->job).dump(),
                          io::JobRequestFromJson, io::JobRequestToJson);
  });
}

int FuzzSimFile(const uint8_t* data, size_t size) {
  // Every input runs against one small cluster (fuzz/data/cluster.yaml);
  // relative paths in it (spec.workload.synthetic.fitTrace) resolve there too.
  static const std::string kDir = UNIPOOL_FUZZ_DATA_DIR;
  return Guard("simulation file", data, size, [](std::string_view text) {
    Result<io::SimFile> sim = io::ParseSimFile(text, kDir + "/sim.yaml", kDir + "/cluster.yaml");
    if (!sim.ok()) return CheckError("ParseSimFile", sim.status());
    const int tiers = sim->topology->num_tiers();
    const auto queues = static_cast<int32_t>(sim->config.queues.size());
    if (sim->policies.empty()) return Fail("ParseSimFile: no policy");
    for (const sim::SimJob& j : sim->jobs) {
      if (j.queue < 0 || j.queue >= queues) {
        return Fail("ParseSimFile: job " + j.name + ": no queue");
      }
    }
    if (sim->synthetic) {
      for (const sim::JobClass& c : sim->synthetic->classes) {
        if (c.queue < 0 || c.queue >= queues) {
          return Fail("ParseSimFile: class " + c.name + ": no queue");
        }
      }
    }
    for (const sim::FailureProcess& f : sim->config.failures) {
      if (f.tier < -1 || f.tier >= tiers) return Fail("ParseSimFile: a failure at no tier");
    }
    for (const sim::Maintenance& m : sim->config.maintenance) {
      if (m.tier < 0 || m.tier >= tiers) return Fail("ParseSimFile: maintenance at no tier");
    }
    return 0;
  });
}

int FuzzTrace(const uint8_t* data, size_t size) {
  return Guard("trace", data, size, [](std::string_view text) {
    for (const char* queue_from : {"queue", "user", "none"}) {
      io::TraceOptions options;
      options.queue_from = queue_from;
      Result<io::Trace> trace = io::ParseTrace(text, options);
      if (!trace.ok()) {
        CheckError("ParseTrace", trace.status());
        continue;
      }
      const auto queues = static_cast<int32_t>(trace->queues.size());
      if (static_cast<int64_t>(trace->jobs.size()) > trace->rows) {
        return Fail("ParseTrace: more jobs than rows");
      }
      if (!std::isfinite(trace->gpu_hours) || trace->gpu_hours < 0) {
        return Fail("ParseTrace: " + std::to_string(trace->gpu_hours) + " GPU-hours");
      }
      for (const sim::SimJob& j : trace->jobs) {
        if (j.queue < 0 || j.queue >= queues) {
          return Fail("ParseTrace: job " + j.name + ": no queue");
        }
        if (j.gpus.value() < 1 || j.submit.value() < 0 || j.work.value() < 1) {
          return Fail("ParseTrace: job " + j.name + ": gpus " + std::to_string(j.gpus.value()) +
                      ", submit " + std::to_string(j.submit.value()) + " ns, work " +
                      std::to_string(j.work.value()) + " ns");
        }
      }
    }
    return 0;
  });
}

// A job's report line (the agent reads them from a file the job writes):
// an object or nothing, never an exception; the numbers it gives are
// what RankSignals and ReportNumber promise; an object survives its own
// dump read back.
int FuzzReportLine(const uint8_t* data, size_t size) {
  return Guard("report line", data, size, [](std::string_view text) {
    const json line = io::ParseReportLine(text);
    if (line.is_discarded()) return 0;
    if (!line.is_object()) return Fail("ParseReportLine: not an object: " + Escaped(line.dump()));
    for (const char* key : {"loss", "gradNorm", "throughput"}) {
      if (!line.contains(key)) continue;
      const json& v = line[key];
      const std::optional<double> x = io::ReportNumber(v);
      if (v.is_number() && (!x || *x != v.get<double>())) {
        return Fail(std::string("ReportNumber: ") + key + " " + v.dump() + " read as another");
      }
      if (!v.is_number() && !v.is_string() && x) {
        return Fail(std::string("ReportNumber: ") + key + " " + v.dump() + " read as a number");
      }
    }
    if (const std::optional<train::RankSample> r = io::RankSignals(line, 3)) {
      const int64_t step = r->step_time.value(), data_ns = r->data_time.value();
      const int64_t comm = r->comm_time.value();
      if (step < 0 || data_ns < 0 || comm < 0 || data_ns > step || comm > step || r->steps < 1) {
        return Fail("RankSignals: step " + std::to_string(step) + " ns, data " +
                    std::to_string(data_ns) + " ns, comm " + std::to_string(comm) + " ns, " +
                    std::to_string(r->steps) + " steps");
      }
    }
    const std::string again = line.dump(-1, ' ', false, json::error_handler_t::replace);
    const json back = io::ParseReportLine(again);
    if (back != line && again.find("\\ufffd") == std::string::npos) {
      return Fail("ParseReportLine: " + Escaped(again) + " read back differently");
    }
    return 0;
  });
}

int FuzzModelFile(const uint8_t* data, size_t size) {
  return Guard("model file", data, size, [](std::string_view text) {
    Result<perf::ModelSpec> model = io::ParseModelSpec(text);
    if (!model.ok()) return CheckError("ParseModelSpec", model.status());
    if (Status st = perf::Validate(*model); !st.ok()) {
      return Fail("ParseModelSpec: accepted a model that does not validate: " + st.message());
    }
    const perf::ParamCounts params = perf::CountParams(*model);
    if (!std::isfinite(params.total) || params.total <= 0 || params.active > params.total) {
      return Fail("ParseModelSpec: " + std::to_string(params.total) + " parameters, " +
                  std::to_string(params.active) + " active");
    }
    return 0;
  });
}

}  // namespace unipool::fuzz
