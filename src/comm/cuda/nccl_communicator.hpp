// nccl_communicator.hpp — Communicator over NCCL on device buffers, with its own
// CUDA stream. Set-up: broadcast_nccl_unique_id, then ncclCommInitRank on the
// rank's bound device. On a failure the communicator is aborted (ncclCommAbort)
// and the job ends with the library's error string, never a hang. CUDA build only;
// other code builds it through comm/nccl.hpp (make_nccl_communicator).
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

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
  void* stream() const override { return stream_; }  // the cudaStream_t

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
};

}  // namespace cnnscale
