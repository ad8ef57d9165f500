// renderers.hpp — one function per output file of `cnnscale report`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "report/analysis.hpp"

namespace cnnscale::report {

std::string render_markdown(const Report& rep);  // report.md
std::string render_html(const Report& rep);      // report.html (self-contained, inline SVG)
std::string render_csv(const Report& rep);       // scaling.csv (measured and model rows)
nlohmann::json render_json(const Report& rep);   // report.json

}  // namespace cnnscale::report
