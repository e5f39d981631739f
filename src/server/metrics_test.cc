#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

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

// A timestamp keeps every digit: printed to 9 significant digits, a start
// time of 1796421234.56 read back as 1796421230 (CI saw one in the future).
TEST(MetricsTest, ValuesReadBackExactly) {
  Metrics m;
  m.Declare("t_seconds", Metrics::Type::kGauge, "A time.");
  m.Set("t_seconds", {{"k", "start"}}, 1796421234.56);
  m.Set("t_seconds", {{"k", "small"}}, 0.1);
  m.Set("t_seconds", {{"k", "whole"}}, 1796421235);
  const std::string text = m.Render();
  EXPECT_NE(text.find("t_seconds{k=\"start\"} 1796421234.56\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_seconds{k=\"small\"} 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_seconds{k=\"whole\"} 1796421235\n"), std::string::npos) << text;
}

TEST(MetricsTest, ProcessMetricsDescribeThisProcess) {
  Metrics m;
  DeclareProcessMetrics(m);
  UpdateProcessMetrics(m);
  const std::string text = m.Render();
  auto value = [&](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " in\n" << text;
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
  };
  EXPECT_GE(value("process_cpu_seconds_total"), 0);
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(value("process_virtual_memory_bytes"), value("process_resident_memory_bytes"));
  EXPECT_GE(value("process_open_fds"), 3);  // stdin, stdout, stderr
  EXPECT_GE(value("process_max_fds"), value("process_open_fds"));
  const double started = value("process_start_time_seconds");
  EXPECT_LE(started, static_cast<double>(time(nullptr)));
  EXPECT_GT(started, static_cast<double>(time(nullptr)) - 24 * 3600);
}

}  // namespace
}  // namespace unipool::server
