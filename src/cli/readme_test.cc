// The README's test command and .ci/run must not drift apart.
#include <gtest/gtest.h>

#include "cli/cli_test_util.h"

namespace unipool {
namespace {

TEST(ReadmeTest, CiRunsTheReadmeTestCommand) {
  const std::string ci = testing::ReadSourceFile(".ci/run");
  const std::string readme = testing::ReadSourceFile("README.md");
  const std::string::size_type start = ci.find("./scripts/install-deps.sh");
  ASSERT_NE(start, std::string::npos) << ".ci/run lost its command";
  const std::string command = ci.substr(start, ci.find('\n', start) - start);
  EXPECT_NE(readme.find("\n" + command + "\n"), std::string::npos)
      << "README.md does not show .ci/run's command: " << command;
}

}  // namespace
}  // namespace unipool
