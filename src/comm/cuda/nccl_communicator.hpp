// nccl_communicator.hpp — Communicator over NCCL on device buffers, with its own
// CUDA stream. Set-up: rank 0's ncclUniqueId to every rank (over MPI,
// broadcast_nccl_unique_id, or through the rendezvous store), then ncclCommInitRank on
// the rank's bound device. On a failure the communicator is aborted (ncclCommAbort)
// and the job ends with the library's error string, never a hang.
//
// Waits never block inside CUDA: every wait for NCCL's work (a blocking sum or
// broadcast, PendingReduce::wait, synchronize, the teardown) records an event and
// polls it (cudaEventQuery) together with NCCL's asynchronous error
// (ncclCommGetAsyncError, nccl_check.hpp ncclCheckAsync), yielding the core between
// polls; an asynchronous error aborts the communicator and ends the job with NCCL's
// message. The callers put these waits under the watchdog (the Trainer's
// ControlComm::waiting scopes), which ends the job when a peer never arrives.
// abort() (an error on this rank, Communicator::abort) is ncclCommAbort: afterwards
// no pending sum waits and the destructor neither synchronizes nor destroys
// collectively; a destructor that runs while an exception unwinds aborts first.
// CUDA build only; other code builds it through comm/nccl.hpp (make_nccl_communicator).
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <vector>

#include "comm/communicator.hpp"

namespace cnnscale {

class NcclCommunicator final : public Communicator {
 public:
  // Over `parent`: rank 0's id reaches the others by MPI_Bcast (broadcast_nccl_unique_id).
  NcclCommunicator(MPI_Comm parent, int device);
  // Without MPI (ranks that met at a rendezvous store): every rank passes rank 0's id,
  // already exchanged (comm/nccl.hpp nccl_unique_id_via_store). Collective.
  NcclCommunicator(int rank, int size, const ncclUniqueId& id, int device);
  ~NcclCommunicator() override;
  Backend backend() const override { return Backend::nccl; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool device_buffers() const override { return true; }
  void allreduce_sum(void* buf, size_t count, DType t) override;
  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  // One grouped call (ncclGroupStart/End), enqueued on stream_ only: no host wait (see
  // Communicator::broadcast_ranges).
  void broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges, int root) override;
  void barrier() override;
  void synchronize() override;
  void check_async_error(const char* what) override;  // ncclCheckAsync; no-op once aborted
  void abort() override;
  void* stream() const override { return stream_; }  // the cudaStream_t

  bool aborted() const { return aborted_; }
  // Polls ev and NCCL's asynchronous error until ev completes (see above); `what` names
  // the wait in the error message.
  void wait_event(cudaEvent_t ev, const char* what);
  // The pending sums' completion events, created once and reused (a bucketed step starts
  // one sum per bucket: creating and destroying an event each time costs driver calls on
  // the critical path). acquire_event hands out a free event (creating one when none is
  // free); release_event takes back one that is complete or was never recorded. An event
  // that may still be pending (the communicator was aborted, or its wait threw) is
  // destroyed by its owner instead, never returned. The pool lives as long as the
  // communicator, which outlives its pending sums (they point at it).
  cudaEvent_t acquire_event();
  void release_event(cudaEvent_t ev);

 private:
  void wait_stream(const char* what);  // all work queued on stream_ so far
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t sync_event_ = nullptr;  // reused by wait_stream
  std::vector<cudaEvent_t> free_events_;  // acquire_event / release_event
  int rank_ = 0, size_ = 1, device_ = 0;
  bool aborted_ = false;
};

}  // namespace cnnscale
