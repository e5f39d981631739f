#include "io/job_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/cluster_reader.h"
#include "io/job_spec_test_util.h"

namespace unipool::io {
namespace {

using namespace unipool::io::spec_test;

// Every field, one by one, so that a failure names the field.
void ExpectSameJob(const JobRequest& a, const JobRequest& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.command, b.command);
  EXPECT_EQ(a.args, b.args);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.working_dir, b.working_dir);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.gpus_per_node, b.gpus_per_node);
  EXPECT_EQ(a.gpus_per_task, b.gpus_per_task);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.exclusive, b.exclusive);
  EXPECT_EQ(a.spread, b.spread);
  EXPECT_EQ(a.queue, b.queue);
  EXPECT_EQ(a.priority_class, b.priority_class);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.preemptible, b.preemptible);
  EXPECT_EQ(a.min_gpus, b.min_gpus);
  EXPECT_EQ(a.elastic_continue, b.elastic_continue);
  EXPECT_EQ(a.restart.max_restarts, b.restart.max_restarts);
  EXPECT_EQ(a.restart.backoff, b.restart.backoff);
  EXPECT_EQ(a.checkpoint_dir, b.checkpoint_dir);
  EXPECT_EQ(a.checkpoint_interval, b.checkpoint_interval);
  EXPECT_EQ(a.within, b.within);
  EXPECT_EQ(a.partition, b.partition);
  EXPECT_EQ(a.data_locality, b.data_locality);
  EXPECT_EQ(a.volumes, b.volumes);
  ASSERT_EQ(a.mounts.size(), b.mounts.size());
  for (size_t i = 0; i < a.mounts.size(); ++i) {
    EXPECT_EQ(a.mounts[i].source, b.mounts[i].source);
    EXPECT_EQ(a.mounts[i].path, b.mounts[i].path);
    EXPECT_EQ(a.mounts[i].read_only, b.mounts[i].read_only);
  }
  EXPECT_EQ(a.time_limit, b.time_limit);
  EXPECT_EQ(a.limits, b.limits);
  EXPECT_EQ(a.launch, b.launch);
  EXPECT_EQ(a.image, b.image);
  EXPECT_EQ(a.source_kind, b.source_kind);
}

constexpr const char* kFullNative = R"(apiVersion: unipool/v1
kind: Job
metadata:
  name: llm-pretrain-7
  labels: {team: nlp, cost-center: "42"}
spec:
  command: [torchrun, --nproc_per_node=8]
  args: [train.py, --lr, 3e-4, "", "é€𝄞"]
  env:
    - {name: NCCL_DEBUG, value: INFO}
    - {name: EMPTY}
    - name: _PATHS
      value: "a:b"
  workingDir: /workspace
  image: registry.example.com/llm:2
  gpus: 64
  gpusPerNode: 8
  elastic: {minGpus: 16, onResize: continue}
  launch: per-node
  queue: research/nlp
  priorityClassName: high
  priority: -5
  preemptible: false
  restartPolicy: {maxRestarts: 7, backoff: 90s}
  checkpoint: {dir: ckpt/llm, interval: 30m}
  topology: {within: pod}
  partition: east
  dataLocality: west
  volumes: [imagenet, {name: c4, source: "s3://bucket/c4"}]
  timeLimit: 2d
  resources: {cpu: 1500m, memory: 64Gi, pids: 4096}
)";

