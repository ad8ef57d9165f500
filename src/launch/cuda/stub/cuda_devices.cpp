// cuda_devices.cpp (stub) — a build without CUDA sees no CUDA device.
#include "launch/cuda_devices.hpp"

namespace cnnscale {

int cuda_device_count() { return 0; }
std::string cuda_device_product(int /*device*/) { return ""; }

}  // namespace cnnscale
