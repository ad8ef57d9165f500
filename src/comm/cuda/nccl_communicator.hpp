// nccl_communicator.hpp — Communicator over NCCL on device buffers, with its own
// CUDA stream. Set-up: broadcast_nccl_unique_id, then ncclCommInitRank on the
// rank's bound device. On a failure the communicator is aborted (ncclCommAbort)
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
  NcclCommunicator(MPI_Comm parent, int device);
  ~NcclCommunicator() override;
  Backend backend() const override { return Backend::nccl; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool device_buffers() const override { return true; }
  void allreduce_sum(void* buf, size_t count, DType t) override;
  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  void synchronize() override;
  void check_async_error(const char* what) override;  // ncclCheckAsync; no-op once aborted
  void abort() override;
  void* stream() const override { return stream_; }  // the cudaStream_t

  bool aborted() const { return aborted_; }
  // Polls ev and NCCL's asynchronous error until ev completes (see above); `what` names
  // the wait in the error message.
  void wait_event(cudaEvent_t ev, const char* what);
  // Events for the pending sums, reused (no cudaEventCreate per bucket per step): take
  // one, give it back once it has completed (or was never recorded).
  cudaEvent_t take_event();
  void give_event(cudaEvent_t ev);

 private:
  void wait_stream(const char* what);  // all work queued on stream_ so far
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t sync_event_ = nullptr;  // reused by wait_stream
  std::vector<cudaEvent_t> free_events_;  // take_event / give_event
  int rank_ = 0, size_ = 1, device_ = 0;
  bool aborted_ = false;
};

}  // namespace cnnscale
