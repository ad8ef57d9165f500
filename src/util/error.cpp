// error.cpp — the single place that formats "cnnscale: error:" and "cnnscale: internal error:" lines.
#include "util/error.hpp"

#include <cstdio>

namespace cnnscale {

void print_error(const std::string& message) {
  std::fprintf(stderr, "cnnscale: error: %s\n", message.c_str());
  std::fflush(stderr);
}

void print_internal_error(const std::string& message) {
  std::fprintf(stderr,
               "cnnscale: internal error: %s (a bug in cnnscale, not a mistake in the input: please report it "
               "with the command line and this message)\n",
               message.c_str());
  std::fflush(stderr);
}

}  // namespace cnnscale
