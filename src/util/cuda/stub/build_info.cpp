// build_info.cpp (stub) — see util/build_info.hpp: a build without CUDA.
#include "util/build_info.hpp"

namespace cnnscale {

bool built_with_cuda() { return false; }
const char* build_features() { return "CPU only"; }

}  // namespace cnnscale
