// Containers, end to end: agents run jobs that name an image through
// bubblewrap (the runtime that works unprivileged here) over a root
// filesystem the test builds from busybox. The task sees its image, its
// volumes and directories, its user, its GPUs and the torchrun environment,
// and nothing else of the host. The seed's Pod runs unchanged but for its
// image and command. Skipped without root or bwrap (scripts/install-deps.sh).
#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

constexpr const char* kUser = "unipool-ta";

// A root filesystem of busybox and its shell commands.
void MakeImage(const std::string& root) {
  fs::create_directories(root + "/bin");
  fs::copy_file("/usr/bin/busybox", root + "/bin/busybox", fs::copy_options::overwrite_existing);
  for (const char* cmd : {"sh", "id", "ls", "cat", "env", "test", "echo"}) {
    fs::create_symlink("busybox", root + "/bin/" + cmd);
  }
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
}

class ContainerE2eTest : public AgentE2eTest {
 protected:
  explicit ContainerE2eTest(const std::string& cluster = "testdata/clusters/local-3x2.yaml",
                            const std::string& gpus = "2")
      : AgentE2eTest({}, {"--container-runtime", "bwrap"}, {{"tenant-a", kUser}}, cluster, gpus) {}

  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the agent switches to the tenant's user";
    if (!fs::exists("/usr/bin/bwrap") || !fs::exists("/usr/bin/busybox")) {
      GTEST_SKIP() << "needs bubblewrap and busybox-static (scripts/install-deps.sh)";
    }
    ASSERT_NE(EnsureUser(kUser), static_cast<uid_t>(-1));
    AgentE2eTest::SetUp();
    image_ = server_.dir() + "/image";
    MakeImage(image_);
    pvc_ = server_.dir() + "/pvc";
    agent_extra_.insert(agent_extra_.end(), {"--pvc-root", pvc_});
  }
  std::string Out(int64_t id, const std::string& name) { return ReadAll(Ckpt(id) + "/" + name); }

  std::string image_, pvc_;
};

TEST_F(ContainerE2eTest, ATaskSeesOnlyItsImageItsVolumesAndItsEnvironment) {
  ASSERT_EQ(server_.Call("PUT", "/v1/queues/team-a", "admin", "{}").status, 200);
  const std::string data = server_.dir() + "/volume";  // (not dir()/data: the server's store)
  fs::create_directories(data);
  std::ofstream(data + "/hello") << "hello from the host\n";
  StartAgent("n0");
  WaitNodesUp(1);
  const std::string out = "$UNIPOOL_CHECKPOINT_DIR";
  const std::vector<std::string> script = {
      "id -u > " + out + "/uid",
      "ls / > " + out + "/root",
      "cat /data/hello > " + out + "/data",
      "env > " + out + "/env",
      "(test -e " + server_.dir() + "/tokens.yaml && echo visible || echo hidden) > " + out +
          "/host",
      "(echo x > /data/w && echo writable || echo read-only) > " + out + "/mode 2>/dev/null",
      "echo '{\"step\": 3}' >> $UNIPOOL_REPORT_FILE"};
  std::string yaml =
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: boxed}\nspec:\n"
      "  image: " +
      image_ + "\n  command:\n    - sh\n    - -c\n    - |\n";
  for (const std::string& line : script) yaml += "      " + line + "\n";
  yaml +=
      "  queue: team-a\n  gpus: 2\n  launch: per-node\n  workingDir: /bin\n  restartPolicy: "
      "{maxRestarts: 0}\n"
      "  volumes: [{name: data, source: 'hostPath:" +
      data + "', mountPath: /data, readOnly: true}]\n";
  HttpReply r = server_.Call("POST", "/v1/jobs", "tenant-a", yaml, "application/yaml");
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = r.json()["id"];
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded" || j["state"] == "Failed"; }, 30,
      "ended");
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(std::stoul(Out(id, "uid")), getpwnam(kUser)->pw_uid) << "the tenant's user";
  EXPECT_EQ(Out(id, "root"), "bin\ndata\ndev\nproc\ntmp\n") << "the image and its mounts only";
  EXPECT_EQ(Out(id, "data"), "hello from the host\n")
      << ReadAll(server_.dir() + "/agents/n0/jobs/" + std::to_string(id) + "/run-1/rank-0.log");
  EXPECT_EQ(Out(id, "host"), "hidden\n") << "the host's files are not there";
  EXPECT_EQ(Out(id, "mode"), "read-only\n");
  const std::string env = Out(id, "env");
  for (const char* want : {"CUDA_VISIBLE_DEVICES=0,1", "RANK=0", "WORLD_SIZE=2",
                           "MASTER_ADDR=", "MASTER_PORT=", "LOCAL_RANK=0", "UNIPOOL_JOB_ID="}) {
    EXPECT_NE(env.find(want), std::string::npos) << want << " missing:\n" << env;
  }
  EXPECT_EQ(env.find(server_.token("join")), std::string::npos);
  EXPECT_EQ(done["progress"]["step"], 3) << "its report file reached the agent";
}

