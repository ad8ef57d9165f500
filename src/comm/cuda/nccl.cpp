// nccl.cpp — see comm/nccl.hpp: the CUDA build.
#include "comm/nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "comm/cuda/nccl_check.hpp"
#include "comm/cuda/nccl_communicator.hpp"
#include "util/cuda/check.hpp"
#include "util/error.hpp"

namespace cnnscale {

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int device) {
  return std::make_unique<NcclCommunicator>(parent, device);
}

std::unique_ptr<Communicator> make_nccl_communicator(RendezvousStore& store, int rank, int size, int device,
                                                     double timeout_s) {
  const std::string bytes = nccl_unique_id_via_store(store, rank, timeout_s);
  ncclUniqueId id{};
  std::memcpy(&id, bytes.data(), sizeof(id));
  return std::make_unique<NcclCommunicator>(rank, size, id, device);
}

std::string nccl_unique_id_via_store(RendezvousStore& store, int rank, double timeout_s) {
  static int round = 0;  // every rank builds the same communicators in the same order
  const std::string key = "cnnscale/nccl_id/" + std::to_string(round++);
  if (rank == 0) {
    ncclUniqueId id{};
    ncclCheck(ncclGetUniqueId(&id));
    const std::string bytes(reinterpret_cast<const char*>(&id), sizeof(id));
    store.set(key, bytes);
    return bytes;
  }
  const std::string bytes = store.get(key, std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)));
  if (bytes.size() != sizeof(ncclUniqueId))
    fail("the ncclUniqueId in the rendezvous store at ", store.where(), " has ", bytes.size(), " bytes, not ",
         sizeof(ncclUniqueId), ": rank 0 runs another cnnscale build (another NCCL); use the same build on every rank");
  return bytes;
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
  // From pageable memory cudaMemcpy may return once the bytes are staged, before the
  // DMA lands; the communicator's non-blocking stream is not ordered after it.
  cudaCheck(cudaDeviceSynchronize());
}

void copy_to_host(void* host_dst, const void* device_src, size_t bytes) {
  cudaCheck(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace cnnscale
