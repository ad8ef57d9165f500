// nccl.cpp — see comm/nccl.hpp: the CUDA build.
#include "comm/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#include "comm/cuda/nccl_communicator.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int device) {
  return std::make_unique<NcclCommunicator>(parent, device);
}

std::string nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  return buf;
}

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  cudaCheck(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

void device_free(void* p) {
  if (p) cudaFree(p);
}

void copy_to_device(void* device_dst, const void* host_src, size_t bytes) {
  cudaCheck(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  cudaCheck(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace cnnscale
