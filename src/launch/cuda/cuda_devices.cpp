// cuda_devices.cpp — see launch/cuda_devices.hpp.
#include "launch/cuda_devices.hpp"

#include <cuda_runtime.h>

#include <cstdio>

namespace cnnscale {
namespace {

std::string format_uuid(const cudaUUID_t& u) {
  bool zero = true;
  for (char c : u.bytes) zero = zero && c == 0;
  if (zero) return "";
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[48];
  std::snprintf(s, sizeof(s), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return s;
}

CudaProbe run_probe() {
  CudaProbe p;
  p.built = true;
  (void)cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    p.error_name = cudaGetErrorName(e);
    p.error = cudaGetErrorString(e);
    (void)cudaGetLastError();  // clear it: later CUDA calls must not report this one
    return p;
  }
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    CudaDevice dev;
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
      dev.name = prop.name;
      dev.uuid = format_uuid(prop.uuid);
      char bus[32];
      std::snprintf(bus, sizeof(bus), "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                    static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
      dev.pci_bus_id = bus;
    } else {
      (void)cudaGetLastError();
      dev.pci_bus_id = "ordinal-" + std::to_string(d) + "-unknown";
    }
    p.devices.push_back(dev);
  }
  return p;
}

}  // namespace

const CudaProbe& probe_cuda() {
  static const CudaProbe probe = run_probe();
  return probe;
}

}  // namespace cnnscale
