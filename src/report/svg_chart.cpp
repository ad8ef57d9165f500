// svg_chart.cpp — see svg_chart.hpp.
#include "report/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "report/format.hpp"

namespace cnnscale::report {

namespace {

constexpr double W = 640, H = 360, L = 72, R = 170, T = 36, B = 52;  // size and margins
constexpr double PW = W - L - R, PH = H - T - B;                     // plot area

// A "nice" axis maximum and step for values up to v (5 or so ticks).
std::pair<double, double> nice_axis(double v) {
  if (!(v > 0)) v = 1;
  const double raw = v / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  return {step * std::ceil(v / step - 1e-9), step};
}

std::string n(double v) { return fmt_fixed(v, 1); }

void header(std::ostringstream& os, const std::string& title, const std::string& x_label, const std::string& y_label) {
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
     << " " << H << "\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<title>" << xml_escape(title) << "</title>\n";
  os << "<rect x=\"0\" y=\"0\" width=\"" << W << "\" height=\"" << H << "\" fill=\"white\"/>\n";
  os << "<text x=\"" << n(L + PW / 2) << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
     << xml_escape(title) << "</text>\n";
  os << "<text x=\"" << n(L + PW / 2) << "\" y=\"" << n(H - 10) << "\" text-anchor=\"middle\">" << xml_escape(x_label)
     << "</text>\n";
  os << "<text x=\"16\" y=\"" << n(T + PH / 2) << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
     << n(T + PH / 2) << ")\">" << xml_escape(y_label) << "</text>\n";
}

void y_axis(std::ostringstream& os, double ymax, double step) {
  for (double y = 0; y <= ymax + step * 1e-6; y += step) {
    const double py = T + PH - y / ymax * PH;
    os << "<line x1=\"" << n(L) << "\" y1=\"" << n(py) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(py)
       << "\" stroke=\"#e0e0e0\"/>\n";
    os << "<text x=\"" << n(L - 6) << "\" y=\"" << n(py + 4) << "\" text-anchor=\"end\">" << fmt_num(y, 3)
       << "</text>\n";
  }
  os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T) << "\" x2=\"" << n(L) << "\" y2=\"" << n(T + PH)
     << "\" stroke=\"black\"/>\n";
  os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T + PH) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(T + PH)
     << "\" stroke=\"black\"/>\n";
}

// One legend entry at *y (the top entry at T + 10), its name wrapped into lines that fit
// the right margin (12 px sans-serif: ~6.5 px per character, measured in Chromium: a
// longer name was cut at the edge of the chart); *y moves below it.
void legend_entry(std::ostringstream& os, double* y_io, const std::string& name, const std::string& color, bool dashed,
                  bool box) {
  const double x = L + PW + 14, y = *y_io;
  const size_t per_line = static_cast<size_t>((W - (x + 24) - 4) / 6.5);
  std::vector<std::string> lines{""};
  std::istringstream words(name);
  for (std::string w; words >> w;) {
    if (!lines.back().empty() && lines.back().size() + 1 + w.size() > per_line) lines.emplace_back();
    lines.back() += (lines.back().empty() ? "" : " ") + w;
  }
  if (box)
    os << "<rect x=\"" << n(x) << "\" y=\"" << n(y - 6) << "\" width=\"18\" height=\"10\" fill=\"" << color << "\"/>\n";
  else
    os << "<line x1=\"" << n(x) << "\" y1=\"" << n(y) << "\" x2=\"" << n(x + 18) << "\" y2=\"" << n(y) << "\" stroke=\""
       << color << "\" stroke-width=\"2\"" << (dashed ? " stroke-dasharray=\"5,3\"" : "") << "/>\n";
  os << "<text x=\"" << n(x + 24) << "\" y=\"" << n(y + 4) << "\">";
  if (lines.size() == 1) os << xml_escape(lines[0]);
  else
    for (size_t i = 0; i < lines.size(); ++i)
    os << "<tspan x=\"" << n(x + 24) << "\"" << (i ? " dy=\"14\"" : "") << ">" << xml_escape(lines[i]) << "</tspan>";
  os << "</text>\n";
  *y_io = y + 20 + 14 * static_cast<double>(lines.size() - 1);
}

}  // namespace

