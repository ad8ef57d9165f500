// cuda_devices.cpp — see launch/cuda_devices.hpp.
#include "launch/cuda_devices.hpp"

#include <cuda_runtime.h>

namespace cnnscale {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess) return n;
  (void)cudaGetLastError();  // e.g. "driver version is insufficient": no GPU
  return 0;
}

std::string cuda_device_product(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) return prop.name;
  return "";
}

}  // namespace cnnscale
