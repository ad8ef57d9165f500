// render_html.cpp — report.html: one self-contained page, also well-formed XML, (inline CSS and SVG, no
// scripts, no external resources) with the tables and three charts per group:
// throughput vs ranks with the ideal line, efficiency vs ranks, stacked step time.
#include <algorithm>
#include <cmath>
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
  for (const auto& n : t.notes) os << "<p class=\"note\">" << xml_escape(n) << "</p>\n";
}

// Projected (and measured) layouts in rank order, with the model's band where it has one.
struct ModelCurve {
  std::vector<std::pair<double, double>> mid, lo, hi;
};
ModelCurve model_curve(const GroupAnalysis& ga, bool efficiency) {
  ModelCurve c;
  if (!ga.fit) return c;
  std::vector<std::pair<double, const Projection*>> pts;
  for (const auto& r : ga.rows) {
    const Layout l{double(r.nodes), double(r.ranks_per_node)};
    const double v = efficiency ? ga.fit->model.efficiency(l) : ga.fit->model.images_per_s(l);
    c.mid.push_back({double(r.ranks), v});
  }
  std::vector<const Projection*> ps;
  for (const auto& p : ga.projections)
    if (p.projected) ps.push_back(&p);
  std::sort(ps.begin(), ps.end(), [](auto* a, auto* b) { return a->ranks < b->ranks; });
  for (const auto* p : ps) {
    c.mid.push_back({double(p->ranks), efficiency ? p->efficiency : p->images_per_s});
    if (efficiency ? (p->eff_lo && p->eff_hi) : (p->ips_lo && p->ips_hi)) {
      c.lo.push_back({double(p->ranks), efficiency ? *p->eff_lo : *p->ips_lo});
      c.hi.push_back({double(p->ranks), efficiency ? *p->eff_hi : *p->ips_hi});
    }
  }
  return c;
}

std::string throughput_chart(const Report& rep, const GroupAnalysis& ga) {
  LineChart c;
  c.title = "Throughput vs ranks";
  c.x_label = "ranks (log2 scale)";
  c.y_label = "throughput (images/s, log scale)";
  c.log_y = true;
  const auto& base = ga.rows.front();
  Series measured{"measured (median)", "#1f77b4", {}, false, true};
  Series ideal{"ideal (linear)", "#7f7f7f", {}, true, false};
  Series model{"model (projection)", "#ff7f0e", {}, true, true};
  Series lo{"model band 5%", "#ffbb78", {}, true, false}, hi{"model band 95%", "#ffbb78", {}, true, false};
  Series ext{"external (--points)", "#2ca02c", {}, false, true};
  ext.line = false;
  for (const auto& r : ga.rows) measured.points.push_back({double(r.ranks), r.images_per_s});
  const ModelCurve mc = model_curve(ga, false);
  model.points = mc.mid, lo.points = mc.lo, hi.points = mc.hi;
  for (const auto& p : rep.points) ext.points.push_back({double(p.ranks), p.images_per_s});
  std::vector<double> xs;
  for (const auto& r : ga.rows) xs.push_back(r.ranks);
  for (const auto& p : mc.mid) xs.push_back(p.first);
  for (const auto& p : ext.points) xs.push_back(p.first);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  // Log y axis: ideal linear scaling is a straight line across all counts.
  const double per_rank = base.images_per_s / base.ranks;
  for (double x : xs) ideal.points.push_back({x, per_rank * x});
  c.series = {ideal, measured};
  if (ga.fit) c.series.push_back(model);
  if (!lo.points.empty()) c.series.push_back(lo), c.series.push_back(hi);
  if (!ext.points.empty()) c.series.push_back(ext);
  return render_svg(c);
}

// Node-hours and wall time of the whole training against nodes (measured and projected).
std::string budget_chart(const GroupAnalysis& ga) {
  LineChart c;
  c.title = "Training budget vs nodes";
  c.x_label = "nodes (log2 scale)";
  c.y_label = "hours (log scale)";
  c.log_y = true;
  Series nh{"node-hours (measured)", "#1f77b4", {}, false, true}, nhp{"node-hours (model)", "#1f77b4", {}, true, true};
  Series wall{"wall time h (measured)", "#d62728", {}, false, true}, wallp{"wall time h (model)", "#d62728", {}, true, true};
  for (const auto& r : ga.budget->rows) {
    (r.projected ? nhp : nh).points.push_back({r.nodes, r.node_hours});
    (r.projected ? wallp : wall).points.push_back({r.nodes, r.wall_h});
  }
  // The model's lines start at the largest measured count, so that they continue the measured ones.
  if (!nh.points.empty() && !nhp.points.empty()) nhp.points.insert(nhp.points.begin(), nh.points.back());
  if (!wall.points.empty() && !wallp.points.empty()) wallp.points.insert(wallp.points.begin(), wall.points.back());
  for (auto* s : {&nh, &wall, &nhp, &wallp})
    if (!s->points.empty()) c.series.push_back(*s);
  return render_svg(c);
}