TEST(JobSpecTest, ReadsEveryNativeField) {
  const ParsedJob p = Read(kFullNative);
  const JobRequest& j = p.job;
  EXPECT_EQ(j.name, "llm-pretrain-7");
  EXPECT_EQ(j.labels, (Pairs{{"cost-center", "42"}, {"team", "nlp"}}));
  EXPECT_EQ(j.command, (Strings{"torchrun", "--nproc_per_node=8"}));
  EXPECT_EQ(j.args, (Strings{"train.py", "--lr", "3e-4", "", "é€𝄞"}));
  EXPECT_EQ(j.env, (Pairs{{"NCCL_DEBUG", "INFO"}, {"EMPTY", ""}, {"_PATHS", "a:b"}}));
  EXPECT_EQ(j.working_dir, "/workspace");
  EXPECT_EQ(j.image, "registry.example.com/llm:2");
  EXPECT_EQ(j.gpus, 64);
  EXPECT_EQ(j.gpus_per_node, 8);
  EXPECT_EQ(j.min_gpus, 16);
  EXPECT_TRUE(j.elastic_continue);
  EXPECT_EQ(j.launch, LaunchMode::kPerNode);
  EXPECT_EQ(j.queue, "research/nlp");
  EXPECT_EQ(j.priority_class, "high");
  EXPECT_EQ(j.priority, -5);
  EXPECT_FALSE(j.preemptible);
  EXPECT_EQ(j.restart.max_restarts, 7);
  EXPECT_EQ(j.restart.backoff, Seconds(90));
  EXPECT_EQ(j.checkpoint_dir, "ckpt/llm");
  EXPECT_EQ(j.checkpoint_interval, Seconds(1800));
  EXPECT_EQ(j.within, "pod");
  EXPECT_EQ(j.partition, "east");
  EXPECT_EQ(j.data_locality, "west");
  EXPECT_EQ(j.volumes, (Strings{"imagenet", "c4=s3://bucket/c4"}));
  EXPECT_EQ(j.time_limit, Seconds(2 * 86400));
  EXPECT_EQ(j.limits, (TaskLimits{1500, int64_t{64} << 30, 4096}));
  EXPECT_EQ(j.source_kind, "unipool/v1 Job");
  EXPECT_TRUE(p.ignored.empty());
}

TEST(JobSpecTest, NativeDefaults) {
  const JobRequest j = Read(R"(apiVersion: unipool/v1
kind: Job
metadata: {name: tiny}
spec: {command: [python3, t.py], gpus: 1}
)")
                           .job;
  EXPECT_EQ(j.queue, "default");
  EXPECT_TRUE(j.preemptible);
  EXPECT_EQ(j.gpus_per_node, 0);
  EXPECT_EQ(j.min_gpus, 0);
  EXPECT_EQ(j.restart.max_restarts, 3);
  EXPECT_EQ(j.restart.backoff, Seconds(10));
  EXPECT_EQ(j.launch, LaunchMode::kPerGpu);
  EXPECT_EQ(j.time_limit, Duration());
  EXPECT_TRUE(j.labels.empty() && j.env.empty() && j.volumes.empty());
}

TEST(JobSpecTest, NativeEnvMappingKeepsTheOrderWritten) {
  const JobRequest j = Read(R"(apiVersion: unipool/v1
kind: Job
metadata: {name: env}
spec:
  command: [env]
  gpus: 1
  env: {ZED: "1", ALPHA: two, MIDDLE: ""}
)")
                           .job;
  EXPECT_EQ(j.env, (Pairs{{"ZED", "1"}, {"ALPHA", "two"}, {"MIDDLE", ""}}));
}

TEST(JobSpecTest, JsonIsReadAsYaml) {
  const ParsedJob p = Read(R"({
  "apiVersion": "unipool/v1", "kind": "Job",
  "metadata": {"name": "from-json", "labels": {"a": "b"}},
  "spec": {"command": ["python3", "t.py"], "gpus": 16, "gpusPerNode": 8,
           "env": [{"name": "X", "value": "1"}], "preemptible": false,
           "restartPolicy": {"maxRestarts": 0}}
})");
  EXPECT_EQ(p.job.name, "from-json");
  EXPECT_EQ(p.job.gpus, 16);
  EXPECT_EQ(p.job.gpus_per_node, 8);
  EXPECT_EQ(p.job.env, (Pairs{{"X", "1"}}));
  EXPECT_FALSE(p.job.preemptible);
  EXPECT_EQ(p.job.restart.max_restarts, 0);
}

TEST(JobSpecTest, ReadsTheTrainingExample) {
  const JobRequest j = ReadExample("train.yaml").job;
  EXPECT_EQ(j.name, "ddp-train");
  EXPECT_EQ(j.command, (Strings{"/usr/bin/python3", "examples/jobs/train_ddp.py"}));
  EXPECT_EQ(j.args, (Strings{"--steps", "200", "--checkpoint-every", "20"}));
  EXPECT_EQ(j.gpus, 4);
  EXPECT_EQ(j.gpus_per_node, 2);
  EXPECT_EQ(j.launch, LaunchMode::kPerGpu);
  EXPECT_EQ(j.priority_class, "normal");
  EXPECT_EQ(j.checkpoint_interval, Seconds(300));
  EXPECT_EQ(j.time_limit, Seconds(3600));
}

