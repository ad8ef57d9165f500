// error.cpp — the single place that formats "cnnscale: error:" lines.
#include "util/error.hpp"

#include <cstdio>

namespace cnnscale {

void print_error(const std::string& message) {
  std::fprintf(stderr, "cnnscale: error: %s\n", message.c_str());
  std::fflush(stderr);
}

}  // namespace cnnscale