std::string efficiency_chart(const Report& rep, const GroupAnalysis& ga, double threshold) {
  LineChart c;
  c.title = "Parallel efficiency vs ranks";
  c.x_label = "ranks (log2 scale)";
  c.y_label = "parallel efficiency (fraction of ideal)";
  Series measured{"measured", "#1f77b4", {}, false, true};
  Series model{"model (projection)", "#ff7f0e", {}, true, true};
  Series lo{"model band 5%", "#ffbb78", {}, true, false}, hi{"model band 95%", "#ffbb78", {}, true, false};
  Series ext{"external (--points)", "#2ca02c", {}, false, true};
  ext.line = false;
  double ymax = 1.0;
  for (const auto& r : ga.rows) {
    measured.points.push_back({double(r.ranks), r.efficiency});
    ymax = std::max(ymax, r.efficiency);
  }
  const ModelCurve mc = model_curve(ga, true);
  model.points = mc.mid, lo.points = mc.lo, hi.points = mc.hi;
  for (const auto& p : mc.hi) ymax = std::max(ymax, p.second);
  // External points: efficiency relative to this group's base per-rank throughput.
  const double per_rank = ga.rows.front().images_per_s / ga.rows.front().ranks;
  for (const auto& p : rep.points) {
    ext.points.push_back({double(p.ranks), p.images_per_s / (per_rank * p.ranks)});
    ymax = std::max(ymax, ext.points.back().second);
  }
  if (!ext.points.empty()) ext.name = "external (--points, vs this base)";
  c.series = {measured};
  if (ga.fit) c.series.push_back(model);
  if (!lo.points.empty()) c.series.push_back(lo), c.series.push_back(hi);
  if (!ext.points.empty()) c.series.push_back(ext);
  c.y_max = ymax;
  c.hline = threshold;
  c.hline_label = "threshold " + fmt_pct(threshold);
  return render_svg(c);
}

std::string breakdown_chart(const GroupAnalysis& ga) {
  StackedBarChart c;
  c.title = "Where the step time goes";
  c.x_label = "ranks";
  c.y_label = "median time per step (ms)";
  BarStack data{"data", "#2ca02c", {}}, compute{"compute", "#1f77b4", {}}, comm{"comm (exposed)", "#d62728", {}},
      opt{"optimizer", "#9467bd", {}}, other{"other (below 0: parts exceed the step)", "#bcbd22", {}};
  for (const auto& r : ga.rows) {
    c.categories.push_back(std::to_string(r.ranks));
    data.values.push_back(r.breakdown.data);
    compute.values.push_back(r.breakdown.compute);
    comm.values.push_back(r.breakdown.comm_exposed);
    opt.values.push_back(r.breakdown.optimizer);
    double o = r.step_ms - r.breakdown.sum();
    if (std::fabs(o) < 1e-6 * r.step_ms) o = 0;
    other.values.push_back(o);  // negative values are drawn below the axis
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
  for (const auto& b : benchmark_sentences(rep)) os << "<p>" << xml_escape(b) << "</p>\n";
  for (const auto& ga : rep.groups) {
    os << "<h2>" << xml_escape(ga.group.label) << " — " << mode_name(ga.group.mode) << " scaling</h2>\n";
    if (ga.recommendation) os << "<p class=\"rec\">" << xml_escape(ga.recommendation->text) << "</p>\n";
    os << "<p>" << xml_escape(mode_sentence(ga)) << "</p>\n";
    for (const auto& n : ga.notes) os << "<p class=\"note\">" << xml_escape(n) << "</p>\n";
    for (const auto& n : ga.group.notes) os << "<p class=\"note\">Note: " << xml_escape(n) << "</p>\n";
    os << "<div class=\"charts\">\n"
       << throughput_chart(rep, ga) << efficiency_chart(rep, ga, rep.options.efficiency_threshold)
       << breakdown_chart(ga) << "</div>\n";
    os << "<h3>Measured</h3>\n";
    table(os, measured_table(ga));
    os << "<h3>" << xml_escape(breakdown_heading(ga)) << "</h3>\n";
    table(os, breakdown_table(ga));
    for (const auto& n : breakdown_notes(ga)) os << "<p class=\"note\">Note: " << xml_escape(n) << "</p>\n";
    if (ga.fit) {
      os << "<h3>Model</h3>\n";
      for (const auto& s : model_sentences(ga)) os << "<p>" << xml_escape(s) << "</p>\n";
      table(os, parameter_table(ga));
      table(os, fit_table(ga));
      os << "<h3>Projection (model, not measured)</h3>\n<p>" << xml_escape(kModelDisclaimer) << "</p>\n";
      table(os, projection_table(ga));
    }
    if (ga.budget) {
      os << "<h3>Training budget</h3>\n<p class=\"rec\">" << xml_escape(ga.budget->request) << "</p>\n";
      os << "<div class=\"charts\">\n" << budget_chart(ga) << "</div>\n";
      table(os, budget_table(ga));
      for (const auto& n : ga.budget->notes) os << "<p class=\"note\">Note: " << xml_escape(n) << "</p>\n";
    }
    if (!rep.points.empty()) {
      os << "<h3>External points</h3>\n";
      table(os, points_table(rep, ga));
    }
  }
  if (const auto tl = timeline_links(rep); !tl.empty()) {
    os << "<h2>Step timelines</h2>\n<ul>\n";
    for (const auto& t : tl) {
      os << "<li>" << xml_escape(t.dir) << " (" << t.ranks << (t.ranks == 1 ? " rank" : " ranks") << "): ";
      if (t.exists)
        os << "<a href=\"file://" << xml_escape(t.path) << "\">" << xml_escape(t.path)
           << "</a> — open it in <a href=\"https://ui.perfetto.dev\">ui.perfetto.dev</a> or chrome://tracing";
      else os << xml_escape(t.path) << " (not found now)";
      os << "</li>\n";
    }
    os << "</ul>\n";
  }
  os << "<p class=\"note\">Formulas and how to read this report: docs/report.md in the cnnscale sources.</p>\n";
  os << "</body>\n</html>\n";
  return os.str();
}

}  // namespace cnnscale::report
