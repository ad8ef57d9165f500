// cmd_prep.cpp — `cnnscale prep` (not built yet: see the open issue for it).
#include "cli/commands.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_prep(int, char**) { fail("`cnnscale prep` is not available in this build yet"); }

}  // namespace cnnscale::cli
