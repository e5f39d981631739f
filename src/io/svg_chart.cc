#include "io/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace unipool::io {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string HumanSeconds(double s) {
  if (s < 120) return Fixed(s, 0) + " s";
  if (s < 7200) return Fixed(s / 60, 1) + " min";
  if (s < 172800) return Fixed(s / 3600, 1) + " h";
  return Fixed(s / 86400, 1) + " d";
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};
constexpr int kNumColors = 8;
constexpr double kW = 460, kH = 260, kLeft = 60, kRight = 12, kTop = 28, kBottom = 42;

const char* Color(const ChartLine& line, size_t position) {
  const int i = line.color >= 0 ? line.color : static_cast<int>(position);
  return kColors[i % kNumColors];
}

double Nice(double v) {  // a round upper bound
  if (v <= 0) return 1;
  const double p = std::pow(10, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

std::string Tick(double v) {
  if (std::fabs(v) >= 1e6) return Fixed(v / 1e6, 1) + "M";
  if (std::fabs(v) >= 1e4) return Fixed(v / 1e3, 0) + "k";
  if (std::fabs(v) >= 100 || v == std::floor(v)) return Fixed(v, 0);
  if (std::fabs(v) >= 0.1) return Fixed(v, 2);
  return Fixed(v, 3);
}

std::string XTick(AxisUnit unit, double x) {
  switch (unit) {
    case AxisUnit::kSeconds:
      return HumanSeconds(x);
    case AxisUnit::kDays:
      return Fixed(x, x == std::floor(x) ? 0 : 1) + " d";
    case AxisUnit::kNumber:
      break;
  }
  return Tick(x);
}

// The y axis: linear from 0 to a round bound, or log by whole decades.
class YAxis {
 public:
  YAxis(const Chart& c, double data_min_positive, double data_max) : log_(c.log_y) {
    if (log_) {
      lo_ = data_min_positive > 0 ? std::floor(std::log10(data_min_positive)) : 0;
      hi_ = data_max > 0 ? std::ceil(std::log10(c.ymax > 0 ? c.ymax : data_max)) : lo_ + 1;
      if (hi_ <= lo_) hi_ = lo_ + 1;
    } else {
      hi_ = c.ymax > 0 ? c.ymax : Nice(data_max);
    }
  }
  bool Drawn(double y) const { return !log_ || y > 0; }
  double Pixel(double y) const {  // REQUIRES: Drawn(y)
    const double share = log_ ? (std::log10(y) - lo_) / (hi_ - lo_) : std::min(y, hi_) / hi_;
    return kTop + (kH - kTop - kBottom) * (1 - std::clamp(share, 0.0, 1.0));
  }
  std::vector<double> Ticks() const {
    std::vector<double> t;
    if (log_) {
      for (double d = lo_; d <= hi_; ++d) t.push_back(std::pow(10, d));
    } else {
      for (int i = 0; i <= 4; ++i) t.push_back(hi_ * i / 4);
    }
    return t;
  }
  double Base() const { return log_ ? std::pow(10, lo_) : 0; }

 private:
  bool log_;
  double lo_ = 0, hi_ = 1;
};

// The legend goes below the chart, two entries a row, so it never hides
// a line: `entries` makes room for it.
constexpr double kLegendRow = 14;
double LegendHeight(size_t entries) { return kLegendRow * static_cast<double>((entries + 1) / 2); }

void Frame(std::ostringstream& s, const Chart& c, const YAxis& y, size_t entries) {
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kW << "' height='"
    << kH + LegendHeight(entries) << "' font-family='sans-serif' font-size='11'>";
  s << "<text x='" << kW / 2 << "' y='16' text-anchor='middle' font-size='13' font-weight='bold'>"
    << XmlEscape(c.title) << "</text>";
  for (double yv : y.Ticks()) {
    const double py = y.Pixel(yv);
    s << "<line x1='" << kLeft << "' x2='" << kW - kRight << "' y1='" << Fixed(py, 1) << "' y2='"
      << Fixed(py, 1) << "' stroke='#ddd'/><text x='" << kLeft - 4 << "' y='" << Fixed(py + 4, 1)
      << "' text-anchor='end'>" << Tick(yv) << "</text>";
  }
  const double mid = (kTop + kH - kBottom) / 2;
  s << "<text x='" << (kLeft + kW - kRight) / 2 << "' y='" << kH - 8 << "' text-anchor='middle'>"
    << XmlEscape(c.xlabel) << "</text><text x='12' y='" << mid << "' transform='rotate(-90 12,"
    << mid << ")' text-anchor='middle'>" << XmlEscape(c.ylabel) << "</text>";
}

// Entry `i`: a swatch of the line (dashed as it is) and its name.
void Legend(std::ostringstream& s, size_t i, const char* color, const std::string& name,
            bool dashed = false, bool band = false) {
  const double x = 10 + (kW / 2) * static_cast<double>(i % 2);
  const double y = kH + kLegendRow * static_cast<double>(i / 2) + 4;
  if (band) {
    s << "<rect x='" << x << "' y='" << y - 5 << "' width='16' height='10' fill='#e8e8e8'/>";
  } else {
    s << "<line x1='" << x << "' x2='" << x + 16 << "' y1='" << y << "' y2='" << y
      << "' stroke-width='2' stroke='" << color << "'" << (dashed ? " stroke-dasharray='4 3'" : "")
      << "/>";
  }
  s << "<text x='" << x + 21 << "' y='" << y + 4 << "'>" << XmlEscape(name) << "</text>";
}

}  // namespace

std::string LineChart(const Chart& c, const std::vector<ChartLine>& lines) {
  double xmin = 1e300, xmax = -1e300, ymin_pos = 1e300, ymax = 0;
  const auto xv = [&](double x) { return c.log_x ? std::log10(std::max(x, 1.0)) : x; };
  for (const ChartLine& line : lines) {
    for (const auto& [x, y] : line.points) {
      xmin = std::min(xmin, xv(x));
      xmax = std::max(xmax, xv(x));
      ymax = std::max(ymax, y);
      if (y > 0) ymin_pos = std::min(ymin_pos, y);
    }
  }
  if (xmin > xmax) xmin = 0, xmax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  const YAxis y(c, ymin_pos < 1e300 ? ymin_pos : 0, ymax);
  const bool band_entry = !c.bands.empty() && !c.band_label.empty();
  const size_t entries = std::count_if(lines.begin(), lines.end(),
                                       [](const ChartLine& l) { return !l.points.empty(); }) +
                         (band_entry ? 1 : 0);
  const auto X = [&](double x) {
    return kLeft + (kW - kLeft - kRight) * (xv(x) - xmin) / (xmax - xmin);
  };
  std::ostringstream s;
  Frame(s, c, y, entries);
  for (const auto& [from, to] : c.bands) {
    const double x0 = std::clamp(X(from), kLeft, kW - kRight);
    const double x1 = std::clamp(X(to), kLeft, kW - kRight);
    if (x1 <= x0) continue;
    s << "<rect x='" << Fixed(x0, 1) << "' y='" << kTop << "' width='"
      << Fixed(std::max(x1 - x0, 0.8), 1) << "' height='" << kH - kTop - kBottom
      << "' fill='#e8e8e8'/>";
  }
  for (int i = 0; i <= 4; ++i) {
    const double at = xmin + (xmax - xmin) * i / 4;
    s << "<text x='" << kLeft + (kW - kLeft - kRight) * i / 4 << "' y='" << kH - kBottom + 14
      << "' text-anchor='middle'>" << XTick(c.x_unit, c.log_x ? std::pow(10, at) : at) << "</text>";
  }
  s << "<rect x='" << kLeft << "' y='" << kTop << "' width='" << kW - kLeft - kRight << "' height='"
    << kH - kTop - kBottom << "' fill='none' stroke='#888'/>";
  size_t row = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const ChartLine& line = lines[i];
    if (line.points.empty()) continue;
    s << "<polyline fill='none' stroke-width='1.6' stroke='" << Color(line, i) << "'"
      << (line.dashed ? " stroke-dasharray='4 3'" : "") << " points='";
    for (const auto& [x, yv] : line.points) {
      if (y.Drawn(yv)) s << Fixed(X(x), 1) << "," << Fixed(y.Pixel(yv), 1) << " ";
    }
    s << "'/>";
    Legend(s, row++, Color(line, i), line.name, line.dashed);
  }
  if (band_entry) Legend(s, row, "#999", c.band_label, false, /*band=*/true);
  s << "</svg>";
  return s.str();
}

