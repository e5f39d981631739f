#include "server/diagnosis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace unipool::server {
namespace {

JobEvent Event(int64_t second, const std::string& type, const std::string& message) {
  return JobEvent{Time(second * 1000000000), type, message};
}

DiagnosisInput Input(JobState state) {
  DiagnosisInput in;
  in.job.id = 7;
  in.job.request.name = "train";
  in.job.state = state;
  return in;
}

std::vector<std::string> Kinds(const std::vector<Cause>& causes) {
  std::vector<std::string> out;
  for (const Cause& c : causes) out.push_back(c.kind);
  return out;
}

TEST(DiagnosisTest, TheFailureThatEndedTheRunComesFirst) {
  DiagnosisInput in = Input(JobState::kFailed);
  in.events = {Event(1, "Straggler", "rank 2 on n1 is 3.0x slower than the median rank"),
               Event(9, "Failed",
                     "failed after 0 restarts: rank 0: exit code 1; likely host out of memory: "
                     "fewer data-loader workers (log: \"MemoryError\") (node n0)")};
  const std::vector<Cause> causes = Diagnose(in);
  EXPECT_EQ(Kinds(causes), (std::vector<std::string>{"OutOfMemory", "Straggler"}));
  EXPECT_EQ(causes[0].summary, "a rank ran out of host memory");
  ASSERT_EQ(causes[0].evidence.size(), 1u);
  EXPECT_NE(causes[0].evidence[0].find("Failed at "), std::string::npos);
  EXPECT_NE(causes[0].evidence[0].find("MemoryError"), std::string::npos);
  EXPECT_NE(causes[1].fix.find("onStraggler: replace"), std::string::npos);
}

TEST(DiagnosisTest, AnEventAndTheFailureItEndedInAreQuotedOnce) {
  DiagnosisInput in = Input(JobState::kFailed);
  const std::string why = "rank 0: exit code 1; likely communication timeout (gloo): ...";
  in.events = {Event(5, "CommTimeout", why), Event(5, "Failed", "failed after 0 restarts: " + why)};
  const std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"CommTimeout"});
  ASSERT_EQ(causes[0].evidence.size(), 1u);
  EXPECT_EQ(causes[0].evidence[0].rfind("CommTimeout at ", 0), 0u) << causes[0].evidence[0];
}

TEST(DiagnosisTest, AFailureWithNoKnownPatternSaysSo) {
  DiagnosisInput in = Input(JobState::kFailed);
  in.job.exit_code = 3;
  in.job.message = "failed after 0 restarts: rank 1: exit code 3 (node n0)";
  in.events = {Event(2, "Failed", in.job.message)};
  const std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"Failed"});
  EXPECT_EQ(causes[0].evidence, std::vector<std::string>{in.job.message});
  EXPECT_NE(causes[0].fix.find("unipool logs 7 --rank N"), std::string::npos);
  EXPECT_NE(causes[0].fix.find("exit code 3"), std::string::npos);
}

TEST(DiagnosisTest, APendingJobGetsTheSchedulersReasonAndWhatUnblocksIt) {
  DiagnosisInput in = Input(JobState::kPending);
  in.reason = "Infeasible";
  in.explain = "pending: can never run: needs 4 GPUs within one node, but at most 2 exist there";
  in.unblock = "resubmit asking for what exists";
  in.events = {Event(1, "Submitted", "submitted by admin")};
  const std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"Pending"});
  EXPECT_EQ(causes[0].summary, "it can never run as asked");
  EXPECT_EQ(causes[0].evidence, std::vector<std::string>{"scheduler: " + in.explain});
  EXPECT_EQ(causes[0].fix, in.unblock);
}

TEST(DiagnosisTest, ALostNodeAndAnUnhealthyOneAreNodeFailures) {
  DiagnosisInput in = Input(JobState::kRunning);
  in.events = {Event(3, "Requeued", "node n1 lost (no heartbeat within the lease); resumes")};
  NodeRecord n;
  n.name = "n2";
  n.registered = true;
  n.alive = true;
  n.health = "ok";
  n.gpu_samples = {GpuSample{.index = 3, .ecc_uncorrected = 2}};
  in.nodes = {n};
  const std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"NodeFailure"});
  ASSERT_EQ(causes[0].evidence.size(), 2u);
  EXPECT_EQ(causes[0].evidence[1], "node n2 GPU 3 has 2 uncorrected ECC errors");
}

TEST(DiagnosisTest, RanksMostlyInCollectivesScalePoorlyUnlessTheyWaitForAStraggler) {
  DiagnosisInput in = Input(JobState::kRunning);
  for (int32_t r = 0; r < 4; ++r) {
    train::SignalWindow::RankState s;
    s.step_time = Duration(100000000);
    s.comm = Duration(70000000);
    in.ranks[r] = s;
  }
  std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"CommunicationBound"});
  EXPECT_NE(causes[0].summary.find("70% of each step"), std::string::npos) << causes[0].summary;
  in.events = {Event(1, "Straggler", "rank 2 on n1 is 3.0x slower")};
  EXPECT_EQ(Kinds(Diagnose(in)), std::vector<std::string>{"Straggler"});
}

TEST(DiagnosisTest, ThroughputThatSwingsIsNamedSteadyThroughputIsNot) {
  DiagnosisInput in = Input(JobState::kRunning);
  for (int i = 0; i < 20; ++i) {
    in.progress.push_back({Time(i), double(i), 1.0, 100.0 + (i % 2), std::nan("")});
  }
  EXPECT_TRUE(Diagnose(in).empty());
  for (int i = 0; i < 20; ++i) in.progress[i].throughput = i % 2 ? 50 : 150;
  const std::vector<Cause> causes = Diagnose(in);
  ASSERT_EQ(Kinds(causes), std::vector<std::string>{"FluctuatingThroughput"});
  EXPECT_EQ(causes[0].evidence[0],
            "throughput over its last 20 reports: min 50, median 100, max 150");
}

TEST(DiagnosisTest, TheTextHasOneBlockPerCause) {
  DiagnosisInput in = Input(JobState::kSucceeded);
  EXPECT_EQ(DiagnosisText(in.job, Diagnose(in)), "job 7 (train) Succeeded: nothing looks wrong\n");
  in.events = {Event(0, "NonFiniteLoss", "loss is NaN at step 6")};
  const std::string text = DiagnosisText(in.job, Diagnose(in));
  EXPECT_EQ(text.rfind("job 7 (train) Succeeded: 1 likely cause\n\nNaNLoss: ", 0), 0u) << text;
  EXPECT_NE(text.find("  evidence: NonFiniteLoss at 1970-01-01T00:00:00"), std::string::npos)
      << text;
  EXPECT_NE(text.find("  fix: resume from the last checkpoint"), std::string::npos) << text;
}

}  // namespace
}  // namespace unipool::server
