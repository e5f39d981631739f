// Tenant isolation, end to end, tried as a tenant would attack: agents run
// as root (as in CI) and start two tenants' jobs as the Unix users the test
// creates. Tenant A's job leaves logs, a report file and checkpoints; tenant
// B's job (tests/isolation/attack.py) tries to read, list and write them,
// the server's token file, the agent's token and environment, and to join
// as a node with anything it finds. Every attempt must fail. Skipped when
// not root (users cannot be created or switched to).
#include <grp.h>
#include <pwd.h>

#include "cli/agent_e2e_test_util.h"

namespace unipool::testing {
namespace {

constexpr const char* kUserA = "unipool-ta";
constexpr const char* kUserB = "unipool-tb";

uid_t UidOf(const char* user) {
  const passwd* pw = getpwnam(user);
  return pw == nullptr ? static_cast<uid_t>(-1) : pw->pw_uid;
}

class IsolationE2eTest : public AgentE2eTest {
 protected:
  // Tenant A's token names its user; tenant B's queue does (team-b's runAs).
  IsolationE2eTest() : AgentE2eTest({}, {}, {{"tenant-a", kUserA}}) {}

  static void SetUpTestSuite() {
    if (geteuid() != 0) return;
    for (const char* user : {kUserA, kUserB}) {
      ASSERT_NE(EnsureUser(user), static_cast<uid_t>(-1)) << "useradd " << user;
    }
  }

  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "needs root: it creates users and the agent switches to them";
    AgentE2eTest::SetUp();
    for (const char* q : {"team-a", "team-b"}) {
      const std::string body = std::string(q) == "team-b"
                                   ? std::string("{\"runAs\": \"") + kUserB + "\"}"
                                   : std::string("{}");
      ASSERT_EQ(server_.Call("PUT", std::string("/v1/queues/") + q, "admin", body).status, 200);
    }
    // The attack script, where the tenants' users can read it.
    attack_ = server_.dir() + "/attack.py";
    fs::copy_file(std::string(UNIPOOL_SOURCE_DIR) + "/tests/isolation/attack.py", attack_,
                  fs::copy_options::overwrite_existing);
    chmod(attack_.c_str(), 0644);
    work_ = server_.dir() + "/work";
    fs::create_directories(work_);
    chmod(work_.c_str(), 0755);
    for (const char* n : {"n0", "n1", "n2"}) StartAgent(n);
    WaitNodesUp(3);
  }

  // Submits as `who`; returns the HTTP reply.
  HttpReply Submit(const std::string& who, const std::string& yaml) {
    return server_.Call("POST", "/v1/jobs", who, yaml, "application/yaml");
  }
  int64_t SubmitOk(const std::string& who, const std::string& yaml) {
    HttpReply r = Submit(who, yaml);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
  }
  // A job of one process (one GPU) in `queue` running `command` (a YAML list).
  std::string Spec(const std::string& name, const std::string& queue, const std::string& command,
                   const std::string& extra = "") {
    return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + name +
           "}\nspec:\n  command: " + command + "\n  queue: " + queue +
           "\n  gpus: 1\n  workingDir: " + work_ + "\n  restartPolicy: {maxRestarts: 0}\n" + extra;
  }
  Json WaitEnded(int64_t id) {
    return WaitFor(
        id,
        [](const Json& j) {
          return j["state"] == "Succeeded" || j["state"] == "Failed" || j["state"] == "Cancelled";
        },
        60, "ended");
  }
  std::string AgentDir(const std::string& node) { return server_.dir() + "/agents/" + node; }