std::string BarChart(const Chart& c, const std::vector<std::string>& categories,
                     const std::vector<ChartLine>& series) {
  double ymin_pos = 1e300, ymax = 0;
  for (const ChartLine& line : series) {
    for (const auto& [x, yv] : line.points) {
      ymax = std::max(ymax, yv);
      if (yv > 0) ymin_pos = std::min(ymin_pos, yv);
    }
  }
  const YAxis y(c, ymin_pos < 1e300 ? ymin_pos : 0, ymax);
  std::ostringstream s;
  Frame(s, c, y, series.size());
  const double group_w =
      (kW - kLeft - kRight) / static_cast<double>(std::max<size_t>(1, categories.size()));
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, series.size()));
  const double base = y.Pixel(y.Base());
  for (size_t g = 0; g < categories.size(); ++g) {
    const double gx = kLeft + group_w * static_cast<double>(g) + group_w * 0.1;
    s << "<text x='" << Fixed(gx + group_w * 0.4, 1) << "' y='" << kH - kBottom + 14
      << "' text-anchor='middle'>" << XmlEscape(categories[g]) << "</text>";
    for (size_t k = 0; k < series.size(); ++k) {
      if (g >= series[k].points.size() || !y.Drawn(series[k].points[g].second)) continue;
      const double top = y.Pixel(series[k].points[g].second);
      s << "<rect x='" << Fixed(gx + bar_w * static_cast<double>(k), 1) << "' y='" << Fixed(top, 1)
        << "' width='" << Fixed(bar_w - 1, 1) << "' height='" << Fixed(base - top, 1) << "' fill='"
        << Color(series[k], k) << "'/>";
    }
  }
  for (size_t k = 0; k < series.size(); ++k) Legend(s, k, Color(series[k], k), series[k].name);
  s << "</svg>";
  return s.str();
}

}  // namespace unipool::io
