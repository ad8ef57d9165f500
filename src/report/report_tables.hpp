// report_tables.hpp — the report's tables as plain text cells, shared by the Markdown
// and HTML writers (one source of truth for columns, units and rounding), plus the
// summary sentences of a group (mode line, model parameters).
#pragma once
#include <string>
#include <vector>

#include "report/analysis.hpp"

namespace cnnscale::report {

struct TextTable {
  std::vector<std::string> headers;
  std::vector<std::vector<std::string>> rows;
  // Long texts a cell refers to as "[k]", printed below the table (so that report.md's
  // tables fit an 80–120 column terminal).
  std::vector<std::string> notes;
};

TextTable measured_table(const GroupAnalysis& ga);
TextTable breakdown_table(const GroupAnalysis& ga);
TextTable fit_table(const GroupAnalysis& ga);
TextTable projection_table(const GroupAnalysis& ga);
TextTable parameter_table(const GroupAnalysis& ga);                  // every model parameter, its state and band
TextTable points_table(const Report& rep, const GroupAnalysis& ga);  // --points beside the model
TextTable budget_table(const GroupAnalysis& ga);                     // the training budget (ga.budget set)
std::string breakdown_heading(const GroupAnalysis& ga);              // says medians or means
std::vector<std::string> breakdown_notes(const GroupAnalysis& ga);   // negative "other", means used

std::string mode_sentence(const GroupAnalysis& ga);                 // "Strong scaling: global batch 256 ..."
std::vector<std::string> model_sentences(const GroupAnalysis& ga);  // parameters and fit error
std::vector<std::string> benchmark_sentences(const Report& rep);    // what --allreduce gave

// The runs whose run.json names a --timeline trace file (docs/watching.md), in group order.
struct TimelineLink {
  std::string dir, path;
  int ranks = 1;
  bool exists = false;  // the file is there now
};
std::vector<TimelineLink> timeline_links(const Report& rep);
std::string timeline_sentence(const TimelineLink& t);  // "Step timeline of DIR (2 ranks): PATH — open ..."

constexpr const char* kModelDisclaimer =
    "Projections come from the fitted model, not from measurements: they assume the fitted compute "
    "scaling (per node) and the two-level allreduce cost continue to hold at larger counts (same "
    "network, same kind of node). The band is the 5th–95th percentile of the bootstrap (each run's "
    "noise and the fit's misfit) widened to the leave-one-out fits; a model of the wrong form beyond "
    "what the measured counts show is not in it.";

}  // namespace cnnscale::report