std::string render_svg(const LineChart& c) {
  double xmin = 0, xmax = 0, ymax = 0;
  bool first = true;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (first) xmin = xmax = x, first = false;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      if (std::isfinite(y)) ymax = std::max(ymax, y);
    }
  if (first) xmin = 1, xmax = 2;
  if (c.y_max) ymax = *c.y_max;
  if (c.hline) ymax = std::max(ymax, *c.hline);
  auto [top, step] = nice_axis(ymax);
  // log2 x axis with a little padding on both sides.
  const double lx0 = std::log2(xmin) - 0.25, lx1 = std::log2(std::max(xmax, xmin * 2)) + 0.25;
  auto px = [&](double x) { return L + (std::log2(x) - lx0) / (lx1 - lx0) * PW; };
  // log10 y: from the decade below the smallest positive value to the decade above the largest.
  double ymin_pos = ymax;
  for (const auto& s : c.series)
    for (const auto& pt : s.points)
      if (pt.second > 0 && std::isfinite(pt.second)) ymin_pos = std::min(ymin_pos, pt.second);
  const double ly0 = std::floor(std::log10(ymin_pos > 0 ? ymin_pos : 1)),
               ly1 = std::max(ly0 + 1, std::ceil(std::log10(ymax > 0 ? ymax : 10)));
  auto py = [&](double y) {
    if (c.log_y) return T + PH - (std::log10(std::max(y, std::pow(10.0, ly0))) - ly0) / (ly1 - ly0) * PH;
    return T + PH - std::clamp(y, 0.0, top) / top * PH;
  };

  std::ostringstream os;
  header(os, c.title, c.x_label, c.y_label);
  if (c.log_y) {
    for (int k = static_cast<int>(ly0); k <= static_cast<int>(ly1); ++k)
      for (double m : {1.0, 2.0, 5.0}) {
        const double y = m * std::pow(10.0, k);
        if (y > std::pow(10.0, ly1) * 1.0001) break;
        os << "<line x1=\"" << n(L) << "\" y1=\"" << n(py(y)) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(py(y))
           << "\" stroke=\"" << (m == 1.0 ? "#d0d0d0" : "#eeeeee") << "\"/>\n";
        os << "<text x=\"" << n(L - 6) << "\" y=\"" << n(py(y) + 4) << "\" text-anchor=\"end\">" << fmt_num(y, 3)
           << "</text>\n";
      }
    os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T) << "\" x2=\"" << n(L) << "\" y2=\"" << n(T + PH)
       << "\" stroke=\"black\"/>\n";
    os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T + PH) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(T + PH)
       << "\" stroke=\"black\"/>\n";
  } else {
    y_axis(os, top, step);
  }
  for (int k = static_cast<int>(std::ceil(lx0)); k <= static_cast<int>(std::floor(lx1)); ++k) {
    const double x = std::pow(2.0, k);
    os << "<line x1=\"" << n(px(x)) << "\" y1=\"" << n(T + PH) << "\" x2=\"" << n(px(x)) << "\" y2=\"" << n(T + PH + 5)
       << "\" stroke=\"black\"/>\n";
    os << "<text x=\"" << n(px(x)) << "\" y=\"" << n(T + PH + 18) << "\" text-anchor=\"middle\">" << fmt_count(x)
       << "</text>\n";
  }
  double ly = T + 10;  // the next legend entry's baseline
  if (c.hline) {
    os << "<line x1=\"" << n(L) << "\" y1=\"" << n(py(*c.hline)) << "\" x2=\"" << n(L + PW) << "\" y2=\""
       << n(py(*c.hline)) << "\" stroke=\"#d62728\" stroke-dasharray=\"2,3\"/>\n";
    legend_entry(os, &ly, c.hline_label, "#d62728", true, false);
  }
  for (const auto& s : c.series) {
    if (s.points.empty()) continue;
    if (s.line)
      os << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\""
         << (s.dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"";
    if (s.line)
      for (const auto& [x, y] : s.points) os << n(px(x)) << "," << n(py(y)) << " ";
    if (s.line) os << "\"/>\n";
    if (s.markers)
      for (const auto& [x, y] : s.points)
        os << "<circle cx=\"" << n(px(x)) << "\" cy=\"" << n(py(y)) << "\" r=\"3.5\" fill=\"" << s.color << "\"><title>"
           << xml_escape(s.name) << ": " << fmt_count(x) << " ranks, " << fmt_num(y, 4) << "</title></circle>\n";
    legend_entry(os, &ly, s.name, s.color, s.dashed, false);
  }
  os << "</svg>\n";
  return os.str();
}

