// render_markdown.cpp — report.md: GitHub-flavoured Markdown whose tables also read
// well in a terminal (columns padded to equal width).
#include <algorithm>
#include <sstream>

#include "report/format.hpp"
#include "report/renderers.hpp"
#include "report/report_tables.hpp"

namespace cnnscale::report {

namespace {

size_t width(const std::string& s) {  // display width: count UTF-8 code points
  size_t w = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++w;
  return w;
}

void table(std::ostringstream& os, const TextTable& t) {
  std::vector<size_t> w(t.headers.size(), 3);
  for (size_t i = 0; i < t.headers.size(); ++i) w[i] = std::max(w[i], width(t.headers[i]));
  for (const auto& r : t.rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], width(r[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    os << "|";
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string c = i < cells.size() ? cells[i] : "";
      os << " " << (i == 0 ? c + std::string(w[i] - width(c), ' ') : std::string(w[i] - width(c), ' ') + c) << " |";
    }
    os << "\n";
  };
  line(t.headers);
  os << "|";
  for (size_t i = 0; i < w.size(); ++i)
    os << (i == 0 ? " :" : " ") << std::string(w[i] - 1, '-') << (i == 0 ? "" : ":") << " |";
  os << "\n";
  for (const auto& r : t.rows) line(r);
  os << "\n";
  for (const auto& n : t.notes) os << n << "\n\n";
}

}  // namespace

std::string render_markdown(const Report& rep) {
  std::ostringstream os;
  os << "# cnnscale scaling report\n\n";
  size_t nruns = 0;
  for (const auto& g : rep.groups) nruns += g.rows.size();
  os << rep.groups.size() << (rep.groups.size() == 1 ? " configuration" : " configurations") << ", " << nruns
     << " rank counts. Efficiency threshold " << fmt_pct(rep.options.efficiency_threshold) << ".\n\n";
  for (const auto& s : rep.skipped) os << "- Skipped: " << s << "\n";
  if (!rep.skipped.empty()) os << "\n";
  for (const auto& b : benchmark_sentences(rep)) os << b << "\n\n";

  for (const auto& ga : rep.groups) {
    os << "## " << ga.group.label << " — " << mode_name(ga.group.mode) << " scaling\n\n";
    if (ga.recommendation) os << "**" << ga.recommendation->text << "**\n\n";
    os << mode_sentence(ga) << "\n\n";
    for (const auto& n : ga.notes) os << "> " << n << "\n\n";
    for (const auto& n : ga.group.notes) os << "- Note: " << n << "\n";
    if (!ga.group.notes.empty()) os << "\n";
    os << "### Measured\n\n";
    table(os, measured_table(ga));
    os << "### " << breakdown_heading(ga) << "\n\n";
    table(os, breakdown_table(ga));
    for (const auto& n : breakdown_notes(ga)) os << "- Note: " << n << "\n";
    if (!breakdown_notes(ga).empty()) os << "\n";
    if (ga.fit) {
      os << "### Model\n\n";
      for (const auto& s : model_sentences(ga)) os << s << "\n\n";
      table(os, parameter_table(ga));
      table(os, fit_table(ga));
      os << "### Projection (model, not measured)\n\n" << kModelDisclaimer << "\n\n";
      table(os, projection_table(ga));
    }
    if (ga.budget) {
      os << "### Training budget\n\n" << ga.budget->request << "\n\n";
      table(os, budget_table(ga));
      for (const auto& n : ga.budget->notes) os << "- Note: " << n << "\n";
      if (!ga.budget->notes.empty()) os << "\n";
    }
    if (!rep.points.empty()) {
      os << "### External points (--points " << rep.options.points_file.value_or("") << ")\n\n";
      table(os, points_table(rep, ga));
    }
  }
  if (const auto tl = timeline_links(rep); !tl.empty()) {
    os << "## Step timelines\n\n";
    for (const auto& t : tl) os << "- " << timeline_sentence(t) << "\n";
    os << "\n";
  }
  os << "Formulas and how to read this report: docs/report.md in the cnnscale sources.\n";
  return os.str();
}

}  // namespace cnnscale::report
