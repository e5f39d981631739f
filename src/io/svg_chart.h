// SvgChart: the line and bar charts of the sim's HTML report, as inline
// SVG (self-contained: no scripts, no fonts or files fetched). Axes take
// human units: days ("13.5 d"), durations ("35 s", "12.5 min"), or plain
// numbers ("2.5k"); either axis may be logarithmic.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace unipool::io {

// `v` with `decimals` digits after the point.
std::string Fixed(double v, int decimals = 2);
// A duration in seconds for people: "45 s", "12.5 min", "3.2 h", "4.1 d".
std::string HumanSeconds(double s);
// `s` safe in HTML or SVG text and attributes.
std::string XmlEscape(std::string_view s);

enum class AxisUnit { kNumber, kDays, kSeconds };

struct ChartLine {
  std::string name;                               // in the legend
  std::vector<std::pair<double, double>> points;  // (x, y); bars: y per category
  bool dashed = false;
  int color = -1;  // palette index; -1: the line's position
};

struct Chart {
  std::string title, xlabel, ylabel;
  AxisUnit x_unit = AxisUnit::kNumber;
  bool log_x = false;  // x values below 1 are drawn at 1
  bool log_y = false;  // y values <= 0 are not drawn
  double ymax = 0;     // 0: a round bound above the data
  // x ranges shaded grey behind the lines (maintenance windows), named
  // `band_label` in the legend.
  std::vector<std::pair<double, double>> bands;
  std::string band_label;
};

std::string LineChart(const Chart& chart, const std::vector<ChartLine>& lines);
// Grouped bars: one group per category, one bar per series (series[k]'s
// points[c].second is category c's value). chart.xlabel names the groups.
std::string BarChart(const Chart& chart, const std::vector<std::string>& categories,
                     const std::vector<ChartLine>& series);

}  // namespace unipool::io
