// format.hpp — number formatting shared by the report writers (fixed significant
// digits, percentages, escaping for HTML/XML and CSV).
#pragma once
#include <optional>
#include <string>

namespace cnnscale::report {

std::string fmt_num(double v, int significant = 4);  // 1234.5 → "1235", 0.012345 → "0.01235"
std::string fmt_fixed(double v, int decimals);       // printf("%.*f")
std::string fmt_pct(double fraction);                // 0.8123 → "81.2%"
std::string fmt_count(double v);                     // 4.0 → "4", 2.5 → "2.5" (rank/node counts)
std::string fmt_opt(const std::optional<double>& v, int significant = 4, const std::string& none = "—");
std::string xml_escape(const std::string& s);
std::string csv_field(const std::string& s);

}  // namespace cnnscale::report
