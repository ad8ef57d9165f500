// format.cpp — see format.hpp.
#include "report/format.hpp"

#include <cmath>
#include <cstdio>

namespace cnnscale::report {

std::string fmt_num(double v, int significant) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  if (v == 0) return "0";
  const int mag = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  int decimals = std::max(0, significant - 1 - mag);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string fmt_pct(double fraction) { return fmt_fixed(100.0 * fraction, 1) + "%"; }

std::string fmt_count(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt_fixed(std::round(v), 0);
  return fmt_num(v, 3);
}

std::string fmt_opt(const std::optional<double>& v, int significant, const std::string& none) {
  return v ? fmt_num(*v, significant) : none;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace cnnscale::report
