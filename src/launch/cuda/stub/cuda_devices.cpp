// cuda_devices.cpp (stub) — a build without CUDA sees no CUDA device (built = false).
#include "launch/cuda_devices.hpp"

namespace cnnscale {

const CudaProbe& probe_cuda() {
  static const CudaProbe probe{};
  return probe;
}

}  // namespace cnnscale
