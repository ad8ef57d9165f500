// log.hpp — rank-aware progress output.
// log_info prints on rank 0 only (after set_log_rank), to stdout, line-buffered;
// log_warn prints "cnnscale: warning: ..." on rank 0 to stderr; log_all prints on
// every rank prefixed with "[rank N]".
#pragma once
#include <string>

namespace cnnscale {

void set_log_rank(int rank);
int log_rank();
void log_info(const std::string& line);
void log_warn(const std::string& line);
void log_all(const std::string& line);

}  // namespace cnnscale
