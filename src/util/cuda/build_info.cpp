// build_info.cpp — see util/build_info.hpp: the CUDA build.
#include "util/build_info.hpp"

namespace cnnscale {

bool built_with_cuda() { return true; }
const char* build_features() { return "CPU + CUDA/cuDNN/NCCL"; }

}  // namespace cnnscale
