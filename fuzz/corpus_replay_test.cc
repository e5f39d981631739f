// The fuzz harness (fuzz/harness.h) in the normal build, without libFuzzer:
// every committed input of each target (the seed corpus fuzz/corpus/<name>
// and the crash reproducers fuzz/regressions/<name>) must keep its reader's
// contract, and so must seeded random edits of the seeds (the test suite's
// own small fuzzing).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/base/rng.h"
#include "harness.h"

namespace unipool::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr int kMutantsPerTarget = 3000;

struct Target {
  const char* name;  // fuzz/corpus/<name>, fuzz/regressions/<name>, fuzz/<name>_fuzz.cc
  int (*run)(const uint8_t* data, size_t size);
};

void PrintTo(const Target& target, std::ostream* os) { *os << target.name; }

const Target kTargets[] = {
    {"cluster_file", FuzzClusterFile}, {"job_spec", FuzzJobSpec},
    {"sim_file", FuzzSimFile},         {"trace", FuzzTrace},
    {"model_file", FuzzModelFile},     {"token_file", FuzzTokenFile},
    {"records", FuzzRecords},          {"report_line", FuzzReportLine},
};

const fs::path kFuzzDir = fs::path(UNIPOOL_SOURCE_DIR) / "fuzz";

std::vector<std::string>* g_causes = nullptr;

void Record(const std::string& cause) { g_causes->push_back(cause); }

// Runs `input` through the target; returns the broken contracts' causes.
std::vector<std::string> Check(const Target& target, const std::string& input) {
  std::vector<std::string> causes;
  g_causes = &causes;
  SetFailureHandler(Record);
  target.run(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  SetFailureHandler(nullptr);
  g_causes = nullptr;
  return causes;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The files of fuzz/<folder>/<target>, sorted; none when it is missing.
std::vector<fs::path> Inputs(const char* folder, const Target& target) {
  std::vector<fs::path> files;
  const fs::path dir = kFuzzDir / folder / target.name;
  if (!fs::is_directory(dir)) return files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// One to four random edits: cut, insert a YAML/JSON/CSV token, flip a byte,
// or repeat a slice.
std::string Mutate(const std::string& base, Rng& rng) {
  // clang-format off
  static const char* kTokens[] = {":", "-", "[", "]", "{", "}", "\n", " ", "\"", "'", "#", ",",
                                  "0", "-1", "1e999", "nan", "99999999999999999999", "&a", "*a",
                                  "!!int", "\t", "\r", "|", ">", "~", "null", "\xff", "\\n"};
  // clang-format on
  std::string s = base;
  const int edits = 1 + static_cast<int>(rng.Below(4));
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng.Below(s.size());
    switch (rng.Below(4)) {
      case 0:
        s.erase(at, 1 + rng.Below(8));
        break;
      case 1:
        s.insert(at, kTokens[rng.Below(std::size(kTokens))]);
        break;
      case 2:
        s[at] = static_cast<char>(rng.Below(256));
        break;
      default: {
        const size_t len = rng.Below(std::min<size_t>(40, s.size() - at)) + 1;
        s.insert(rng.Below(s.size()), s.substr(at, len));
      }
    }
  }
  return s;
}

class FuzzReplayTest : public testing::TestWithParam<Target> {};

TEST_P(FuzzReplayTest, SeedCorpus) {
  const std::vector<fs::path> seeds = Inputs("corpus", GetParam());
  EXPECT_GE(seeds.size(), 5u) << "fuzz/corpus/" << GetParam().name << " needs seeds";
  for (const fs::path& file : seeds) {
    for (const std::string& cause : Check(GetParam(), Slurp(file))) {
      ADD_FAILURE() << file.string() << ": " << cause;
    }
  }
}

TEST_P(FuzzReplayTest, Regressions) {
  for (const fs::path& file : Inputs("regressions", GetParam())) {
    for (const std::string& cause : Check(GetParam(), Slurp(file))) {
      ADD_FAILURE() << file.string() << ": " << cause;
    }
  }
}

TEST_P(FuzzReplayTest, MutatedSeeds) {
  std::vector<std::string> seeds;
  for (const fs::path& file : Inputs("corpus", GetParam())) seeds.push_back(Slurp(file));
  ASSERT_FALSE(seeds.empty());
  uint64_t seed = 7;
  for (const char* c = GetParam().name; *c != 0; ++c) seed = seed * 31 + static_cast<uint8_t>(*c);
  Rng rng(seed);
  int failures = 0;
  for (int i = 0; i < kMutantsPerTarget && failures < 3; ++i) {
    const std::string input = Mutate(seeds[rng.Below(seeds.size())], rng);
    const std::vector<std::string> causes = Check(GetParam(), input);
    if (causes.empty()) continue;
    ++failures;
    // Kept for a reproducer: fuzz/regressions/<name>/.
    const fs::path kept = fs::path(testing::TempDir()) /
                          (std::string(GetParam().name) + "-mutant-" + std::to_string(i));
    std::ofstream(kept, std::ios::binary) << input;
    ADD_FAILURE() << causes.front() << "\n  input (saved as " << kept.string() << "): "
                  << nlohmann::json(input).dump(-1, ' ', false,
                                                nlohmann::json::error_handler_t::replace);
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplayTest, testing::ValuesIn(kTargets),
                         [](const testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

// Every corpus folder belongs to a target, and every target has a libFuzzer
// binary source.
TEST(FuzzTargetsTest, CorpusFoldersAndSourcesMatchTheTargets) {
  std::set<std::string> names, folders;
  for (const Target& t : kTargets) {
    names.insert(t.name);
    EXPECT_TRUE(fs::exists(kFuzzDir / (std::string(t.name) + "_fuzz.cc"))) << t.name;
  }
  for (const fs::directory_entry& e : fs::directory_iterator(kFuzzDir / "corpus")) {
    folders.insert(e.path().filename().string());
  }
  EXPECT_EQ(folders, names);
}

}  // namespace
}  // namespace unipool::fuzz
