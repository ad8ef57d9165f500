// render_html.cpp — report.html: one self-contained page, also well-formed XML, (inline CSS and SVG, no
// scripts, no external resources) with the tables and three charts per group:
// throughput vs ranks with the ideal line, efficiency vs ranks, stacked step time.
#include <algorithm>
#include <sstream>

#include "report/format.hpp"
#include "report/renderers.hpp"
#include "report/report_tables.hpp"
#include "report/svg_chart.hpp"

namespace cnnscale::report {

namespace {

void table(std::ostringstream& os, const TextTable& t) {
  os << "<table>\n<thead><tr>";
  for (const auto& h : t.headers) os << "<th>" << xml_escape(h) << "</th>";
  os << "</tr></thead>\n<tbody>\n";
  for (const auto& r : t.rows) {
    os << "<tr>";
    for (const auto& c : r) os << "<td>" << xml_escape(c) << "</td>";
    os << "</tr>\n";
  }
  os << "</tbody>\n</table>\n";
}

std::string throughput_chart(const GroupAnalysis& ga) {
  LineChart c;
  c.title = "Throughput vs ranks";
  c.x_label = "ranks (log2 scale)";
  c.y_label = "throughput (images/s, log scale)";
  c.log_y = true;
  const auto& base = ga.rows.front();
  Series measured{"measured (median)", "#1f77b4", {}, false, true};
  Series ideal{"ideal (linear)", "#7f7f7f", {}, true, false};
  Series model{"model (projection)", "#ff7f0e", {}, true, true};
  for (const auto& r : ga.rows) measured.points.push_back({double(r.ranks), r.images_per_s});
  std::vector<double> xs;
  for (const auto& r : ga.rows) xs.push_back(r.ranks);
  for (const auto& p : ga.projections) xs.push_back(p.ranks);
  if (ga.fit)
    for (double x : xs) model.points.push_back({x, ga.fit->model.images_per_s(x)});
  // Log y axis: ideal linear scaling is a straight line across all counts.
  const double per_rank = base.images_per_s / base.ranks;
  for (double x : xs) ideal.points.push_back({x, per_rank * x});
  c.series = {ideal, measured};
  if (ga.fit) c.series.push_back(model);
  return render_svg(c);
}

std::string efficiency_chart(const GroupAnalysis& ga, double threshold) {
  LineChart c;
  c.title = "Parallel efficiency vs ranks";
  c.x_label = "ranks (log2 scale)";
  c.y_label = "parallel efficiency (fraction of ideal)";
  Series measured{"measured", "#1f77b4", {}, false, true};
  Series model{"model (projection)", "#ff7f0e", {}, true, true};
  double ymax = 1.0;
  for (const auto& r : ga.rows) {
    measured.points.push_back({double(r.ranks), r.efficiency});
    ymax = std::max(ymax, r.efficiency);
  }
  if (ga.fit) {
    for (const auto& r : ga.rows) model.points.push_back({double(r.ranks), ga.fit->model.efficiency(r.ranks)});
    for (const auto& p : ga.projections) model.points.push_back({double(p.ranks), p.efficiency});
  }
  c.series = {measured};
  if (ga.fit) c.series.push_back(model);
  c.y_max = ymax;
  c.hline = threshold;
  c.hline_label = "threshold " + fmt_pct(threshold);
  return render_svg(c);
}

std::string breakdown_chart(const GroupAnalysis& ga) {
  StackedBarChart c;
  c.title = "Where the step time goes";
  c.x_label = "ranks";
  c.y_label = "mean time per step (ms)";
  BarStack data{"data", "#2ca02c", {}}, compute{"compute", "#1f77b4", {}}, comm{"comm (exposed)", "#d62728", {}},
      opt{"optimizer", "#9467bd", {}}, other{"other", "#bcbd22", {}};
  for (const auto& r : ga.rows) {
    c.categories.push_back(std::to_string(r.ranks));
    data.values.push_back(r.breakdown.data);
    compute.values.push_back(r.breakdown.compute);
    comm.values.push_back(r.breakdown.comm_exposed);
    opt.values.push_back(r.breakdown.optimizer);
    other.values.push_back(std::max(0.0, r.step_mean_ms - r.breakdown.sum()));
  }
  c.stacks = {data, compute, comm, opt, other};
  return render_svg(c);
}

}  // namespace

std::string render_html(const Report& rep) {
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
     << "<title>cnnscale scaling report</title>\n<style>\n"
     << "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\n"
     << "table{border-collapse:collapse;margin:0.5em 0 1.5em}\n"
     << "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\n"
     << "th{background:#f2f2f2}\ntd:first-child,th:first-child{text-align:left}\n"
     << ".rec{background:#eef6ee;border-left:4px solid #2ca02c;padding:0.6em 1em;font-weight:bold}\n"
     << ".note{color:#555}\n.charts svg{margin:0 1em 1em 0;border:1px solid #ddd}\n"
     << "</style>\n</head>\n<body>\n<h1>cnnscale scaling report</h1>\n";
  os << "<p>Efficiency threshold " << fmt_pct(rep.options.efficiency_threshold) << ".</p>\n";
  for (const auto& s : rep.skipped) os << "<p class=\"note\">Skipped: " << xml_escape(s) << "</p>\n";
  if (auto b = benchmark_sentence(rep); !b.empty()) os << "<p>" << xml_escape(b) << "</p>\n";
  for (const auto& ga : rep.groups) {
    os << "<h2>" << xml_escape(ga.group.label) << " — " << mode_name(ga.group.mode) << " scaling</h2>\n";
    if (ga.recommendation) os << "<p class=\"rec\">" << xml_escape(ga.recommendation->text) << "</p>\n";
    os << "<p>" << xml_escape(mode_sentence(ga)) << "</p>\n";
    for (const auto& n : ga.notes) os << "<p class=\"note\">" << xml_escape(n) << "</p>\n";
    for (const auto& n : ga.group.notes) os << "<p class=\"note\">Note: " << xml_escape(n) << "</p>\n";
    os << "<div class=\"charts\">\n" << throughput_chart(ga) << efficiency_chart(ga, rep.options.efficiency_threshold)
       << breakdown_chart(ga) << "</div>\n";
    os << "<h3>Measured</h3>\n";
    table(os, measured_table(ga));
    os << "<h3>Where the time goes (mean ms per step)</h3>\n";
    table(os, breakdown_table(ga));
    if (ga.fit) {
      os << "<h3>Model</h3>\n";
      for (const auto& s : model_sentences(ga)) os << "<p>" << xml_escape(s) << "</p>\n";
      table(os, fit_table(ga));
      os << "<h3>Projection (model, not measured)</h3>\n<p>" << xml_escape(kModelDisclaimer) << "</p>\n";
      table(os, projection_table(ga));
    }
  }
  os << "<p class=\"note\">Formulas and how to read this report: docs/report.md in the cnnscale sources.</p>\n";
  os << "</body>\n</html>\n";
  return os.str();
}

}  // namespace cnnscale::report