// nodes: {min, max}, as torchrun's --nnodes=2:3: three nodes of
// gpusPerNode, elastic down to two; spec.gpus follows or must agree.
TEST(JobSpecTest, ARangeOfNodesIsAnElasticJobOfANodePerTask) {
  const std::string head =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: r}\nspec:\n"
      "  command: [python3, train.py]\n";
  const ParsedJob p = Read(head +
                           "  nodes: {min: 2, max: 3}\n  gpusPerNode: 4\n"
                           "  elastic: {onResize: continue}\n");
  EXPECT_EQ(p.job.gpus, 12);
  EXPECT_EQ(p.job.nodes, 3);
  EXPECT_EQ(p.job.gpus_per_node, 4);
  EXPECT_EQ(p.job.min_gpus, 8);
  EXPECT_TRUE(p.job.elastic_continue);
  const ParsedJob q = Read(head + "  gpus: 16\n  nodes: {min: 1, max: 2}\n");
  EXPECT_EQ(q.job.gpus_per_node, 8);
  EXPECT_EQ(q.job.min_gpus, 8);
  EXPECT_FALSE(q.job.elastic_continue);
  EXPECT_EQ(ErrorOf(head + "  gpus: 16\n  nodes: {min: 2, max: 3}\n  gpusPerNode: 4\n"),
            "job.yaml:6:9: spec.gpus: 16 is not nodes.max (3) x gpusPerNode (4)");
  EXPECT_EQ(ErrorOf(head + "  nodes: {min: 2, max: 3}\n"),
            "job.yaml:6:10: spec.nodes: a range of nodes needs spec.gpusPerNode (the GPUs on "
            "each node)");
  EXPECT_EQ(ErrorOf(head + "  nodes: {min: 4, max: 3}\n  gpusPerNode: 4\n").find("spec.nodes.min"),
            15u);  // after "job.yaml:6:10: "
  EXPECT_NE(ErrorOf(head + "  nodes: {min: 2, max: 3}\n  gpusPerNode: 4\n"
                           "  elastic: {minGpus: 8}\n")
                .find("spec.nodes.min says the minimum already"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(head + "  nodes: {min: 2, max: 3}\n  gpusPerTask: 4\n").find("give gpusPerNode"),
      std::string::npos);
  EXPECT_NE(ErrorOf(head + "  nodes: {min: 2, max: 3}\n  gpusPerNode: 4\n  exclusive: true\n")
                .find("an exclusive job has a fixed size"),
            std::string::npos);
  EXPECT_NE(ErrorOf(head + "  nodes: {min: 2, maximum: 3}\n  gpusPerNode: 4\n").find("maximum"),
            std::string::npos);
}

// Native secret values are kept apart: the stored form has their names.
TEST(JobSpecTest, SecretValuesAreNotInTheStoredForm) {
  const ParsedJob p = Read(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: s}\nspec:\n  command: [x]\n"
      "  gpus: 1\n  env: [{name: DB_PASSWORD, value: hunter2, secret: true}, {name: A, "
      "value: '1'}]\n");
  EXPECT_EQ(p.job.env, (Pairs{{"A", "1"}}));
  EXPECT_EQ(p.job.secret_env, (Pairs{{"DB_PASSWORD", "hunter2"}}));
  const json j = JobRequestToJson(p.job);
  EXPECT_EQ(j.dump().find("hunter2"), std::string::npos) << j.dump();
  EXPECT_EQ(j["secretEnv"], json::array({"DB_PASSWORD"}));
  Result<JobRequest> back = JobRequestFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->secret_env, (Pairs{{"DB_PASSWORD", ""}}))
      << "the name; the server fills the value";
  Result<ParsedJob> bad = ReadJobSpec(
      "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - command: [x]\n"
      "    resources: {limits: {nvidia.com/gpu: 1}}\n"
      "    env: [{name: B, valueFrom: {secretKeyRef: {name: ../x, key: k}}}]\n",
      "pod.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a secret's name and key have no '/'"), std::string::npos);
}

