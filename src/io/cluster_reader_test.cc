#include "io/cluster_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "io/summary_writer.h"

namespace unipool::io {
namespace {

constexpr const char* kGenerated = R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: small}
spec:
  tiers:
    - {name: nvlink, bandwidthGbps: 3600, latencyUs: 1.5}
    - {name: rack, bandwidthGbps: 400, fanout: 2}
    - {name: top, bandwidthGbps: 400, oversubscription: "3:2"}
  generator:
    kind: railOptimized
    gpus: 64
    gpuModel: h100-sxm
    labels: {zone: z1, arch: hopper}
)";

TEST(ClusterReaderTest, ReadsGeneratorForm) {
  Result<ClusterSpec> spec = ParseClusterSpec(kGenerated);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "small");
  ASSERT_EQ(spec->tiers.size(), 3u);
  EXPECT_EQ(spec->tiers[0].latency, Nanoseconds(1500));
  EXPECT_EQ(spec->tiers[1].fanout, 2);
  EXPECT_EQ(spec->tiers[2].oversubscription_milli, 1500);
  ASSERT_TRUE(spec->generator.has_value());
  EXPECT_EQ(spec->generator->kind, GeneratorKind::kRailOptimized);
  EXPECT_EQ(spec->generator->gpus, 64);
  // Labels come back sorted by key.
  ASSERT_EQ(spec->generator->labels.size(), 2u);
  EXPECT_EQ(spec->generator->labels[0].first, "arch");
  Result<Topology> t = Topology::Build(*spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->node_model(NodeId(0)).name, "H100-SXM");  // case-insensitive lookup
  EXPECT_EQ(t->node_labels(NodeId(7)).size(), 2u);
}

TEST(ClusterReaderTest, ReadsExplicitFormWithCustomModel) {
  Result<ClusterSpec> spec = ParseClusterSpec(R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: lab}
spec:
  gpuModels:
    - {name: X1, bf16Tflops: 500, hbmGB: 96, hbmGBps: 4000, watts: 600}
  tiers:
    - {name: nvlink, bandwidthGbps: 900}
    - {name: rack, bandwidthGbps: 100}
    - {name: room, bandwidthGbps: 100}
  nodes:
    - {name: a, gpus: 4, gpuModel: X1, switches: {rack: r1}, state: cordoned}
    - {name: b, gpus: 4, gpuModel: X1, switches: {rack: r2}, partition: batch}
)");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->nodes.size(), 2u);
  EXPECT_EQ(spec->nodes[0].groups[1], "r1");
  EXPECT_EQ(spec->nodes[0].state, NodeState::kCordoned);
  Result<Topology> t = Topology::Build(*spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->node_model(NodeId(1)).peak_bf16, FlopRate(500000));
  EXPECT_EQ(t->partitions().size(), 2u);
  EXPECT_EQ(t->LowestCommonTier(NodeId(0), NodeId(1)), 2);
}

// An 8-GPU cluster of one custom model, described by `model` (a flow map).
std::string OneModelCluster(const std::string& model) {
  return R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: lab}
spec:
  gpuModels:
    - )" +
         model + R"(
  tiers:
    - {name: nvlink, bandwidthGbps: 900}
  generator: {gpus: 8, gpuModel: X1}
)";
}