  std::string attack_, work_;
};

// Each tenant's job runs as its own user (from the token, and from the
// queue), in a clean environment that has the launch's variables and
// nothing of the agent's.
TEST_F(IsolationE2eTest, EachTenantsJobRunsAsItsUserWithACleanEnvironment) {
  const std::string probe =
      "[sh, -c, 'id -u > $UNIPOOL_CHECKPOINT_DIR/uid; env > $UNIPOOL_CHECKPOINT_DIR/env']";
  const int64_t a = SubmitOk("tenant-a", Spec("who-a", "team-a", probe));
  const int64_t b = SubmitOk("tenant-b", Spec("who-b", "team-b", probe));
  for (auto [id, user] : {std::pair{a, kUserA}, {b, kUserB}}) {
    Json done = WaitEnded(id);
    ASSERT_EQ(done["state"], "Succeeded") << done.dump();
    EXPECT_EQ(done["identity"]["runAs"], user);
    EXPECT_EQ(std::stoul(ReadAll(Ckpt(id) + "/uid")), UidOf(user));
    const std::string env = ReadAll(Ckpt(id) + "/env");
    for (const char* want : {"CUDA_VISIBLE_DEVICES=", "RANK=0", "MASTER_ADDR=", "WORLD_SIZE=1",
                             "UNIPOOL_CHECKPOINT_DIR="}) {
      EXPECT_NE(env.find(want), std::string::npos) << want << " missing:\n" << env;
    }
    EXPECT_NE(env.find(std::string("USER=") + user), std::string::npos) << env;
    EXPECT_EQ(env.find(server_.token("join")), std::string::npos) << "the join token leaked";
    EXPECT_EQ(env.find("UNIPOOL_TOKEN"), std::string::npos) << env;
    struct stat st;
    ASSERT_EQ(stat(Ckpt(id).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, UidOf(user)) << "the checkpoint directory is the job's user's";
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  }
}

// A secret value (env with secret: true) reaches the job's processes and
// nothing else: not the job's API object, its events, lists or watches.
TEST_F(IsolationE2eTest, ASecretValueReachesOnlyTheJobsProcesses) {
  const int64_t id = SubmitOk(
      "tenant-a",
      Spec("secretive", "team-a", "[sh, -c, 'echo $DB_PASSWORD > $UNIPOOL_CHECKPOINT_DIR/seen']",
           "  env: [{name: DB_PASSWORD, value: hunter2-xyzzy, secret: true}]\n"));
  Json done = WaitEnded(id);
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  EXPECT_EQ(ReadAll(Ckpt(id) + "/seen"), "hunter2-xyzzy\n");
  const std::string job = "/v1/jobs/" + std::to_string(id);
  for (const auto& [who, path] : std::vector<std::pair<std::string, std::string>>{
           {"tenant-a", job},
           {"admin", job},
           {"admin", job + "/events"},
           {"admin", "/v1/jobs"},
           {"viewer", "/v1/jobs"},
           {"admin", "/v1/watch?kind=jobs&revision=1&timeoutSeconds=0"}}) {
    HttpReply r = server_.Call("GET", path, who);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.body.find("hunter2"), std::string::npos) << who << " " << path << ": " << r.body;
  }
  EXPECT_EQ(server_.Call("GET", job, "admin").json()["spec"]["secretEnv"],
            Json::array({"DB_PASSWORD"}));
  // A restarted server still has the value for the job's next run.
  server_.Stop();
  server_.Start();
  EXPECT_EQ(server_.Call("GET", job, "admin").json()["spec"]["secretEnv"],
            Json::array({"DB_PASSWORD"}));
}

// Tenant B's job attacks tenant A's job, the agent and the server.
TEST_F(IsolationE2eTest, ATenantsJobReachesNothingThatIsNotItsOwn) {
  // Tenant A: a job that writes a checkpoint file and a log line, and ends.
  const int64_t a = SubmitOk(
      "tenant-a", Spec("victim", "team-a",
                       "[sh, -c, 'echo secret-log-line; echo 1 > $UNIPOOL_CHECKPOINT_DIR/ckpt-1; "
                       "echo \"{\\\"step\\\": 1}\" >> $UNIPOOL_REPORT_FILE']"));
  Json victim = WaitEnded(a);
  ASSERT_EQ(victim["state"], "Succeeded") << victim.dump();
  const std::string node = victim["tasks"][0]["node"];
  const std::string run = AgentDir(node) + "/jobs/" + std::to_string(a) + "/run-1";
  // What the attacker goes for; each exists (an attempt on nothing proves nothing).
  const std::vector<std::pair<std::string, std::string>> targets = {
      {"read:tokens-file:", server_.dir() + "/tokens.yaml"},
      {"list:server-data:", server_.dir() + "/data"},
      {"read:node-token:", AgentDir(node) + "/node.token"},
      {"read:join-token-file:", AgentDir(node) + ".join-token"},
      {"list:agent-jobs:", AgentDir(node) + "/jobs"},
      {"list:agent-dir:", AgentDir(node)},
      {"read:other-log:", run + "/rank-0.log"},
      {"read:other-report:", run + "/report-rank-0.jsonl"},
      {"list:other-run:", run},
      {"list:other-ckpt:", Ckpt(a)},
      {"read:other-ckpt-file:", Ckpt(a) + "/ckpt-1"},
      {"read:agent-environ:", "/proc/" + std::to_string(agents_[node]) + "/environ"},
  };
  std::string args;
  for (const auto& [what, path] : targets) {
    ASSERT_TRUE(fs::exists(path)) << path;
    args += ", '" + what + path + "'";
  }
  args += ", 'write:plant-ckpt:" + Ckpt(a) + "/ckpt-999999'";
  args += ", 'write:plant-log:" + run + "/rank-0.log.tmp'";
  args += ", 'join:join-as-n0:" + server_.url() + "'";
  const int64_t b = SubmitOk(
      "tenant-b", Spec("attacker", "team-b", "[/usr/bin/python3, " + attack_ + args + "]"));
  Json done = WaitEnded(b);
  ASSERT_EQ(done["state"], "Succeeded") << done.dump();
  const Json report = Json::parse(ReadAll(Ckpt(b) + "/attack.json"));
  EXPECT_EQ(report["uid"], UidOf(kUserB));
  for (const auto& [name, result] : report["results"].items()) {
    if (result.is_array()) {  // the join attempts' HTTP statuses
      for (const Json& status : result) {
        EXPECT_TRUE(status == 401 || status == 403 || status == 409) << name << ": " << status;
      }
      continue;
    }
    EXPECT_TRUE(result.get<std::string>().starts_with("refused")) << name << ": " << result;
  }
  EXPECT_EQ(report["results"].size(), targets.size() + 3);
  EXPECT_TRUE(report["tokensFound"].empty()) << report["tokensFound"];
  EXPECT_FALSE(fs::exists(Ckpt(a) + "/ckpt-999999"));
  // And the node's live agent was not locked out.
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(server_.Call("GET", "/v1/nodes/n0", "admin").json()["alive"], true);
}

// A stolen join token cannot take over a node whose agent is live, and the
// agent keeps its node.
TEST_F(IsolationE2eTest, AJoinTokenCannotTakeOverALiveNode) {
  HttpReply r = server_.Call("POST", "/v1/nodes/n1/join", "join", "{}");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("has a live agent"), std::string::npos) << r.body;
  std::this_thread::sleep_for(1s);  // three heartbeats: still the same agent's
  Json n1 = server_.Call("GET", "/v1/nodes/n1", "admin").json();
  EXPECT_EQ(n1["alive"], true) << n1.dump();
  // An admin may re-join it (the agent's token is replaced): the agent says
  // so and, once its lease lapses, joins again by itself.
  ASSERT_EQ(server_.Call("POST", "/v1/nodes/n1/join", "admin", "{}").status, 200);
  bool back = false;
  for (int i = 0; i < 200 && !back; ++i) {
    std::this_thread::sleep_for(50ms);
    back = ReadAll(AgentDir("n1") + ".log").find("joined again") != std::string::npos;
  }
  EXPECT_TRUE(back) << ReadAll(AgentDir("n1") + ".log");
  EXPECT_NE(ReadAll(AgentDir("n1") + ".log").find("the server refuses this node's token"),
            std::string::npos);
  WaitNodesUp(3);
}

