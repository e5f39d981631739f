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

// Runs `unipool {before..., FILE, after...}` for every .yaml FILE in `dir`
// (relative to the source directory) and expects exit code 2 and exactly
// one line on stderr, equal to the golden FILE.err beside it. At least
// `min_files` files must be there. With UNIPOOL_UPDATE_GOLDEN=1 set, writes
// the golden files instead (after a deliberate change).
void ExpectGoldenErrors(const std::string& dir, const std::vector<std::string>& before,
                        const std::vector<std::string>& after, size_t min_files);

}  // namespace unipool::testing
