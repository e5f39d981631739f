#include "server/metrics.h"

#include <gtest/gtest.h>

namespace unipool::server {
namespace {

TEST(MetricsTest, RendersTextFormat) {
  Metrics m;
  m.Declare("unipool_jobs", Metrics::Type::kGauge, "Jobs by state.");
  m.Declare("unipool_api_requests_total", Metrics::Type::kCounter, "API requests.");
  m.Declare("unipool_cycle_seconds", Metrics::Type::kHistogram, "Cycle time.", {0.001, 0.01});
  m.Set("unipool_jobs", {{"state", "running"}, {"queue", "a\"b"}}, 3);
  m.Add("unipool_api_requests_total", {{"code", "200"}});
  m.Add("unipool_api_requests_total", {{"code", "200"}}, 2);
  m.Observe("unipool_cycle_seconds", {}, 0.0005);
  m.Observe("unipool_cycle_seconds", {}, 0.5);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE unipool_api_requests_total counter\n"
                      "unipool_api_requests_total{code=\"200\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("unipool_jobs{state=\"running\",queue=\"a\\\"b\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("unipool_cycle_seconds_bucket{le=\"0.001\"} 1\n"
                      "unipool_cycle_seconds_bucket{le=\"0.01\"} 1\n"
                      "unipool_cycle_seconds_bucket{le=\"+Inf\"} 2\n"
                      "unipool_cycle_seconds_sum 0.5005\n"
                      "unipool_cycle_seconds_count 2\n"),
            std::string::npos)
      << text;
  m.Reset("unipool_jobs");
  EXPECT_EQ(m.Render().find("unipool_jobs{"), std::string::npos);
}

}  // namespace
}  // namespace unipool::server