TEST(JobSpecTest, IgnoredListIsBounded) {
  std::string extra;
  for (int i = 0; i < 1500; ++i) extra += "  x" + std::to_string(i) + ": 1\n";
  const ParsedJob p = Read(Pod("", extra, kOneGpu));
  ASSERT_EQ(p.ignored.size(), kMaxListEntries);
  EXPECT_EQ(p.ignored.back(), "...: 478 more ignored fields are not listed");  // 1501 in all
}

// Errors are one line: "SOURCE:LINE:COL: path: cause".
TEST(JobSpecTest, ErrorsNameThePlaceAndTheField) {
  EXPECT_EQ(ErrorOf("apiVersion: unipool/v1\nkind: Job\nmetadata: {name: a}\n"
                    "spec:\n  command: [x]\n  gpus: 0\n"),
            "job.yaml:6:9: spec.gpus: expected a whole number from 1 to 16777216, got '0'");
  EXPECT_EQ(ErrorOf(Pod("", "", "")),
            "job.yaml:7:3: spec.containers: requests no nvidia.com/gpu (set "
            "resources.limits[nvidia.com/gpu] on the training container)");
}

struct BadCase {
  std::string text;
  std::string error;  // a part of the message
};

std::string Native(const std::string& spec) {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  command: [x]\n" + spec;
}

// "a0, a1, ..." or, with a suffix, "k0: v, k1: v, ...".
std::string Many(const std::string& item, int n, const std::string& suffix = "") {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + item + std::to_string(i) + suffix;
  return s;
}

TEST(JobSpecTest, RejectsBadSpecs) {
  const std::string big(kMaxStringBytes + 1, 'a');
  const std::vector<BadCase> cases = {
      {std::string(kMaxSpecBytes + 1, '#'), "job.yaml: the spec is 1048577 bytes; at most"},
      {Native("  gpus: 1\n  workingDir: " + big + "\n"),
       "spec.workingDir: 65537 bytes; at most 65536"},
      {Native("  gpus: 1\n  args: [" + Many("a", 1025) + "]\n"),
       "spec.args: 1025 entries; at most 1024"},
      {"apiVersion: unipool/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {" +
           Many("k", 65, ": v") + "}\n",
       "metadata.labels: 65 entries; at most 64"},
      {Native("  gpus: 1\n  image: a\xff\n"), "spec.image: expected UTF-8 text"},
      {Native("  gpus: 1\n  image: a\xc0\x80\n"), "spec.image: expected UTF-8 text"},  // overlong
      {Native("  gpus: 1\n  args: [\xed\xa0\x80]\n"), "spec.args[0]: expected UTF-8 text"},
      {Native("  gpus: 8\n  gpusPerNode: 3\n"), "spec.gpusPerNode: 3 does not divide spec.gpus"},
      {Native("  gpus: 8\n  elastic: {minGpus: 9}\n"), "spec.elastic.minGpus: expected a whole"},
      {Native("  gpus: 8\n  elastic: {minGpus: 4, onResize: later}\n"),
       "spec.elastic.onResize: expected restart or continue, got 'later'"},
      {Native("  gpus: 1\n  env: [{name: A}, {name: A}]\n"), "spec.env[1].name: 'A' is set twice"},
      {Native("  gpus: 1\n  env: {A-B: x}\n"), "spec.env.A-B: expected an environment variable"},
      {Native("  gpus: 1\n  gpuz: 2\n"), "spec: unknown field 'gpuz' (did you mean 'gpus'?)"},
      {Native("  gpus: 1\n  priority: 1000001\n"), "spec.priority: expected a whole number"},
      {Native("  gpus: 1\n  resources: {memory: 64GB}\n"),
       "spec.resources.memory: '64GB' is not a quantity: unknown suffix 'GB'"},
      {Native("  gpus: 1\n  resources: {cpu: 0}\n"),
       "spec.resources.cpu: '0' is not a quantity: must be more than 0"},
      {Native("  gpus: 1\n  resources: {cpu: [2]}\n"), "spec.resources.cpu: expected a quantity"},
      {Native("  gpus: 1\n  resources: {pids: 0}\n"), "spec.resources.pids: expected a whole"},
      {Native("  gpus: 1\n  resources: {gpu: 1}\n"), "spec.resources: unknown field 'gpu'"},
      {Pod("", "", "    resources: {limits: {nvidia.com/gpu: 1, memory: lots}}\n"),
       "spec.containers[0].resources.limits.memory: 'lots' is not a quantity"},
      {Native("  gpus: \"two\\nlines\"\n"),
       "spec.gpus: expected a whole number from 1 to "
       "16777216, got 'two\\nlines'"},
      {Pod("", "", "    resources: {limits: {nvidia.com/gpu: 2}, requests: {nvidia.com/gpu: 1}}\n"),
       "spec.containers[0].resources.requests[nvidia.com/gpu]: 1 differs from limits (2)"},
      {Pod("", "", kOneGpu + "  - name: d\n    command: [x]\n" + kOneGpu),
       "spec.containers[1]: a second container requests nvidia.com/gpu"},
      {Pod("", "", "    env: [{value: x}]\n" + kOneGpu),
       "spec.containers[0].env[0].name: required"},
      {Pod("", "  restartPolicy: Sometimes\n", kOneGpu),
       "spec.restartPolicy: expected Always, OnFailure or Never"},
      {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 16777216\n"
       "  template:\n    spec:\n      containers:\n      - command: [x]\n"
       "        resources: {limits: {nvidia.com/gpu: 2}}\n",
       "spec.parallelism: 16777216 pods of 2 GPUs exceed 16777216 GPUs"},
      {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\nspec:\n"
       "  pytorchReplicaSpecs: {Launcher: {}}\n",
       "spec.pytorchReplicaSpecs: expected a Master or a Worker replica spec"},
      {Pod("", "", "    env: [{name: A, value: x}]\n" + kOneGpu) +
           "  containers: [{command: [y], resources: {limits: {nvidia.com/gpu: 1}}}]\n",
       "job.yaml:11:3: spec.containers: set twice"},
      {"[1, 2]", "job: expected a mapping with apiVersion and kind"},
      {"", "no YAML document here"},
  };
  for (const BadCase& c : cases) {
    const std::string got = ErrorOf(c.text);
    EXPECT_NE(got.find(c.error), std::string::npos) << got << "\nwanted: " << c.error;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

// Every file in testdata/jobs/bad/ fails with the one-line error of its
// .err file. UNIPOOL_UPDATE_GOLDEN=1 rewrites the .err files instead.
TEST(JobSpecTest, BadFilesGiveTheirGoldenErrors) {
  const fs::path dir = fs::path(kRoot) / "testdata/jobs/bad";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 25u);
  const bool update = std::getenv("UNIPOOL_UPDATE_GOLDEN") != nullptr;
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    Result<ParsedJob> job = ReadJobSpec(Slurp(file), name);
    ASSERT_FALSE(job.ok()) << name;
    const std::string& got = job.status().message();
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
    EXPECT_EQ(got.rfind(name + ":", 0), 0u) << got;
    const fs::path golden = fs::path(file).replace_extension(".err");
    if (update) {
      std::ofstream(golden) << got << "\n";
    } else {
      EXPECT_EQ(got + "\n", Slurp(golden)) << name;
    }
  }
}

