// svg_chart.hpp — hand-written inline SVG charts for report.html: a line chart with a
// log2 x axis (ranks) and a stacked bar chart. Output is well-formed XML with axes,
// tick labels, axis titles with units, and a legend.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cnnscale::report {

struct Series {
  std::string name;
  std::string color;  // CSS colour
  std::vector<std::pair<double, double>> points;
  bool dashed = false;
  bool markers = true;
  bool line = true;  // false: markers only (external points)
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::optional<double> y_max;  // default: from the data
  bool log_y = false;           // log10 y axis (throughput across decades of ranks)
  std::optional<double> hline;  // e.g. an efficiency threshold
  std::string hline_label;
};

struct BarStack {
  std::string name;
  std::string color;
  std::vector<double> values;  // one per category; negative values are drawn below the zero line
};

struct StackedBarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> categories;
  std::vector<BarStack> stacks;
};

std::string render_svg(const LineChart& c);
std::string render_svg(const StackedBarChart& c);

}  // namespace cnnscale::report
