// nccl_communicator.cpp — see nccl_communicator.hpp.
#include "comm/cuda/nccl_communicator.hpp"

#include "comm/cuda/nccl_check.hpp"
#include "comm/cuda/nccl_id.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale {
namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::f32 ? ncclFloat32 : ncclBfloat16; }

class NcclPendingReduce final : public PendingReduce {
 public:
  explicit NcclPendingReduce(cudaStream_t s) {
    cudaCheck(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventRecord(ev_, s));
  }
  ~NcclPendingReduce() override {
    wait();
    cudaEventDestroy(ev_);
  }
  void wait() override {
    if (done_) return;
    cudaCheck(cudaEventSynchronize(ev_));
    done_ = true;
  }

 private:
  cudaEvent_t ev_ = nullptr;
  bool done_ = false;
};

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm parent, int device) : device_(device) {
  MPI_Comm_rank(parent, &rank_);
  MPI_Comm_size(parent, &size_);
  ncclUniqueId id = broadcast_nccl_unique_id(parent);
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  ncclResult_t rc = ncclCommInitRank(&comm_, size_, id, rank_);
  if (rc != ncclSuccess) {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    ncclCheck(rc);
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::allreduce_sum(void* buf, size_t count, DType t) {
  ncclCheck(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, comm_, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
}

std::unique_ptr<PendingReduce> NcclCommunicator::allreduce_sum_async(void* buf, size_t count, DType t) {
  ncclCheck(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, comm_, stream_));
  return std::make_unique<NcclPendingReduce>(stream_);
}

void NcclCommunicator::broadcast(void* buf, size_t bytes, int root) {
  ncclCheck(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_));
  cudaCheck(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::barrier() {
  // A one-element allreduce on the stream orders all earlier work on every rank.
  float* d = nullptr;
  cudaCheck(cudaMalloc(&d, sizeof(float)));
  cudaCheck(cudaMemsetAsync(d, 0, sizeof(float), stream_));
  allreduce_sum(d, 1, DType::f32);
  cudaCheck(cudaFree(d));
}

void NcclCommunicator::synchronize() { cudaCheck(cudaStreamSynchronize(stream_)); }

}  // namespace cnnscale