TEST(ClusterReaderTest, ReadsAModelsPowerFiguresAndDerivesTheRest) {
  Result<ClusterSpec> spec = ParseClusterSpec(OneModelCluster(
      "{name: X1, bf16Tflops: 500, hbmGB: 96, watts: 600, idleWatts: 40, trainWatts: 520}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Result<Topology> t = Topology::Build(*spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const GpuModel& m = t->node_model(NodeId(0));
  EXPECT_EQ(m.idle_power, Watts(40));
  EXPECT_EQ(m.train_power, Watts(520));
  EXPECT_EQ(m.host_power, Watts(321));  // 54% of 600 W, derived

  Result<ClusterSpec> capped = ParseClusterSpec(
      OneModelCluster("{name: X1, bf16Tflops: 500, hbmGB: 96, watts: 700, powerLimitWatts: 500}"));
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  Result<Topology> ct = Topology::Build(*capped);
  ASSERT_TRUE(ct.ok()) << ct.status().ToString();
  EXPECT_EQ(ct->node_model(NodeId(0)).power_cap(), Watts(500));
  EXPECT_EQ(ct->node_model(NodeId(0)).train_power, Watts(500));  // 600 W of 700, capped
  Result<ClusterSpec> over = ParseClusterSpec(
      OneModelCluster("{name: X1, bf16Tflops: 500, hbmGB: 96, watts: 700, powerLimitWatts: 800}"));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("spec.gpuModels[0].powerLimitWatts"), std::string::npos)
      << over.status().ToString();

  Result<ClusterSpec> bad = ParseClusterSpec(
      OneModelCluster("{name: X1, bf16Tflops: 500, hbmGB: 96, watts: 600, trainWatts: 900}"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.gpuModels[0].trainWatts"), std::string::npos)
      << bad.status().ToString();
}

// spec.power: caps per tier (every group) or per group, in kW or MW.
std::string PoweredCluster(const std::string& power) {
  return R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: hall}
spec:
  tiers:
    - {name: nvlink, bandwidthGbps: 3600, fanout: 1}
    - {name: rack, bandwidthGbps: 400, fanout: 4}
    - {name: hall, bandwidthGbps: 400}
  generator: {gpus: 128, gpuModel: H100-SXM}
  power: )" +
         power + "\n";
}

Status BuildPowered(const std::string& power) {
  Result<ClusterSpec> spec = ParseClusterSpec(PoweredCluster(power));
  if (!spec.ok()) return spec.status();
  return Topology::Build(*spec).status();
}

TEST(ClusterReaderTest, ReadsPowerCapsAndChecksThemAgainstIdleDraw) {
  Result<ClusterSpec> spec = ParseClusterSpec(
      PoweredCluster("{pue: 1.25, caps: [{tier: rack, kw: 40}, {tier: hall, mw: 0.12}, "
                     "{tier: rack, group: rack-3, kw: 30}]}"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Result<Topology> t = Topology::Build(*spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->has_power_caps());
  EXPECT_DOUBLE_EQ(t->pue(), 1.25);
  EXPECT_EQ(t->power_cap(1, GroupId(0)), Watts(40000));
  EXPECT_EQ(t->power_cap(1, GroupId(3)), Watts(30000));  // the later, named cap wins
  EXPECT_EQ(t->power_cap(2, GroupId(0)), Watts(120000));
  EXPECT_EQ(t->power_cap(0, GroupId(0)), Watts(0));

  // A rack of 4 idle 8-GPU H100 nodes draws 14.2 kW.
  EXPECT_EQ(BuildPowered("{caps: [{tier: rack, kw: 10}]}").message(),
            "spec.power.caps[0]: 10.0 kW is below the 14.2 kW that rack 'rack-0' draws idle");
  EXPECT_EQ(BuildPowered("{caps: [{tier: row, kw: 50}]}").message(),
            "spec.power.caps[0].tier: no tier named 'row'");
  EXPECT_EQ(BuildPowered("{caps: [{tier: rack, group: rack-9, kw: 50}]}").message(),
            "spec.power.caps[0].group: no rack named 'rack-9'");
  EXPECT_EQ(BuildPowered("{caps: [{tier: rack, kw: 50, mw: 1}]}").message(),
            "spec.power.caps[0]: give exactly one of 'kw' or 'mw'");
  EXPECT_NE(BuildPowered("{pue: 0.9}").message().find("spec.power.pue"), std::string::npos);
}

TEST(ClusterReaderTest, ReadsStorageSystems) {
  // (PoweredCluster's power line, then the storage list.)
  Result<ClusterSpec> spec = ParseClusterSpec(PoweredCluster(
      "{}\n  storage: [{name: lustre, writeGBps: 400, clientGBps: 25, localGBps: 50}]"));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Result<Topology> t = Topology::Build(*spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->storage().size(), 1u);
  EXPECT_DOUBLE_EQ(t->storage()[0].write_bytes_per_s, 400e9);
  EXPECT_DOUBLE_EQ(t->storage()[0].read_bytes_per_s, 400e9);  // as write when not given
  EXPECT_DOUBLE_EQ(t->storage()[0].local_bytes_per_s, 50e9);
  Result<ClusterSpec> bad =
      ParseClusterSpec(PoweredCluster("{}\n  storage: [{name: lustre, writeGBps: 400}]"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("spec.storage[0].clientGBps: required"), std::string::npos)
      << bad.status().ToString();
  EXPECT_EQ(BuildPowered("{}\n  storage: [{name: a, writeGBps: 1, clientGBps: 1}, "
                         "{name: a, writeGBps: 1, clientGBps: 1}]")
                .message(),
            "spec.storage[1].name: 'a' is listed twice");
}

TEST(ClusterReaderTest, ErrorsNameLineColumnAndField) {
  Result<ClusterSpec> spec = ParseClusterSpec(R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: x}
spec:
  tiers:
    - {name: nvlink, bandwidthGbps: 3600, fanout: many}
  generator: {gpus: 8, gpuModel: H100-SXM}
)");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().ToString(),
            "6:51: spec.tiers[0].fanout: expected a whole number from 1 to 16777216, got 'many'");
}

// Fuzz finds: a field name or a name with a line break made two-line
// errors ("node 'a\nb' is listed twice"); a name that is not UTF-8 made
// `unipool topo -o json` throw.
TEST(ClusterReaderTest, ErrorsStayOnOneLineAndNamesAreText) {
  constexpr const char* kHead = R"(apiVersion: unipool/v1
kind: Cluster
metadata: {name: x}
spec:
  tiers: [{name: node, bandwidthGbps: 3600}, {name: top, bandwidthGbps: 100}]
)";
  Result<ClusterSpec> spec = ParseClusterSpec(
      std::string(kHead) + "  nodes: [{name: \"a\\nb\", gpus: 2, gpuModel: H100-SXM}]\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "spec.nodes[0].name: expected UTF-8 text without control characters, got 'a\\nb'");
  spec =
      ParseClusterSpec(std::string(kHead) +
                       "  nodes: [{name: a, gpus: 2, gpuModel: H100-SXM, labels: {x\xff: b}}]\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("spec.nodes[0].labels: expected a name of UTF-8 text"),
            std::string::npos)
      << spec.status().message();
  spec = ParseClusterSpec(
      std::string(kHead) +
      "  nodes: [{name: a, gpus: 2, gpuModel: H100-SXM, labels: {x: \"\\x01\"}}]\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "spec.nodes[0].labels.x: expected UTF-8 text without control characters, got '\x01'");
  spec = ParseClusterSpec(std::string(kHead) + "  \"x\\ny\": 1\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message().find('\n'), std::string::npos);
  EXPECT_NE(spec.status().message().find("unknown field 'x\\ny'"), std::string::npos);
}

TEST(ClusterReaderTest, WithFileFormatsBothKinds) {
  EXPECT_EQ(WithFile("c.yaml", InvalidArgument("bad", {3, 4})), "c.yaml:3:4: bad");
  EXPECT_EQ(WithFile("c.yaml", InvalidArgument("bad")), "c.yaml: bad");
}

TEST(SummaryWriterTest, HumanUnits) {
  EXPECT_EQ(Thousands(1048576), "1,048,576");
  EXPECT_EQ(Thousands(-1000), "-1,000");
  EXPECT_EQ(Thousands(12), "12");
  EXPECT_EQ(HumanBandwidth(Gbps(400)), "400 Gb/s");
  EXPECT_EQ(HumanBandwidth(Gbps(3200)), "3.20 Tb/s");
  EXPECT_EQ(HumanPower(Watts(11468800)), "11.47 MW");
  EXPECT_EQ(HumanFlops(FlopRate(989400)), "989.4 TFLOP/s");
}

}  // namespace
}  // namespace unipool::io
