// log.cpp — see log.hpp.
#include "util/log.hpp"

#include <cstdio>

namespace cnnscale {
namespace {
int g_rank = 0;
}

void set_log_rank(int rank) { g_rank = rank; }
int log_rank() { return g_rank; }

void log_info(const std::string& line) {
  if (g_rank != 0) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

void log_warn(const std::string& line) {
  if (g_rank != 0) return;
  std::fprintf(stderr, "cnnscale: warning: %s\n", line.c_str());
  std::fflush(stderr);
}

void log_all(const std::string& line) {
  std::fprintf(stderr, "[rank %d] %s\n", g_rank, line.c_str());
  std::fflush(stderr);
}

}  // namespace cnnscale
