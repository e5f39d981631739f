#include "agent/checkpoint_size.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace unipool::agent {
namespace {

namespace fs = std::filesystem;

class CheckpointBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/unipool-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ / "job-7";
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const fs::path& p, size_t bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << std::string(bytes, 'x');
  }

  fs::path dir_, root_;
};

TEST_F(CheckpointBytesTest, CountsWhatTheCheckpointWroteSinceThePreviousOne) {
  Write(root_ / "ckpt-100.pt", 1000);
  fs::last_write_time(root_ / "ckpt-100.pt",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  const auto since = fs::file_time_type::clock::now() - std::chrono::minutes(1);
  Write(root_ / "ckpt-200" / "model.pt", 4096);  // sharded: a directory per step
  Write(root_ / "ckpt-200" / "optim" / "rank-0.pt", 8192);
  EXPECT_EQ(CheckpointBytes(root_.string(), root_.string(), since), 4096 + 8192);
  EXPECT_EQ(CheckpointBytes((root_ / "ckpt-200").string(), root_.string(), since), 4096 + 8192);
  EXPECT_EQ(CheckpointBytes((root_ / "ckpt-200" / "model.pt").string(), root_.string(), since),
            4096);
  // Everything, from the beginning of time.
  EXPECT_EQ(CheckpointBytes(root_.string(), root_.string(), fs::file_time_type::min()),
            1000 + 4096 + 8192);
}

TEST_F(CheckpointBytesTest, MeasuresNothingOutsideTheJobsCheckpointDirectory) {
  Write(dir_ / "secret" / "key", 100);
  const auto since = fs::file_time_type::min();
  EXPECT_EQ(CheckpointBytes((dir_ / "secret").string(), root_.string(), since), std::nullopt);
  EXPECT_EQ(CheckpointBytes((root_ / ".." / "secret").string(), root_.string(), since),
            std::nullopt);
  // A link out of it is not followed, named or inside.
  fs::create_directory_symlink(dir_ / "secret", root_ / "link");
  EXPECT_EQ(CheckpointBytes((root_ / "link").string(), root_.string(), since), std::nullopt);
  EXPECT_EQ(CheckpointBytes(root_.string(), root_.string(), since), 0);
  // A sibling whose name starts like the root is not inside it.
  Write(dir_ / "job-77" / "x", 10);
  EXPECT_EQ(CheckpointBytes((dir_ / "job-77").string(), root_.string(), since), std::nullopt);
  EXPECT_EQ(CheckpointBytes((root_ / "absent").string(), root_.string(), since), std::nullopt);
}

TEST_F(CheckpointBytesTest, GivesUpOnMoreEntriesThanTheBound) {
  for (int i = 0; i < 20; ++i) Write(root_ / ("f" + std::to_string(i)), 1);
  EXPECT_EQ(CheckpointBytes(root_.string(), root_.string(), fs::file_time_type::min(), 10),
            std::nullopt);
  EXPECT_EQ(CheckpointBytes(root_.string(), root_.string(), fs::file_time_type::min(), 100), 20);
}

}  // namespace
}  // namespace unipool::agent
