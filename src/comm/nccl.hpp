// nccl.hpp — the NCCL communicator for code that includes no CUDA header
// (make_communicator, cnnscale env, the allreduce benchmark). The implementation and the
// CUDA-typed interface live in comm/cuda/ (nccl_communicator.hpp, nccl_id.hpp); in a
// build without CUDA, comm/cuda/stub/ says so.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "launch/rendezvous_store.hpp"

namespace cnnscale {

// NcclCommunicator over `parent` on CUDA device `device` (collective over parent).
// Throws UserError in a build without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int device);

// NcclCommunicator of `size` ranks that met at a rendezvous store (torchrun-style
// launch, TF_CONFIG; no MPI world): rank 0's ncclUniqueId reaches every rank through the
// store (nccl_unique_id_via_store), then ncclCommInitRank on `device`. Collective over
// the ranks of the store. Throws UserError in a build without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(RendezvousStore& store, int rank, int size, int device,
                                                     double timeout_s);

// The bytes of rank 0's ncclUniqueId (ncclGetUniqueId, which needs no GPU), published by
// rank 0 under cnnscale/nccl_id/<n> in the store and read by every other rank (n counts
// the communicators this process built so, the same on every rank). UserError when
// rank 0's id does not appear within timeout_s, or in a build without CUDA.
std::string nccl_unique_id_via_store(RendezvousStore& store, int rank, double timeout_s);

// "2.28.x" from ncclGetVersion; "" in a build without CUDA.
std::string nccl_version();

// Device memory for the buffers of a device communicator (device_buffers()), e.g. the
// allreduce benchmark's: cudaMalloc / cudaFree / cudaMemcpy, checked. copy_to_device
// returns with the bytes in device memory (any stream may read them); copy_to_host
// is not ordered after the communicator's stream: call its synchronize() first.
// Without CUDA there is no device communicator, and these throw UserError (free does
// nothing).
void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);

}  // namespace cnnscale
