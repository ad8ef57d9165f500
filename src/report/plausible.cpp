// plausible.cpp — see plausible.hpp.
#include "report/plausible.hpp"

#include <cmath>
#include <cstdio>

#include "util/error.hpp"

namespace cnnscale::report {
namespace {

std::string g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

void check_option(const std::string& option, double v, double lo, bool lo_inclusive, double hi,
                  const std::string& hint) {
  const std::string end = hint.empty() ? "" : "; " + hint;
  if (!std::isfinite(v)) fail(option, " ", g(v), " is not a finite number", end);
  const bool low = lo_inclusive ? !(v >= lo) : !(v > lo);
  if (low || v > hi)
    fail(option, " must be ", lo_inclusive ? "at least " : "more than ", g(lo), " and at most ", g(hi), ", got ", g(v),
         end);
}

void check_measured(const std::string& file, const std::string& field, double v, double hi, const std::string& unit) {
  if (std::isfinite(v) && std::fabs(v) <= hi) return;
  fail(file, ": field '", field, "' is ", g(v), ", more than any real measurement (at most ", g(hi), " ", unit,
       "): is the file damaged?");
}

}  // namespace cnnscale::report