JobRequest FullRequest() {
  JobRequest r;
  r.name = "full";
  r.labels = {{"a", "1"}, {"b", ""}};
  r.command = {"python3", "-u"};
  r.args = {"t.py", "", "--x=é"};
  r.env = {{"Z", "last"}, {"A", ""}};
  r.working_dir = "/w";
  r.gpus = 48;
  r.gpus_per_node = 8;
  r.gpus_per_task = 4;
  r.nodes = 6;
  r.exclusive = true;
  r.spread = Spread::kSpread;
  r.queue = "q/sub";
  r.priority_class = "low";
  r.priority = -1000000;
  r.preemptible = false;
  r.min_gpus = 8;
  r.elastic_continue = true;
  r.restart = {10000, Nanoseconds(1234567891)};
  r.checkpoint_dir = "c";
  r.checkpoint_interval = Nanoseconds(int64_t{1} << 62);
  r.within = "rack";
  r.partition = "p1";
  r.data_locality = "p2";
  r.volumes = {"v", "w=pvc:x"};
  r.mounts = {{"pvc:x", "/w", true}, {"emptyDir", "/scratch", false}};
  r.time_limit = Seconds(5);
  r.limits = {250, int64_t{3} << 29, 64};
  r.launch = LaunchMode::kPerNode;
  r.image = "img";
  r.source_kind = "v1 Pod";
  return r;
}

