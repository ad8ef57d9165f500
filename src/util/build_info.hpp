// build_info.hpp — what this binary was built with, asked of the build rather than of
// the preprocessor: util/cuda/build_info.cpp in a CUDA build, util/cuda/stub/ otherwise.
#pragma once

namespace cnnscale {

// Whether the CUDA/cuDNN/cuBLAS/NCCL path is built in.
bool built_with_cuda();

// The feature list `cnnscale --version` prints: "CPU + CUDA/cuDNN/NCCL" or "CPU only".
const char* build_features();

}  // namespace cnnscale
