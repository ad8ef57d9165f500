// cuda_devices.hpp — what CUDA says about this process's devices, for device binding and
// for saying why there is no GPU, from code that includes no CUDA header (launch/cuda/;
// launch/cuda/stub/ without CUDA: built = false, no devices).
#pragma once
#include <string>
#include <vector>

namespace cnnscale {

struct CudaDevice {
  std::string name;        // cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3"
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (cudaDeviceProp::uuid), "" if all zero
  std::string pci_bus_id;  // "0000:17:00.0" (pciDomainID:pciBusID:pciDeviceID.0)
  // What identifies the physical device across processes: the UUID, else "pci:<bus id>".
  // Two processes with different CUDA_VISIBLE_DEVICES see the same GPU under the same id.
  std::string id() const { return uuid.empty() ? "pci:" + pci_bus_id : uuid; }
};

// One look at CUDA (device enumeration never throws: a failure is recorded here).
struct CudaProbe {
  bool built = false;               // false: this cnnscale has no CUDA (the stub)
  int runtime_version = 0;          // cudaRuntimeGetVersion, e.g. 13000 = CUDA 13.0
  int driver_version = 0;           // cudaDriverGetVersion: newest CUDA the installed driver supports; 0 = no driver
  std::string error_name;           // cudaGetErrorName of cudaGetDeviceCount's failure; "" when it succeeded
  std::string error;                // cudaGetErrorString of it, e.g. "CUDA driver version is insufficient for
                                    // CUDA runtime version"
  std::vector<CudaDevice> devices;  // by visible ordinal; empty on failure
};

// Probes once per process (later calls return the first result).
const CudaProbe& probe_cuda();

// Devices CUDA enumerates (probe_cuda().devices.size()); 0 on any failure or without CUDA.
int cuda_device_count();

// The product name of device ordinal d, "" when unknown.
std::string cuda_device_product(int device);

}  // namespace cnnscale
