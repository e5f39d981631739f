// Mutation fuzzing of every reader, in the test suite: seeded random edits
// of valid inputs must give a value or a one-line error, never a crash, a
// hang or an exception.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base/rng.h"
#include "core/topology/topology.h"
#include "io/cluster_reader.h"
#include "io/job_spec.h"
#include "io/sim_reader.h"
#include "io/trace_reader.h"

namespace unipool::io {
namespace {

std::string Mutate(const std::string& base, Rng& rng) {
  std::string s = base;
  static const char* kTokens[] = {":", "-", "[", "]", "{", "}", "\n", " ", "\"", "'", "#", ",",
                                  "0", "-1", "1e999", "nan", "99999999999999999999", "&a", "*a",
                                  "!!int", "\t", "\r", "|", ">", "~", "null", "\xff"};
  const int edits = 1 + static_cast<int>(rng.Below(4));
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng.Below(s.size());
    switch (rng.Below(4)) {
      case 0: s.erase(at, 1 + rng.Below(8)); break;
      case 1: s.insert(at, kTokens[rng.Below(sizeof kTokens / sizeof *kTokens)]); break;
      case 2: s[at] = static_cast<char>(rng.Below(256)); break;
      default: {  // duplicate a slice
        const size_t len = rng.Below(std::min<size_t>(40, s.size() - at)) + 1;
        s.insert(rng.Below(s.size()), s.substr(at, len));
      }
    }
  }
  return s;
}

void ExpectOneLine(const Status& st) {
  EXPECT_FALSE(st.message().empty());
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
}

TEST(FuzzTest, ClusterFiles) {
  Rng rng(7);
  for (const char* file : {"examples/clusters/devbox.yaml", "examples/clusters/llama3-16k.yaml",
                           "examples/clusters/nvl72.yaml"}) {
    const std::string base = ReadFile(std::string(UNIPOOL_SOURCE_DIR) + "/" + file).value();
    for (int i = 0; i < 1500; ++i) {
      const std::string text = Mutate(base, rng);
      if (std::getenv("UNIPOOL_FUZZ_DUMP")) std::ofstream(std::getenv("UNIPOOL_FUZZ_DUMP")) << text;
      Result<ClusterSpec> spec = ParseClusterSpec(text);
      if (!spec.ok()) {
        ExpectOneLine(spec.status());
        continue;
      }
      // Mutations may ask for absurd sizes; build only reasonable ones.
      if (spec->generator && spec->generator->gpus > (1 << 20)) continue;
      Result<Topology> topo = Topology::Build(*spec);
      if (!topo.ok()) ExpectOneLine(topo.status());
    }
  }
}

TEST(FuzzTest, Traces) {
  Rng rng(11);
  const std::string base =
      "job_id,submit_time_s,num_gpus,duration_s,wait_time_s,user,queue,status,priority\n"
      "a,0,8,3600,,alice,vc1,,\nb,10.5,1,60,5,bob,vc2,,2\n\"c,q\",20,2,7200,,alice,vc1,,\n";
  for (int i = 0; i < 3000; ++i) {
    Result<Trace> t = ParseTrace(Mutate(base, rng), TraceOptions{});
    if (!t.ok()) ExpectOneLine(t.status());
  }
}

constexpr const char* kJobExamples[] = {"examples/jobs/train.yaml", "examples/jobs/k8s-pod.yaml",
                                        "examples/jobs/k8s-job.yaml",
                                        "examples/jobs/pytorchjob.yaml"};

// Whatever the reader accepts, the store takes back unchanged.
void ExpectStorable(const JobRequest& job) {
  Result<JobRequest> back = JobRequestFromJson(JobRequestToJson(job));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(JobRequestToJson(*back), JobRequestToJson(job));
}

TEST(FuzzTest, JobSpecs) {
  Rng rng(13);
  for (const char* file : kJobExamples) {
    const std::string base = ReadFile(std::string(UNIPOOL_SOURCE_DIR) + "/" + file).value();
    for (int i = 0; i < 750; ++i) {  // 3000 in all
      const std::string text = Mutate(base, rng);
      if (std::getenv("UNIPOOL_FUZZ_DUMP")) std::ofstream(std::getenv("UNIPOOL_FUZZ_DUMP")) << text;
      Result<ParsedJob> job = ReadJobSpec(text, "job.yaml");
      if (!job.ok()) {
        ExpectOneLine(job.status());
        continue;
      }
      ExpectStorable(job->job);
    }
  }
}

// The store's JSON, mutated: a value or a one-line error, never an exception.
TEST(FuzzTest, StoredJobs) {
  Rng rng(17);
  for (const char* file : kJobExamples) {
    const std::string text = ReadFile(std::string(UNIPOOL_SOURCE_DIR) + "/" + file).value();
    const std::string base = JobRequestToJson(ReadJobSpec(text, file).value().job).dump(1);
    for (int i = 0; i < 750; ++i) {
      const nlohmann::json j = nlohmann::json::parse(Mutate(base, rng), nullptr, false);
      if (j.is_discarded()) continue;
      Result<JobRequest> job = JobRequestFromJson(j);
      if (!job.ok()) {
        ExpectOneLine(job.status());
        continue;
      }
      ExpectStorable(*job);
    }
  }
}

}  // namespace
}  // namespace unipool::io
