#include "io/trace_reader.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

constexpr const char* kHeader = "job_id,submit_time_s,num_gpus,duration_s,wait_time_s,user,queue,status,priority\n";

TEST(TraceReaderTest, ReadsJobsAndMapsQueues) {
  const std::string text = std::string(kHeader) +
                           "a,0,8,3600,,alice,vc1,,\n"
                           "b,10.5,1,60,5,bob,vc2,,2\n"
                           "\"c,quoted\",20,2,7200,,alice,vc1,,\n";
  Result<Trace> t = ParseTrace(text, TraceOptions{});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3u);
  EXPECT_EQ(t->jobs[1].submit, Nanoseconds(10500000000));
  EXPECT_EQ(t->jobs[1].priority, 2);
  EXPECT_EQ(t->jobs[2].name, "c,quoted");
  EXPECT_EQ(t->queues, (std::vector<std::string>{"vc1", "vc2"}));
  EXPECT_EQ(t->jobs[2].queue, 0);
  EXPECT_DOUBLE_EQ(t->gpu_hours, 8 + 1.0 / 60 + 4);
  EXPECT_EQ(t->jobs[0].runtime_estimate, Seconds(3600));
  TraceOptions by_user;
  by_user.queue_from = "user";
  Result<Trace> u = ParseTrace(text, by_user);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->queues, (std::vector<std::string>{"alice", "bob"}));
}

TEST(TraceReaderTest, SkipsCpuOnlyAndUnknownDurations) {
  const std::string text = std::string(kHeader) + "a,0,0,60,,,,,\nb,1,1,,,,,,\nc,2,1,5,,,,,\n";
  Result<Trace> t = ParseTrace(text, TraceOptions{});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rows, 3);
  EXPECT_EQ(t->skipped_cpu_only, 1);
  EXPECT_EQ(t->skipped_no_duration, 1);
  EXPECT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->queues, std::vector<std::string>{"default"});
}

TEST(TraceReaderTest, ErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string error;
  } cases[] = {
      {"", "line 1: empty trace: expected a header line"},
      {"a,b,c\n", "line 1: header must name job_id, submit_time_s, num_gpus and duration_s"},
      {std::string(kHeader) + "a,0,8,60\n", "line 2: expected 9 fields, found 4"},
      {std::string(kHeader) + "a,soon,8,60,,,,,\n",
       "line 2: submit_time_s: expected seconds from 0 to 9000000000, got 'soon'"},
      {std::string(kHeader) + "a,0,-1,60,,,,,\n",
       "line 2: num_gpus: expected a whole number from 0 to 16777216, got '-1'"},
      {std::string(kHeader) + "a,0,2.5,60,,,,,\n",
       "line 2: num_gpus: expected a whole number from 0 to 16777216, got '2.5'"},
      {std::string(kHeader) + "a,0,1,-4,,,,,\n",
       "line 2: duration_s: expected seconds from 0 to 9000000000, got '-4'"},
      {std::string(kHeader) + "\"a,0,1,4,,,,,\n", "line 2: unterminated quote"},
      // Beyond int64 nanoseconds once converted (a fuzz find: 1e300 s became a negative time).
      {std::string(kHeader) + "a,1e300,8,60,,,,,\n",
       "line 2: submit_time_s: expected seconds from 0 to 9000000000, got '1e300'"},
      {std::string(kHeader) + "a,0,8,9000000001,,,,,\n",
       "line 2: duration_s: expected seconds from 0 to 9000000000, got '9000000001'"},
  };
  for (const Case& c : cases) {
    Result<Trace> t = ParseTrace(c.text, TraceOptions{});
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().message(), c.error);
  }
  TraceOptions bad;
  bad.queue_from = "team";
  EXPECT_FALSE(ParseTrace(kHeader, bad).ok());
}

TEST(TraceReaderTest, MissingFileSaysSo) {
  Result<Trace> t = ReadTrace("no/such/trace.csv", TraceOptions{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "no/such/trace.csv: cannot open: No such file or directory");
}

}  // namespace
}  // namespace unipool::io