// A node without a runtime refuses a job with an image, saying why.
TEST_F(ContainerE2eTest, ANodeWithoutARuntimeSaysSo) {
  agent_extra_ = {"--container-runtime", "none"};
  StartAgent("n0");
  WaitNodesUp(1);
  const int64_t id = SubmitYaml(
      "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: img}\nspec:\n  image: " + image_ +
      "\n  command: [sh, -c, 'true']\n  gpus: 1\n  restartPolicy: {maxRestarts: 0}\n");
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Failed"; }, 30, "failed");
  EXPECT_NE(done["message"].get<std::string>().find("this node runs no container runtime"),
            std::string::npos)
      << done.dump();
}

class SeedPodE2eTest : public ContainerE2eTest {
 protected:
  SeedPodE2eTest() : ContainerE2eTest("testdata/clusters/local-1x8.yaml", "8") {}
};

// The seed's Pod (examples/jobs/k8s-pod.yaml): only its image and command
// changed, to the test's image and a command busybox has. Its claims are
// directories under the agent's --pvc-root; its command runs once.
TEST_F(SeedPodE2eTest, TheSeedsPodRunsInItsImage) {
  // Claims are per queue (the pod's is default): PVC_ROOT/QUEUE/CLAIM.
  for (const char* claim : {"training-data-pvc", "training-output-pvc"}) {
    fs::create_directories(pvc_ + "/default/" + claim);
  }
  std::ofstream(pvc_ + "/default/training-data-pvc/shard-0") << "tokens\n";
  StartAgent("n0");
  WaitNodesUp(1);
  std::string pod = ReadAll(std::string(UNIPOOL_SOURCE_DIR) + "/examples/jobs/k8s-pod.yaml");
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = pod.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    pod.replace(at, from.size(), to);
  };
  replace("image: registry.example.com/ai-training:v1.0", "image: " + image_);
  replace("command: [\"torchrun\", \"--nproc_per_node=8\", \"train_ddp.py\"]",
          "command: [sh, -c, 'echo $RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES $PET_NPROC_PER_NODE "
          "> /output/seen; ls /data > /output/data']");
  const int64_t id = SubmitYaml(pod);
  ASSERT_GT(id, 0);
  Json done = WaitFor(
      id, [](const Json& j) { return j["state"] == "Succeeded" || j["state"] == "Failed"; }, 30,
      "ended");
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(ReadAll(pvc_ + "/default/training-output-pvc/seen"), "0 1 0,1,2,3,4,5,6,7 8\n");
  EXPECT_EQ(ReadAll(pvc_ + "/default/training-output-pvc/data"), "shard-0\n");
}

}  // namespace
}  // namespace unipool::testing
