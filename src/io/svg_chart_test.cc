#include "io/svg_chart.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgChartTest, HumanUnitsAndEscaping) {
  EXPECT_EQ(HumanSeconds(35), "35 s");
  EXPECT_EQ(HumanSeconds(750), "12.5 min");
  EXPECT_EQ(HumanSeconds(7.5 * 86400), "7.5 d");
  EXPECT_EQ(XmlEscape("a<b & 'c'"), "a&lt;b &amp; &#39;c&#39;");
  EXPECT_EQ(Fixed(2.345, 1), "2.3");
}

TEST(SvgChartTest, ALineChartHasItsLinesLegendDayTicksAndBands) {
  Chart c{"GPUs <used>", "day", "% of GPUs", AxisUnit::kDays};
  c.ymax = 100;
  c.bands = {{1, 2}};
  c.band_label = "maintenance (shaded)";
  const std::string svg = LineChart(c, {ChartLine{"fifo", {{0, 10}, {2, 50}, {4, 30}}},
                                        ChartLine{"fifo: down", {{0, 0}, {4, 5}}, true}});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(Count(svg, "<polyline"), 2u);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2u);  // the line and its legend swatch
  EXPECT_EQ(Count(svg, "<line x1='10'"), 1u) << "the legend, below the chart";
  EXPECT_NE(svg.find("GPUs &lt;used&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">4 d<"), std::string::npos);
  EXPECT_NE(svg.find(">100<"), std::string::npos);  // the fixed bound
  EXPECT_NE(svg.find("fill='#e8e8e8'"), std::string::npos);
  EXPECT_NE(svg.find("maintenance (shaded)"), std::string::npos);
}

// A log axis has a tick per decade from below the smallest value to above
// the largest, and leaves out what a log cannot show (0).
TEST(SvgChartTest, ALogAxisTicksByDecadeAndSkipsZeros) {
  Chart c{"MTTI", "job size (GPUs)", "hours (log)"};
  c.log_y = true;
  const std::string svg =
      BarChart(c, {"1", "2-8", "32K+"}, {ChartLine{"fifo", {{0, 2000}, {0, 0}, {0, 0.5}}}});
  for (const char* tick : {">0.10<", ">1<", ">10<", ">100<", ">1000<", ">10k<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick << "\n" << svg;
  }
  EXPECT_EQ(svg.find(">0<"), std::string::npos);
  EXPECT_EQ(Count(svg, "<rect x="), 2u) << "the 0 bar is not drawn";
  EXPECT_NE(svg.find("job size (GPUs)"), std::string::npos);
}

TEST(SvgChartTest, SecondsOnALogAxisReadAsDurations) {
  Chart c{"Wait CDF", "queue wait (log)", "share of jobs", AxisUnit::kSeconds, true};
  c.ymax = 1;
  const std::string svg = LineChart(c, {ChartLine{"1 GPUs", {{0.2, 0}, {10, 0.5}, {86400, 1}}}});
  EXPECT_NE(svg.find(">1 s<"), std::string::npos) << svg;  // 0.2 s drawn at 1 s
  EXPECT_NE(svg.find(">24.0 h<"), std::string::npos) << svg;
}

}  // namespace
}  // namespace unipool::io
