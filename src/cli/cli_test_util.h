// Runs the built `unipool` binary as a child process for end-to-end tests
// and captures its exit code, stdout and stderr.
#pragma once

#include <string>
#include <vector>

namespace unipool::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs UNIPOOL_BINARY with `args` from the source directory.
RunResult RunUnipool(const std::vector<std::string>& args);

// Reads a file under the source directory; "" if absent.
std::string ReadSourceFile(const std::string& relative);

}  // namespace unipool::testing
