// The job spec readers' tests' helpers (job_spec_test.cc,
// job_spec_kube_test.cc): read a spec that must parse, or must not.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "io/job_spec.h"

namespace unipool::io::spec_test {

namespace fs = std::filesystem;
using nlohmann::json;
using Pairs = std::vector<std::pair<std::string, std::string>>;
using Strings = std::vector<std::string>;

inline const std::string kRoot = UNIPOOL_SOURCE_DIR;

inline std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline ParsedJob Read(const std::string& text) {
  Result<ParsedJob> job = ReadJobSpec(text, "job.yaml");
  EXPECT_TRUE(job.ok()) << job.status().message();
  return job.ok() ? *job : ParsedJob{};
}

inline ParsedJob ReadExample(const std::string& name) {
  const std::string path = "examples/jobs/" + name;
  Result<ParsedJob> job = ReadJobSpec(Slurp(fs::path(kRoot) / path), path);
  EXPECT_TRUE(job.ok()) << job.status().message();
  return job.ok() ? *job : ParsedJob{};
}

inline std::string ErrorOf(const std::string& text) {
  Result<ParsedJob> job = ReadJobSpec(text, "job.yaml");
  EXPECT_FALSE(job.ok()) << text;
  return job.ok() ? "" : job.status().message();
}

// A Pod of one container with the given metadata, pod spec and container
// lines.
inline std::string Pod(const std::string& metadata, const std::string& spec,
                       const std::string& container) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n" + metadata + "spec:\n" + spec +
         "  containers:\n  - name: c\n    command: [python3, t.py]\n" + container;
}

inline const std::string kOneGpu = "    resources: {limits: {nvidia.com/gpu: 1}}\n";

}  // namespace unipool::io::spec_test
