// A job's shape through the server, on 4 nodes of 8 GPUs (the devbox
// cluster, every node taken as up): nodes, GPUs per node, exclusive nodes,
// pack and spread, and a split the user did not choose, said as it starts.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

class ShapeTest : public ::testing::Test {
 protected:
  void SetUp() override { server_.Start(); }

  // Submits a job of `shape` (spec fields, YAML flow style); its id.
  int64_t Submit(const std::string& name, const std::string& shape) {
    const std::string yaml = "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
                             "}\nspec: {command: [sleep, '1000'], " + shape + "}\n";
    HttpReply r = server_.Call("POST", "/v1/jobs", "admin", yaml, "application/yaml");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
  }
  Json Job(int64_t id) {
    return server_.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
  }
  // Waits until the job is Running; its tasks (node -> GPU count).
  std::map<std::string, int> Tasks(int64_t id) {
    Json j;
    for (int i = 0; i < 100; ++i) {
      j = Job(id);
      if (j["state"] == "Running") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(j["state"], "Running") << j.dump();
    std::map<std::string, int> out;
    for (const Json& t : j["tasks"]) out[t["node"]] = static_cast<int>(t["gpus"].size());
    return out;
  }
  void Cancel(int64_t id) {
    ASSERT_EQ(server_.Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel", "admin").status,
              200);
  }

  TestServer server_;
};

TEST_F(ShapeTest, NodesAndGpusPerNodeLandAsAsked) {
  const int64_t two = Submit("two", "gpus: 4, nodes: 2");
  EXPECT_EQ(Tasks(two).size(), 2u);
  for (const auto& [node, gpus] : Tasks(two)) EXPECT_EQ(gpus, 2) << node;
  const int64_t three = Submit("three", "gpus: 12, gpusPerNode: 4");
  std::map<std::string, int> t = Tasks(three);
  EXPECT_EQ(t.size(), 3u);
  for (const auto& [node, gpus] : t) EXPECT_EQ(gpus, 4) << node;
}

TEST_F(ShapeTest, PackFillsANodeAndSpreadTakesANodePerTask) {
  const int64_t packed = Submit("packed", "gpus: 4, gpusPerTask: 1");
  EXPECT_EQ(Tasks(packed).size(), 1u);
  Cancel(packed);
  const int64_t spread = Submit("spread", "gpus: 4, gpusPerTask: 1, placement: spread");
  std::map<std::string, int> t = Tasks(spread);
  EXPECT_EQ(t.size(), 4u);
  for (const auto& [node, gpus] : t) EXPECT_EQ(gpus, 1) << node;
}

// An exclusive job holds whole nodes (charged for them) and its processes
// use their share: nothing else lands on the rest of those nodes.
TEST_F(ShapeTest, ExclusiveNodesRunNothingElse) {
  const int64_t ex = Submit("ex", "gpus: 4, gpusPerNode: 2, exclusive: true");
  std::map<std::string, int> t = Tasks(ex);
  ASSERT_EQ(t.size(), 2u);
  for (const auto& [node, gpus] : t) EXPECT_EQ(gpus, 8) << "the whole node is held";
  // The agent is told the share: 2 GPUs per node, 4 ranks in all.
  const std::string node = t.begin()->first;
  Json a = server_.Call("GET", "/v1/nodes/" + node + "/assignments", "admin").json();
  ASSERT_EQ(a["items"].size(), 1u) << a.dump();
  EXPECT_EQ(a["items"][0]["world"]["worldSize"], 4);
  for (const Json& task : a["items"][0]["tasks"]) EXPECT_EQ(task["gpus"].size(), 2u);
  // The two other nodes fill; a one-GPU job then finds no room, though the
  // exclusive nodes have 6 idle GPUs each.
  Tasks(Submit("rest", "gpus: 16, gpusPerNode: 8"));
  const int64_t small = Submit("small", "gpus: 1");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Job(small)["state"], "Pending");
  Json summary = server_.Call("GET", "/v1/summary", "admin").json();
  EXPECT_EQ(summary["gpus"]["allocated"], 32) << "exclusive nodes are charged whole";
  Cancel(ex);
  EXPECT_EQ(Tasks(small).size(), 1u);
}

// gpus: 12 with no shape: equal tasks of 6 (the largest share an 8-GPU node
// holds), and the job says so when it starts.
TEST_F(ShapeTest, ASplitTheUserDidNotChooseIsExplained) {
  const int64_t id = Submit("twelve", "gpus: 12");
  std::map<std::string, int> t = Tasks(id);
  EXPECT_EQ(t.size(), 2u);
  for (const auto& [node, gpus] : t) EXPECT_EQ(gpus, 6) << node;
  Json ev = server_.Call("GET", "/v1/jobs/" + std::to_string(id) + "/events", "admin").json();
  std::string started;
  for (const Json& e : ev["items"]) {
    if (e["type"] == "Started") started = e["message"];
  }
  EXPECT_NE(started.find("12 GPUs in tasks of 6, the largest share of 12 that one node (of at "
                         "most 8 GPUs) holds: set spec.gpusPerNode, gpusPerTask or nodes"),
            std::string::npos)
      << started;
}

TEST_F(ShapeTest, ShapesThatCannotFitAreRefusedWithTheirCause) {
  HttpReply r = server_.Call("POST", "/v1/jobs", "admin",
                             "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: big}\n"
                             "spec: {command: [x], gpus: 32, gpusPerNode: 16}\n",
                             "application/yaml");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("spec.gpusPerNode: 16 GPUs on a node, but the largest node has 8"),
            std::string::npos)
      << r.body;
  // Five nodes of one GPU each on four nodes: never.
  const int64_t five = Submit("five", "gpus: 5, gpusPerNode: 1");
  Json j;
  for (int i = 0; i < 40; ++i) {
    j = server_.Call("GET", "/v1/jobs/" + std::to_string(five) + "/explain", "admin").json();
    if (j.dump().find("at most 4 exist") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(j.dump().find("at most 4 exist"), std::string::npos) << j.dump();
}

}  // namespace
}  // namespace unipool::testing
