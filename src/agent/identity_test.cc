#include "agent/identity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace unipool::agent {
namespace {

TEST(IdentityTest, PathsAreResolvedWithoutDotDot) {
  EXPECT_EQ(ResolveJobPath("/a//b/./c/", "/base", "f").value(), "/a/b/c");
  EXPECT_EQ(ResolveJobPath("data/run", "/home/alice", "f").value(), "/home/alice/data/run");
  EXPECT_EQ(ResolveJobPath("/", "/x", "f").value(), "/");
  Result<std::string> up = ResolveJobPath("/scratch/../etc", "/", "spec.workingDir");
  ASSERT_FALSE(up.ok());
  EXPECT_NE(up.status().message().find("spec.workingDir: '/scratch/../etc' has a '..'"),
            std::string::npos);
  EXPECT_FALSE(ResolveJobPath("..", "/home/alice", "f").ok());
  EXPECT_TRUE(ResolveJobPath("/a/..b/c..", "/", "f").ok()) << "only a whole '..' component";
}

TEST(IdentityTest, RootsContainTheirSubdirectoriesOnly) {
  const std::vector<std::string> roots = {"/scratch", "/home"};
  EXPECT_TRUE(CheckUnderRoots("/scratch", roots, "f").ok());
  EXPECT_TRUE(CheckUnderRoots("/home/alice/x", roots, "f").ok());
  Status outside = CheckUnderRoots("/scratchpad", roots, "spec.checkpoint.dir");
  EXPECT_EQ(outside.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.message().find("spec.checkpoint.dir: /scratchpad is outside the directories "
                                   "this node lets jobs use (/scratch, /home"),
            std::string::npos)
      << outside.message();
  EXPECT_FALSE(CheckUnderRoots("/", roots, "f").ok());
  EXPECT_TRUE(CheckUnderRoots("/etc", {"/"}, "f").ok());
}

TEST(IdentityTest, UsersAreLookedUpOnTheNode) {
  Result<Identity> root = LookUpUser("root");
  ASSERT_TRUE(root.ok()) << root.status().message();
  EXPECT_EQ(root->uid, 0u);
  EXPECT_EQ(root->gid, 0u);
  EXPECT_TRUE(root->switch_user);
  EXPECT_EQ(LookUpUser("0").value().user, "root");
  EXPECT_EQ(LookUpUser("root:0").value().gid, 0u);
  Result<Identity> none = LookUpUser("no-such-user-here");
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("no user 'no-such-user-here' on this node"),
            std::string::npos);
  EXPECT_FALSE(LookUpUser("root:no-such-group-here").ok());
  Result<Identity> bare = LookUpUser("4000123");  // a uid with no entry: its own group
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->uid, 4000123u);
  EXPECT_EQ(bare->gid, 4000123u);
}

TEST(IdentityTest, ARootAgentSwitchesUsersAndKeepsTenantsOffRoot) {
  // As root: the runAs user; a tenant without one is refused unless allowed.
  Result<Identity> as = DecideIdentity({"4000123", true, false}, 0);
  ASSERT_TRUE(as.ok());
  EXPECT_TRUE(as->switch_user);
  EXPECT_EQ(as->uid, 4000123u);
  Result<Identity> refused = DecideIdentity({"", true, false}, 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("would run as root"), std::string::npos);
  EXPECT_FALSE(DecideIdentity({"root", true, false}, 0).ok()) << "runAs root is root too";
  EXPECT_TRUE(DecideIdentity({"", true, true}, 0).ok()) << "the queue allows root";
  Result<Identity> admin = DecideIdentity({"", false, false}, 0);
  ASSERT_TRUE(admin.ok());
  EXPECT_FALSE(admin->switch_user);
  EXPECT_EQ(admin->uid, 0u);
}

TEST(IdentityTest, AnAgentThatIsNotRootRunsEverythingAsItself) {
  Result<Identity> self = DecideIdentity({"", true, false}, 4000123);
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->switch_user);
  EXPECT_EQ(self->uid, 4000123u);
  EXPECT_TRUE(DecideIdentity({"4000123", true, false}, 4000123).ok()) << "its own user";
  Result<Identity> other = DecideIdentity({"root", true, false}, 4000123);
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("cannot switch users; run the agent as root"),
            std::string::npos);
}

TEST(IdentityTest, TheBaseEnvironmentKeepsNothingOfTheAgentsSecrets) {
  std::string v[] = {"PATH=/usr/bin", "UNIPOOL_JOIN_TOKEN=up_secret", "LANG=C.UTF-8",
                     "LC_ALL=C",      "AWS_SECRET_ACCESS_KEY=x",      "LD_PRELOAD=/evil.so",
                     "TZ=UTC"};
  std::vector<char*> env;
  for (std::string& s : v) env.push_back(s.data());
  env.push_back(nullptr);
  Identity who;
  who.user = "alice";
  who.home = "/home/alice";
  who.shell = "/bin/bash";
  std::vector<std::pair<std::string, std::string>> base = BaseEnvironment(who, env.data());
  std::vector<std::pair<std::string, std::string>> want = {
      {"PATH", "/usr/bin"},    {"LANG", "C.UTF-8"}, {"LC_ALL", "C"},      {"TZ", "UTC"},
      {"HOME", "/home/alice"}, {"USER", "alice"},   {"LOGNAME", "alice"}, {"SHELL", "/bin/bash"}};
  EXPECT_EQ(base, want);
  char* empty[] = {nullptr};
  EXPECT_EQ(BaseEnvironment(Identity{}, empty).front().first, "PATH") << "a default PATH";
}

}  // namespace
}  // namespace unipool::agent

namespace unipool::agent {
namespace {

// A directory planted for the job by someone else, or a link, is refused;
// the job's own is made private.
TEST(IdentityTest, PrivateDirsAreTheUsersOwn) {
  const std::string base = ::testing::TempDir() + "/private-" + std::to_string(getpid());
  std::filesystem::remove_all(base);
  EXPECT_EQ(MakePrivateDirs(base + "/a/b"), "");
  struct stat st;
  ASSERT_EQ(stat((base + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  chmod((base + "/a/b").c_str(), 0777);
  EXPECT_EQ(MakePrivateDirs(base + "/a/b"), "") << "again: the same user's";
  ASSERT_EQ(stat((base + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "made private";
  std::filesystem::create_directory_symlink(base + "/a/b", base + "/link");
  EXPECT_NE(MakePrivateDirs(base + "/link").find("not a directory"), std::string::npos);
  if (geteuid() == 0) {
    std::filesystem::create_directory(base + "/planted");
    ASSERT_EQ(chown((base + "/planted").c_str(), 4000123, 4000123), 0);
    EXPECT_NE(MakePrivateDirs(base + "/planted").find("belongs to uid 4000123"), std::string::npos);
  }
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace unipool::agent
