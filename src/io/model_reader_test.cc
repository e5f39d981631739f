#include "io/model_reader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace unipool::io {
namespace {

namespace fs = std::filesystem;
const std::string kRoot = UNIPOOL_SOURCE_DIR;

TEST(ModelReaderTest, ReadsDenseModel) {
  Result<perf::ModelSpec> m = ParseModelSpec(R"(apiVersion: unipool/v1
kind: Model
metadata: {name: tiny}
spec:
  layers: 4
  hiddenSize: 256
  activation: swiglu
  attentionHeads: 8
  kvHeads: 2
  vocabSize: 1000
  seqLength: 512
)");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "tiny");
  EXPECT_EQ(m->layers, 4);
  EXPECT_EQ(m->ffn_hidden, 1024);  // default 4h
  EXPECT_EQ(m->activation, perf::FfnActivation::kSwiglu);
  EXPECT_EQ(m->kv_heads, 2);
  EXPECT_FALSE(m->tied_embeddings);
  EXPECT_FALSE(m->is_moe());
}

TEST(ModelReaderTest, KvHeadsDefaultToHeads) {
  Result<perf::ModelSpec> m = ParseModelSpec(R"(apiVersion: unipool/v1
kind: Model
metadata: {name: mha}
spec: {layers: 2, hiddenSize: 64, attentionHeads: 4, vocabSize: 10, seqLength: 8}
)");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kv_heads, 4);
}

TEST(ModelReaderTest, BaseStartsFromAPreset) {
  Result<perf::ModelSpec> m = LoadModel(kRoot + "/examples/models/llama3-8b-32k.yaml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  perf::ModelSpec want = *perf::FindBuiltinModel("llama3-8b");
  EXPECT_EQ(m->name, "llama3-8b-32k");
  EXPECT_EQ(m->seq_len, 32768);
  EXPECT_EQ(m->hidden, want.hidden);
  EXPECT_EQ(m->kv_heads, want.kv_heads);
}

// The example files describe the presets of the same name.
TEST(ModelReaderTest, ExamplesMatchPresets) {
  for (const char* name : {"llama3-70b", "gpt3-175b", "mixtral-8x7b"}) {
    Result<perf::ModelSpec> m = LoadModel(kRoot + "/examples/models/" + name + ".yaml");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const perf::ModelSpec p = *perf::FindBuiltinModel(name);
    EXPECT_EQ(perf::CountParams(*m).total, perf::CountParams(p).total) << name;
    EXPECT_EQ(m->seq_len, p.seq_len) << name;
  }
  Result<perf::ModelSpec> ds = LoadModel(kRoot + "/examples/models/deepseek-v3-like.yaml");
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(perf::CountParams(*ds).total,
            perf::CountParams(*perf::FindBuiltinModel("deepseek-v3")).total);
}

TEST(ModelReaderTest, PresetOrFile) {
  EXPECT_TRUE(LoadModelOrPreset("Llama3-405B").ok());
  Result<perf::ModelSpec> none = LoadModelOrPreset("no-such-model");
  EXPECT_NE(none.status().message().find("presets: deepseek-v3"), std::string::npos)
      << none.status().message();
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file in testdata/models/bad/ fails with the one-line error of its
// .err file ("error: FILE:LINE:COL: field: cause", as the CLI prints it).
TEST(ModelReaderTest, MalformedFilesGiveOneLineErrorsWithPlace) {
  const fs::path dir = fs::path(kRoot) / "testdata/models/bad";
  int files = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".yaml") continue;
    ++files;
    const std::string rel = "testdata/models/bad/" + f.path().filename().string();
    Result<perf::ModelSpec> m = LoadModel(f.path().string());
    ASSERT_FALSE(m.ok()) << rel;
    std::string got = m.status().message();
    got.replace(0, f.path().string().size(), rel);
    std::string want = Slurp(fs::path(f.path()).replace_extension(".err"));
    EXPECT_EQ("error: " + got + "\n", want) << rel;
    EXPECT_EQ(got.find('\n'), std::string::npos);
    // FILE:LINE:COL: prefix.
    const std::string place = got.substr(rel.size());
    EXPECT_TRUE(place.size() > 4 && place[0] == ':' && std::isdigit(place[1])) << got;
  }
  EXPECT_GE(files, 10);
}

// A fuzz find (fuzz/regressions/model_file/): yaml-cpp's message quoted the
// offending character, a line break, into a two-line error.
TEST(ModelReaderTest, YamlErrorsStayOnOneLine) {
  const std::string text("kind: Model\nspec:\n  attention\0\n  vocabSize: 32000\n", 50);
  Result<perf::ModelSpec> m = ParseModelSpec(text);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message().find('\n'), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace unipool::io