TEST(JobSpecTest, JsonRoundTripsEveryField) {
  const JobRequest r = FullRequest();
  const json j = JobRequestToJson(r);
  Result<JobRequest> back = JobRequestFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameJob(*back, r);
  // Through text, as the store keeps it.
  Result<JobRequest> text = JobRequestFromJson(json::parse(j.dump()));
  ASSERT_TRUE(text.ok()) << text.status().message();
  ExpectSameJob(*text, r);
  EXPECT_EQ(j["launch"], "per-node");
  EXPECT_EQ(j["restart"]["backoffNs"], 1234567891);
}

// A record written before gpusPerTask existed: its gpusPerNode was GPUs
// per task, and stays so.
TEST(JobSpecTest, OldStoredRecordsKeepTheirShape) {
  json j = JobRequestToJson(FullRequest());
  for (const char* key : {"shapeVersion", "gpusPerTask", "nodes", "exclusive", "placement"}) {
    j.erase(key);
  }
  j["gpusPerNode"] = 4;
  Result<JobRequest> old = JobRequestFromJson(j);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->gpus_per_task, 4);
  EXPECT_EQ(old->gpus_per_node, 0);
  EXPECT_EQ(old->spread, Spread::kPack);
}

// The shape's vocabulary: gpusPerNode (a node each), gpusPerTask (may
// share), nodes, exclusive, placement; and what does not add up.
TEST(JobSpecTest, ShapeFieldsSayHowTheGangSpreads) {
  auto spec = [](const std::string& fields) {
    return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: s}\nspec:\n  command: [x]\n" +
           fields;
  };
  ParsedJob per_node = Read(spec("  gpus: 4\n  gpusPerNode: 2\n"));
  EXPECT_EQ(per_node.job.gpus_per_node, 2);
  ASSERT_EQ(per_node.warnings.size(), 1u);
  EXPECT_NE(per_node.warnings[0].find("spec.gpusPerNode: the GPUs on each node: 2 nodes x 2 GPUs"),
            std::string::npos)
      << per_node.warnings[0];
  ParsedJob nodes = Read(spec("  gpus: 12\n  nodes: 3\n  exclusive: true\n"));
  EXPECT_EQ(nodes.job.gpus_per_node, 4);
  EXPECT_EQ(nodes.job.nodes, 3);
  EXPECT_TRUE(nodes.job.exclusive);
  EXPECT_TRUE(nodes.warnings.empty());
  ParsedJob spread =
      Read(spec("  gpus: 8\n  gpusPerTask: 2\n  placement: spread\n"
                "  launch: per-task\n"));
  EXPECT_EQ(spread.job.gpus_per_task, 2);
  EXPECT_EQ(spread.job.spread, Spread::kSpread);
  EXPECT_EQ(spread.job.launch, LaunchMode::kPerTask);
  for (const auto& [fields, error] : std::vector<std::pair<std::string, std::string>>{
           {"  gpus: 8\n  gpusPerNode: 4\n  gpusPerTask: 2\n",
            "spec.gpusPerTask: give gpusPerNode (the GPUs on each node) or gpusPerTask"},
           {"  gpus: 12\n  nodes: 5\n", "spec.nodes: 5 nodes cannot share spec.gpus (12) evenly"},
           {"  gpus: 12\n  nodes: 2\n  gpusPerNode: 4\n",
            "spec.nodes: 2 nodes cannot share spec.gpus (12) evenly at gpusPerNode 4"},
           {"  gpus: 8\n  nodes: 2\n  gpusPerTask: 2\n",
            "spec.nodes: 2 nodes with gpusPerTask: give nodes alone or with gpusPerNode"},
           {"  gpus: 8\n  gpusPerTask: 3\n", "spec.gpusPerTask: 3 does not divide spec.gpus (8)"},
           {"  gpus: 8\n  placement: wide\n", "spec.placement: expected pack or spread"},
           {"  gpus: 8\n  volumes: [{name: v, source: 'pvc:..', mountPath: /v}]\n",
            "spec.volumes[0].source: expected hostPath:/DIR, pvc:CLAIM"},
           {"  gpus: 8\n  exclusive: true\n  elastic: {minGpus: 4}\n",
            "spec.elastic: an exclusive job has a fixed size"}}) {
    Result<ParsedJob> r = ReadJobSpec(spec(fields), "job.yaml");
    ASSERT_FALSE(r.ok()) << fields;
    EXPECT_NE(r.status().message().find(error), std::string::npos) << r.status().message();
  }
}

