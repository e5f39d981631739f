// Compiled only into the CLI test binary (its name ends in neither _test.cc
// nor is it part of the unipool binary: see src/CMakeLists.txt).
#include "cli/cli_test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace unipool::testing {

static std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult RunUnipool(const std::vector<std::string>& args) {
  char out_path[] = "/tmp/unipool-test-out-XXXXXX";
  char err_path[] = "/tmp/unipool-test-err-XXXXXX";
  const int out_fd = mkstemp(out_path);
  const int err_fd = mkstemp(err_path);
  RunResult r;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    if (chdir(UNIPOOL_SOURCE_DIR) != 0) _exit(126);
    std::vector<char*> argv{const_cast<char*>(UNIPOOL_BINARY)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(UNIPOOL_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out_path);
  r.err = Slurp(err_path);
  close(out_fd);
  close(err_fd);
  unlink(out_path);
  unlink(err_path);
  return r;
}

std::string ReadSourceFile(const std::string& relative) {
  return Slurp(std::string(UNIPOOL_SOURCE_DIR) + "/" + relative);
}

void ExpectGoldenErrors(const std::string& dir, const std::vector<std::string>& before,
                        const std::vector<std::string>& after, size_t min_files) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(UNIPOOL_SOURCE_DIR) / dir)) {
    if (e.path().extension() == ".yaml") files.push_back(dir + "/" + e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), min_files) << dir;
  const bool update = std::getenv("UNIPOOL_UPDATE_GOLDEN") != nullptr;
  for (const std::string& rel : files) {
    std::vector<std::string> args = before;
    args.push_back(rel);
    args.insert(args.end(), after.begin(), after.end());
    RunResult r = RunUnipool(args);
    EXPECT_EQ(r.exit_code, 2) << rel;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << rel << ": " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    const std::string golden = fs::path(rel).replace_extension(".err").string();
    if (update) {
      std::ofstream(fs::path(UNIPOOL_SOURCE_DIR) / golden) << r.err;
    } else {
      EXPECT_EQ(r.err, ReadSourceFile(golden)) << "golden mismatch for " << rel;
    }
  }
}

}  // namespace unipool::testing
