// cmd_train.cpp — `cnnscale train` (not built yet: see the open issue for it).
#include "cli/commands.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_train(int, char**) { fail("`cnnscale train` is not available in this build yet"); }

}  // namespace cnnscale::cli
