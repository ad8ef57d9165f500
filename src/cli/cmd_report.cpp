// cmd_report.cpp — `cnnscale report` (not built yet: see the open issue for it).
#include "cli/commands.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_report(int, char**) { fail("`cnnscale report` is not available in this build yet"); }

}  // namespace cnnscale::cli
