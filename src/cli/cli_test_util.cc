// Compiled only into the CLI test binary (its name ends in neither _test.cc
// nor is it part of the unipool binary: see src/CMakeLists.txt).
#include "cli/cli_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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

}  // namespace unipool::testing