// What a tenant's spec may not ask for: refused at submission (400) or by
// the node (the job fails, saying why), and nothing is created for it.
TEST_F(IsolationE2eTest, ATenantsSpecCannotReachOutOfItsPlace) {
  const std::string sleep = "[sleep, '0']";
  for (const auto& [extra, want] : std::vector<std::pair<std::string, std::string>>{
           {"  env: {LD_PRELOAD: /tmp/evil.so}\n", "spec.env[LD_PRELOAD]"},
           {"  env: {GLIBC_TUNABLES: x}\n", "spec.env[GLIBC_TUNABLES]"},
           {"  env: {UNIPOOL_CHECKPOINT_DIR: /tmp}\n", "spec.env[UNIPOOL_CHECKPOINT_DIR]"},
           {"  checkpoint: {dir: /tmp/../etc/x}\n", "spec.checkpoint.dir"}}) {
    HttpReply r = Submit("tenant-b", Spec("bad", "team-b", sleep, extra));
    EXPECT_EQ(r.status, 400) << extra;
    EXPECT_NE(r.body.find(want), std::string::npos) << r.body;
  }
  // An admin's job may set the loader's variables (the admin runs as root anyway).
  EXPECT_EQ(
      Submit("admin", Spec("admin-env", "default", sleep, "  env: {LD_BIND_NOW: '1'}\n")).status,
      201);
  // Refused by the node: outside its allowed directories.
  struct Case {
    std::string spec, want;
  };
  const std::string outside = "/var/tmp/unipool-isolation-" + std::to_string(getpid());
  for (const Case& c : std::vector<Case>{
           {"apiVersion: unipool/v1\nkind: Job\nmetadata: {name: root-dir}\nspec:\n"
            "  command: [sleep, '0']\n  queue: team-b\n  gpus: 1\n  workingDir: /\n"
            "  restartPolicy: {maxRestarts: 0}\n",
            "spec.workingDir: / is outside"},
           {Spec("etc-ckpt", "team-b", sleep, "  checkpoint: {dir: " + outside + "}\n"),
            "spec.checkpoint.dir: " + outside + " is outside"}}) {
    Json done = WaitEnded(SubmitOk("tenant-b", c.spec));
    EXPECT_EQ(done["state"], "Failed");
    EXPECT_NE(done["message"].get<std::string>().find(c.want), std::string::npos) << done.dump();
  }
  EXPECT_FALSE(fs::exists(outside));
  // Inside them: made by the job's own user, owner-only.
  const std::string mine = work_ + "/b-ckpt/deep";
  fs::create_directories(work_ + "/b-ckpt");
  chown((work_ + "/b-ckpt").c_str(), UidOf(kUserB), static_cast<gid_t>(-1));
  Json ok = WaitEnded(SubmitOk(
      "tenant-b", Spec("own-ckpt", "team-b", sleep, "  checkpoint: {dir: " + mine + "}\n")));
  EXPECT_EQ(ok["state"], "Succeeded") << ok.dump();
  struct stat st;
  ASSERT_EQ(stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, UidOf(kUserB));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// A tenant's job never runs as root unless its queue allows it.
TEST_F(IsolationE2eTest, ATenantsJobRunsAsRootOnlyWhereItsQueueAllowsIt) {
  const std::string probe = "[sh, -c, 'id -u > $UNIPOOL_CHECKPOINT_DIR/uid']";
  ASSERT_EQ(server_.Call("PUT", "/v1/queues/team-b", "admin", "{}").status, 200);  // no runAs
  Json refused = WaitEnded(SubmitOk("tenant-b", Spec("as-root", "team-b", probe)));
  EXPECT_EQ(refused["state"], "Failed");
  EXPECT_NE(refused["message"].get<std::string>().find("would run as root"), std::string::npos)
      << refused.dump();
  ASSERT_EQ(server_.Call("PUT", "/v1/queues/team-b", "admin", "{\"allowRoot\": true}").status, 200);
  const int64_t id = SubmitOk("tenant-b", Spec("as-root-ok", "team-b", probe));
  Json ran = WaitEnded(id);
  ASSERT_EQ(ran["state"], "Succeeded") << ran.dump();
  EXPECT_EQ(std::stoul(ReadAll(Ckpt(id) + "/uid")), 0u);
}

}  // namespace
}  // namespace unipool::testing
