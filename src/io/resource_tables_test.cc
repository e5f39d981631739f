#include "io/resource_tables.h"

#include <gtest/gtest.h>

#include "io/suggest.h"

namespace unipool::io {
namespace {

TEST(ResourceTablesTest, DurationsReadLikeKubectlAges) {
  EXPECT_EQ(HumanDuration(0), "0s");
  EXPECT_EQ(HumanDuration(119), "119s");
  EXPECT_EQ(HumanDuration(450), "7m30s");
  EXPECT_EQ(HumanDuration(600), "10m");
  EXPECT_EQ(HumanDuration(95 * 60), "95m");
  EXPECT_EQ(HumanDuration(5 * 3600 + 20 * 60), "5h20m");
  EXPECT_EQ(HumanDuration(30 * 3600), "30h");
  EXPECT_EQ(HumanDuration(3 * 86400 + 4 * 3600), "3d4h");
  EXPECT_EQ(HumanDuration(12 * 86400), "12d");
  EXPECT_EQ(HumanDuration(800 * 86400), "2y");
  EXPECT_EQ(HumanDuration(-5), "0s");
}

TEST(ResourceTablesTest, JobCellsSayWhatSacctWould) {
  Json job = {{"state", "Failed"},
              {"started", "2026-12-01T10:00:00.000Z"},
              {"finished", "2026-12-01T11:30:00.000Z"},
              {"exitCode", 3}};
  EXPECT_EQ(ExitCell(job), "3:0");
  EXPECT_EQ(ElapsedCell(job, 0), "90m");
  job["exitCode"] = nullptr;
  job["exitSignal"] = 9;
  EXPECT_EQ(ExitCell(job), "0:9");
  Json running = {{"state", "Running"}, {"started", "2026-12-01T10:00:00.000Z"}};
  EXPECT_EQ(ElapsedCell(running, *EpochSeconds(Json("2026-12-01T10:00:45.000Z"))), "45s");
  EXPECT_EQ(ExitCell(running), "-");
  EXPECT_EQ(ElapsedCell(Json{{"state", "Pending"}}, 0), "-");
}

TEST(ResourceTablesTest, RowsMatchTheirHeaders) {
  for (const char* kind : {"jobs", "nodes", "queues"}) {
    const Kind k = *KindOf(kind);
    for (bool wide : {false, true}) {
      EXPECT_EQ(k.header(wide).size(), k.row(Json::object(), wide, 0).size()) << kind;
    }
  }
  EXPECT_EQ(ObjectName(*KindOf("job"), Json{{"id", 7}}), "job/7");
  EXPECT_EQ(ObjectName(*KindOf("nodes"), Json{{"name", "n1"}}), "node/n1");
  EXPECT_FALSE(KindOf("pods"));
}

TEST(SuggestTest, NearestWords) {
  EXPECT_EQ(DidYouMean("jbos", {"jobs", "nodes", "queues"}), "; did you mean 'jobs'?");
  EXPECT_EQ(DidYouMean("que", {"jobs", "nodes", "queues"}), "; did you mean 'queues'?");
  EXPECT_EQ(DidYouMean("xyzzy", {"jobs", "nodes", "queues"}), "");
  EXPECT_EQ(Nearest("sbumit", {"submit", "get"}), "submit");
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace unipool::io
