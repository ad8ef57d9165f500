// cuda_devices.hpp — what CUDA says about this process's devices, for device binding,
// from code that includes no CUDA header (launch/cuda/; launch/cuda/stub/ without CUDA:
// no devices).
#pragma once
#include <string>

namespace cnnscale {

// Devices CUDA enumerates (cudaGetDeviceCount); any failure (no driver, "driver version
// is insufficient") counts as none. 0 in a build without CUDA.
int cuda_device_count();

// The product name of device ordinal d (cudaGetDeviceProperties), "" when unknown.
std::string cuda_device_product(int device);

}  // namespace cnnscale
