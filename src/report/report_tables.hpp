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
};

TextTable measured_table(const GroupAnalysis& ga);
TextTable breakdown_table(const GroupAnalysis& ga);
TextTable fit_table(const GroupAnalysis& ga);
TextTable projection_table(const GroupAnalysis& ga);

std::string mode_sentence(const GroupAnalysis& ga);            // "Strong scaling: global batch 256 ..."
std::vector<std::string> model_sentences(const GroupAnalysis& ga);  // parameters and fit error
std::string benchmark_sentence(const Report& rep);              // α, β from --allreduce, or ""

constexpr const char* kModelDisclaimer =
    "Projections come from the fitted model, not from measurements: they assume the measured "
    "compute scaling and the ring allreduce cost continue to hold at larger counts (same network, "
    "same per-node layout).";

}  // namespace cnnscale::report
