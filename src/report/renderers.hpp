// renderers.hpp — one function per output file of `cnnscale report`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "report/analysis.hpp"

namespace cnnscale::report {

std::string render_markdown(const Report& rep);  // report.md
std::string render_html(const Report& rep);      // report.html (self-contained, inline SVG)
std::string render_csv(const Report& rep);       // scaling.csv (measured and model rows)
nlohmann::json render_json(const Report& rep);   // report.json's document
// report.json's text: render_json dumped (indent 2, a final newline), a byte that is not
// UTF-8 written as U+FFFD. Texts from damaged files reach the report (a skipped run's
// reason quotes what nlohmann's parser last read): a strict dump threw on them and ended
// the report without its files (fuzz_report).
std::string render_json_text(const Report& rep);

}  // namespace cnnscale::report