std::string render_svg(const StackedBarChart& c) {
  const size_t nc = c.categories.size();
  double ymax = 0, yneg = 0;
  for (size_t i = 0; i < nc; ++i) {
    double pos = 0, neg = 0;
    for (const auto& s : c.stacks) {
      const double v = i < s.values.size() ? s.values[i] : 0;
      (v >= 0 ? pos : neg) += std::fabs(v);
    }
    ymax = std::max(ymax, pos);
    yneg = std::max(yneg, neg);
  }
  auto [top, step] = nice_axis(ymax);
  const double bottom = yneg > 0 ? step * std::ceil(yneg / step - 1e-9) : 0;  // depth below zero
  auto py = [&](double v) { return T + PH - (v + bottom) / (top + bottom) * PH; };
  std::ostringstream os;
  header(os, c.title, c.x_label, c.y_label);
  for (double y = -bottom; y <= top + step * 1e-6; y += step) {
    os << "<line x1=\"" << n(L) << "\" y1=\"" << n(py(y)) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(py(y))
       << "\" stroke=\"" << (std::fabs(y) < step * 1e-6 ? "#808080" : "#e0e0e0") << "\"/>\n";
    os << "<text x=\"" << n(L - 6) << "\" y=\"" << n(py(y) + 4) << "\" text-anchor=\"end\">"
       << fmt_num(std::fabs(y) < step * 1e-6 ? 0 : y, 3) << "</text>\n";
  }
  os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T) << "\" x2=\"" << n(L) << "\" y2=\"" << n(T + PH)
     << "\" stroke=\"black\"/>\n";
  os << "<line x1=\"" << n(L) << "\" y1=\"" << n(T + PH) << "\" x2=\"" << n(L + PW) << "\" y2=\"" << n(T + PH)
     << "\" stroke=\"black\"/>\n";
  const double slot = nc ? PW / nc : PW, bw = slot * 0.6;
  for (size_t i = 0; i < nc; ++i) {
    const double x = L + slot * i + (slot - bw) / 2;
    double up = 0, down = 0;
    for (const auto& s : c.stacks) {
      const double v = i < s.values.size() ? s.values[i] : 0;
      double a, b;  // value range of this piece
      if (v >= 0) {
        a = up, b = up + v, up = b;
      } else {
        a = down + v, b = down, down = a;
      }
      os << "<rect x=\"" << n(x) << "\" y=\"" << n(py(b)) << "\" width=\"" << n(bw) << "\" height=\""
         << n(py(a) - py(b)) << "\" fill=\"" << s.color << "\"" << (v < 0 ? " fill-opacity=\"0.6\"" : "") << "><title>"
         << xml_escape(s.name) << " at " << xml_escape(c.categories[i]) << ": " << fmt_num(v, 4) << "</title></rect>\n";
    }
    os << "<text x=\"" << n(x + bw / 2) << "\" y=\"" << n(T + PH + 18) << "\" text-anchor=\"middle\">"
       << xml_escape(c.categories[i]) << "</text>\n";
  }
  double ly = T + 10;  // the next legend entry's baseline
  for (auto it = c.stacks.rbegin(); it != c.stacks.rend(); ++it)
    legend_entry(os, &ly, it->name, it->color, false, true);
  os << "</svg>\n";
  return os.str();
}

}  // namespace cnnscale::report
