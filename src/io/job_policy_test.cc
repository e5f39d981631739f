#include "io/job_policy.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

TEST(JobPolicyTest, DotDotIsAWholeComponent) {
  EXPECT_TRUE(HasDotDot(".."));
  EXPECT_TRUE(HasDotDot("/a/../b"));
  EXPECT_TRUE(HasDotDot("a/.."));
  EXPECT_FALSE(HasDotDot("/a/..b/c.."));
  EXPECT_FALSE(HasDotDot(""));
  EXPECT_FALSE(HasDotDot("/"));
}

TEST(JobPolicyTest, TenantsCannotChangeHowProgramsLoad) {
  for (const char* name : {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH",
                           "GLIBC_TUNABLES", "BASH_ENV", "UNIPOOL_FENCE"}) {
    EXPECT_NE(TenantEnvProblem(name), "") << name;
  }
  for (const char* name : {"PYTHONPATH", "NCCL_DEBUG", "OMP_NUM_THREADS", "LD", "XLD_PRELOAD"}) {
    EXPECT_EQ(TenantEnvProblem(name), "") << name;
  }
}

TEST(JobPolicyTest, CheckNamesTheField) {
  JobRequest job;
  job.env = {{"NCCL_DEBUG", "INFO"}, {"LD_PRELOAD", "/tmp/x.so"}};
  Status st = CheckJobPolicy(job, /*tenant=*/true);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "spec.env[LD_PRELOAD]: tenants may not set LD_* (it changes how programs load)");
  EXPECT_TRUE(CheckJobPolicy(job, /*tenant=*/false).ok()) << "admins may";
  job.env.clear();
  job.working_dir = "/scratch/../etc";
  st = CheckJobPolicy(job, /*tenant=*/false);
  EXPECT_NE(st.message().find("spec.workingDir: '/scratch/../etc' has a '..' component"),
            std::string::npos)
      << st.message();
  job.working_dir = "/scratch/a";
  job.checkpoint_dir = "../x";
  EXPECT_NE(CheckJobPolicy(job, false).message().find("spec.checkpoint.dir"), std::string::npos);
}

}  // namespace
}  // namespace unipool::io
