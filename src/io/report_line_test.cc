#include "io/report_line.h"

#include <gtest/gtest.h>

#include <cmath>

namespace unipool::io {
namespace {

TEST(ReportLineTest, ReadsPythonsNonFiniteNumbers) {
  nlohmann::json j = ParseReportLine(R"({"step": 7, "loss": NaN, "gradNorm": Infinity})");
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(std::isnan(*ReportNumber(j["loss"])));
  EXPECT_TRUE(std::isinf(*ReportNumber(j["gradNorm"])));
  j = ParseReportLine(R"({"note": "NaN inside a \" string", "loss": -Infinity})");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["note"], "NaN inside a \" string");
  EXPECT_LT(*ReportNumber(j["loss"]), 0);
  EXPECT_EQ(*ReportNumber(nlohmann::json(2.5)), 2.5);
  EXPECT_FALSE(ReportNumber(nlohmann::json("2.5")));
  for (const char* bad : {"", "[1]", "NaN", "{\"loss\": NaNa}", "{\"a\":", "42"}) {
    EXPECT_TRUE(ParseReportLine(bad).is_discarded()) << bad;
  }
}

TEST(ReportLineTest, RankSignals) {
  auto s = RankSignals(nlohmann::json::parse(
                           R"({"step": 12, "stepSeconds": 0.5, "dataSeconds": 0.1,
                               "commSeconds": 0.2})"),
                       3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 3);
  EXPECT_EQ(s->step, 12);
  EXPECT_EQ(s->step_time.value(), 500000000);
  EXPECT_EQ(s->data_time.value(), 100000000);
  EXPECT_EQ(s->comm_time.value(), 200000000);
  s = RankSignals(nlohmann::json::parse(R"({"step": 1, "stepSeconds": 1, "rank": 9})"), 3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 9);  // a process running several ranks names each
  EXPECT_EQ(s->comm_time.value(), 0);
  for (const char* bad :
       {R"({"step": 1})", R"({"stepSeconds": 1})", R"({"step": -1, "stepSeconds": 1})",
        R"({"step": 1, "stepSeconds": "1"})", R"({"step": 1, "stepSeconds": -1})",
        R"({"step": 1, "stepSeconds": 1, "dataSeconds": 2})",
        R"({"step": 1, "stepSeconds": 1e300})", R"({"step": 1, "stepSeconds": 1, "rank": -4})"}) {
    EXPECT_FALSE(RankSignals(nlohmann::json::parse(bad), 0)) << bad;
  }
}

}  // namespace
}  // namespace unipool::io