TEST(JobSpecTest, EveryExampleRoundTrips) {
  int files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(kRoot) / "examples/jobs")) {
    if (e.path().extension() != ".yaml") continue;
    ++files;
    const ParsedJob p = ReadExample(e.path().filename().string());
    Result<JobRequest> back = JobRequestFromJson(JobRequestToJson(p.job));
    ASSERT_TRUE(back.ok()) << e.path() << ": " << back.status().message();
    ExpectSameJob(*back, p.job);
  }
  EXPECT_GE(files, 4);
}

TEST(JobSpecTest, FromJsonRejectsBadInput) {
  const json good = JobRequestToJson(FullRequest());
  struct Edit {
    std::function<void(json&)> edit;
    std::string error;
  };
  const std::vector<Edit> edits = {
      {[](json& j) { j = json::array(); }, "stored job: expected an object"},
      {[](json& j) { j.erase("name"); }, "stored job: name: missing"},
      {[](json& j) { j["name"] = 7; }, "stored job: name: expected a string"},
      {[](json& j) { j["name"] = "Not_A_Label"; }, "stored job: name: expected a DNS-1123"},
      {[](json& j) { j["gpus"] = "8"; }, "stored job: gpus: expected a whole number from 1"},
      {[](json& j) { j["gpus"] = 0; }, "stored job: gpus: expected a whole number"},
      {[](json& j) { j["gpus"] = 18446744073709551615ull; }, "stored job: gpus: expected"},
      {[](json& j) { j["gpus"] = 1.5; }, "stored job: gpus: expected"},
      {[](json& j) { j["gpusPerNode"] = 5; }, "stored job: gpusPerNode: does not divide"},
      {[](json& j) { j["minGpus"] = 49; }, "stored job: minGpus: expected a whole number"},
      {[](json& j) { j["command"] = json::array(); }, "stored job: command: expected a non-empty"},
      {[](json& j) { j["args"][1] = nullptr; }, "stored job: args[1]: expected a string"},
      {[](json& j) {
         j["env"][0] = {{"name", "A B"}, {"value", ""}};
       },
       "stored job: env[0].name: expected a unique"},
      {[](json& j) { j["env"][0]["extra"] = 1; }, "stored job: env[0].extra: unknown field"},
      {[](json& j) {
         j["labels"] = json::array({{{"key", "b"}, {"value", ""}}, {{"key", "a"}, {"value", ""}}});
       },
       "stored job: labels[1].key: expected non-empty keys, sorted and unique"},
      {[](json& j) { j["launch"] = "per-rank"; },
       "stored job: launch: expected per-gpu, per-node or per-task"},
      {[](json& j) { j["priorityClass"] = "urgent"; }, "stored job: priorityClass: expected"},
      {[](json& j) { j["preemptible"] = "yes"; }, "stored job: preemptible: expected true"},
      {[](json& j) { j["restart"] = 3; }, "stored job: restart: expected an object"},
      {[](json& j) { j["restart"]["backoffNs"] = -1; }, "stored job: restart.backoffNs"},
      {[](json& j) { j["timeLimitNs"] = nullptr; }, "stored job: timeLimitNs: expected"},
      {[](json& j) { j["queue"] = ""; }, "stored job: queue: expected a non-empty string"},
      {[](json& j) { j["surprise"] = true; }, "stored job: surprise: unknown field"},
      {[](json& j) { j["volumes"] = json::array({std::string(kMaxStringBytes + 1, 'v')}); },
       "stored job: volumes[0]: 65537 bytes"},
  };
  for (const Edit& e : edits) {
    json j = good;
    e.edit(j);
    Result<JobRequest> r = JobRequestFromJson(j);
    ASSERT_FALSE(r.ok()) << e.error;
    EXPECT_EQ(r.status().message().rfind(e.error, 0), 0u)
        << r.status().message() << "\nwanted: " << e.error;
  }
}

TEST(JobSpecTest, LaunchModeNames) {
  EXPECT_STREQ(LaunchModeName(LaunchMode::kPerGpu), "per-gpu");
  EXPECT_STREQ(LaunchModeName(LaunchMode::kPerNode), "per-node");
}

}  // namespace
}  // namespace unipool::io
