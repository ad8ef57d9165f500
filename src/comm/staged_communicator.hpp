// staged_communicator.hpp — GPU ranks over a host data plane (issue 38): a Communicator
// with device buffers whose sums and broadcasts go through a host communicator (MPI, Gloo)
// by way of pinned host copies, as PyTorch's gloo backend does for CUDA tensors and
// Horovod with host staging. Two or more ranks may then share one GPU (each its own CUDA
// context and copy stream), which NCCL refuses.
//
// Contract (what the Trainer relies on, as with NCCL):
// - device_buffers() is true: every buffer is device memory; stream() is the copy queue.
//   The caller orders the writers of a buffer before stream() (Model::order_before) and
//   its readers after it (Model::wait_for(stream())) once the call (or a sum's wait())
//   has returned: every copy back to the device is enqueued by then.
// - allreduce_sum_async enqueues the buffer's copy to pinned host memory and returns; the
//   host sum runs in wait() (all MPI/Gloo calls stay on the calling thread), then the copy
//   back is enqueued. So sums are not completed on the device queue (sums_on_stream() is
//   false): the gradient buckets are waited for by the host at the round's end, while the
//   device goes on with backward, and a later bucket's copy overlaps an earlier bucket's
//   host sum.
// - allreduce_sum, broadcast and broadcast_ranges return with the result on the device
//   queue (enqueued). A staging buffer is written by the host only after the queue has
//   passed every copy out of it (a mark waited for first), and by the queue only after its
//   earlier copies, in queue order. Staging: one pinned buffer per gradient bucket (the
//   same every step), one for the buffer broadcasts, a transient one per broadcast()
//   (freed once its copy back is done: the parameter broadcast happens once).
// - The device side is a DeviceCopier: CUDA in a CUDA build (comm/cuda/staged_copier.cpp,
//   polling events, never blocking inside CUDA), or plain memcpy (make_host_copier), with
//   which the whole staging logic is tested on machines without a GPU
//   (tests/comm/test_staged_mpi.cpp).
// NOT YET RUN ON A GPU (docs/gpu.md); opt-in through `--device cuda --backend mpi|gloo`.
#pragma once
#include <cstddef>
#include <memory>

#include "comm/communicator.hpp"

namespace cnnscale {

// The device side of the staging, on one queue, in order.
class DeviceCopier {
 public:
  virtual ~DeviceCopier() = default;
  virtual void* stream() const = 0;  // the queue (a cudaStream_t), never nullptr
  // bytes of page-locked host memory (freed by free_host), for asynchronous copies.
  virtual void* alloc_host(size_t bytes) = 0;
  virtual void free_host(void* p) = 0;
  virtual void to_host(void* host, const void* device, size_t bytes) = 0;  // enqueued
  virtual void to_device(void* device, const void* host, size_t bytes) = 0;  // enqueued
  // A mark after everything enqueued so far; wait() blocks until the queue has passed it.
  class Mark {
   public:
    virtual ~Mark() = default;
    virtual void wait() = 0;
  };
  virtual std::unique_ptr<Mark> mark() = 0;
  virtual void synchronize() = 0;  // the queue is idle
  // The same without error checks, for destructors (a destructor must not end the job).
  virtual void quiesce() noexcept = 0;
};

// host: the transport (MPI, Gloo); copier: the device side. Throws std::logic_error
// when host has device buffers itself.
std::unique_ptr<Communicator> make_staged_communicator(std::unique_ptr<Communicator> host,
                                                       std::unique_ptr<DeviceCopier> copier);

// CUDA device `device`: a non-blocking copy stream of its own, cudaMallocHost, events
// polled (comm/cuda/staged_copier.cpp). sharing: the local ranks on that GPU; more than
// one on a GPU in exclusive-process compute mode is a UserError naming the fix. A build
// without CUDA: UserError.
std::unique_ptr<DeviceCopier> make_cuda_copier(int device, int sharing = 1);

// "Device" memory that is host memory, copies that are memcpy (tests without a GPU):
// done at once, or, deferred, only when a mark is waited for or the queue synchronised (a
// copy's effect then shows only where the contract says it may be relied on).
std::unique_ptr<DeviceCopier> make_host_copier(bool deferred = false);

}  // namespace cnnscale
