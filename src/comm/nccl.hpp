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

namespace cnnscale {

// NcclCommunicator over `parent` on CUDA device `device` (collective over parent).
// Throws UserError in a build without CUDA.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm parent, int device);

// "2.28.x" from ncclGetVersion; "" in a build without CUDA.
std::string nccl_version();

// Device memory for the buffers of a device communicator (device_buffers()), e.g. the
// allreduce benchmark's: cudaMalloc / cudaFree / cudaMemcpy, checked. Without CUDA
// there is no device communicator, and these throw UserError (free does nothing).
void* device_alloc(size_t bytes);
void device_free(void* p);
void copy_to_device(void* device_dst, const void* host_src, size_t bytes);
void copy_to_host(void* host_dst, const void* device_src, size_t bytes);

}  // namespace cnnscale
