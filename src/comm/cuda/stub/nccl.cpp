// nccl.cpp (stub) — see comm/nccl.hpp: a build without CUDA has no NCCL and no device
// buffers.
#include "comm/nccl.hpp"

#include "util/error.hpp"

namespace cnnscale {
namespace {

[[noreturn]] void no_cuda(const char* what) {
  fail(what, ": this cnnscale was built without CUDA/NCCL (-DCNNSCALE_CUDA=OFF or no toolkit found); use "
             "--backend mpi or rebuild with the CUDA toolkit");
}

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm /*parent*/, int /*device*/) { no_cuda("NCCL"); }
std::unique_ptr<Communicator> make_nccl_communicator(RendezvousStore& /*store*/, int /*rank*/, int /*size*/,
                                                     int /*device*/, double /*timeout_s*/) {
  no_cuda("NCCL");
}
std::string nccl_unique_id_via_store(RendezvousStore& /*store*/, int /*rank*/, double /*timeout_s*/) { no_cuda("NCCL"); }
std::string nccl_version() { return ""; }
void* device_alloc(size_t /*bytes*/) { no_cuda("device memory"); }
void device_free(void* /*p*/) {}
void copy_to_device(void* /*device_dst*/, const void* /*host_src*/, size_t /*bytes*/) { no_cuda("device memory"); }
void copy_to_host(void* /*host_dst*/, const void* /*device_src*/, size_t /*bytes*/) { no_cuda("device memory"); }

}  // namespace cnnscale
