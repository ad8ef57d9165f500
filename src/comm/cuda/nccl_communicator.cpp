// nccl_communicator.cpp — see nccl_communicator.hpp.
#include "comm/cuda/nccl_communicator.hpp"

#include <chrono>
#include <exception>
#include <thread>

#include "comm/cuda/nccl_check.hpp"
#include "comm/cuda/nccl_id.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale {
namespace {

ncclDataType_t nccl_type(DType t) { return t == DType::f32 ? ncclFloat32 : ncclBfloat16; }

class NcclPendingReduce final : public PendingReduce {
 public:
  explicit NcclPendingReduce(NcclCommunicator* owner) : owner_(owner), ev_(owner->acquire_event()) {
    const cudaError_t rc = cudaEventRecord(ev_, static_cast<cudaStream_t>(owner_->stream()));
    if (rc != cudaSuccess) {
      owner_->release_event(ev_);  // never recorded: reusable
      cudaCheck(rc);
    }
  }
  ~NcclPendingReduce() override {
    // Unwinding from an error on this rank alone: the sum may wait for ranks that never
    // start it; abort NCCL instead of waiting (Communicator::abort).
    if (!done_ && std::uncaught_exceptions() > 0) owner_->abort();
    if (!owner_->aborted()) wait();
    // A completed event goes back to the pool; one that may still be pending (aborted,
    // or wait() threw) is destroyed as before (returns at once; released when it completes).
    if (done_) owner_->release_event(ev_);
    else cudaEventDestroy(ev_);
  }
  void wait() override {
    if (done_) return;
    owner_->wait_event(ev_, "the NCCL allreduce");
    done_ = true;
  }

 private:
  NcclCommunicator* owner_;
  cudaEvent_t ev_ = nullptr;
  bool done_ = false;
};

}  // namespace

namespace {
int rank_in(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 1;
  MPI_Comm_size(c, &n);
  return n;
}
}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm parent, int device)
    : NcclCommunicator(rank_in(parent), size_of(parent), broadcast_nccl_unique_id(parent), device) {}

NcclCommunicator::NcclCommunicator(int rank, int size, const ncclUniqueId& id, int device)
    : rank_(rank), size_(size), device_(device) {
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  cudaCheck(cudaEventCreateWithFlags(&sync_event_, cudaEventDisableTiming));
  ncclResult_t rc = ncclCommInitRank(&comm_, size_, id, rank_);
  if (rc != ncclSuccess) {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    ncclCheck(rc);
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (std::uncaught_exceptions() > 0) abort();  // an error on this rank: no collective teardown
  if (comm_ && !aborted_) {
    wait_stream("the NCCL communicator's teardown");
    ncclCommDestroy(comm_);
  }
  if (sync_event_) cudaEventDestroy(sync_event_);
  for (cudaEvent_t ev : free_events_) cudaEventDestroy(ev);
  if (stream_) cudaStreamDestroy(stream_);  // returns at once
}

void NcclCommunicator::abort() {
  if (aborted_) return;
  aborted_ = true;
  if (comm_) ncclCommAbort(comm_);  // stops this rank's NCCL kernels; waits for no peer
  comm_ = nullptr;
}

void NcclCommunicator::wait_event(cudaEvent_t ev, const char* what) {
  if (aborted_) internal_error("waited for ", what, " after the NCCL communicator was aborted");
  // Spin on yield for the first ~1k polls (a sum that is nearly done costs no sleep),
  // then sleep 50 us between polls so a long wait leaves the core to the data loader.
  for (int64_t polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cudaCheck(q);
    if (comm_) ncclCheckAsync(comm_, what);
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

cudaEvent_t NcclCommunicator::acquire_event() {
  if (!free_events_.empty()) {
    cudaEvent_t ev = free_events_.back();
    free_events_.pop_back();
    return ev;
  }
  cudaEvent_t ev = nullptr;
  cudaCheck(cudaSetDevice(device_));
  cudaCheck(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  return ev;
}

void NcclCommunicator::release_event(cudaEvent_t ev) { free_events_.push_back(ev); }

void NcclCommunicator::wait_stream(const char* what) {
  cudaCheck(cudaEventRecord(sync_event_, stream_));
  wait_event(sync_event_, what);
}

void NcclCommunicator::allreduce_sum(void* buf, size_t count, DType t) {
  ncclCheck(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, comm_, stream_));
  wait_stream("the NCCL allreduce");
}

std::unique_ptr<PendingReduce> NcclCommunicator::allreduce_sum_async(void* buf, size_t count, DType t) {
  ncclCheck(ncclAllReduce(buf, buf, count, nccl_type(t), ncclSum, comm_, stream_));
  return std::make_unique<NcclPendingReduce>(this);
}

void NcclCommunicator::broadcast(void* buf, size_t bytes, int root) {
  ncclCheck(ncclBroadcast(buf, buf, bytes, ncclUint8, root, comm_, stream_));
  wait_stream("the NCCL broadcast");
}

void NcclCommunicator::broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges,
                                        int root) {
  float* p = static_cast<float*>(base);
  ncclCheck(ncclGroupStart());
  ncclResult_t rc = ncclSuccess;
  for (const auto& [b, e] : float_ranges) {
    if (e == b) continue;
    rc = ncclBroadcast(p + b, p + b, e - b, ncclFloat32, root, comm_, stream_);
    if (rc != ncclSuccess) break;
  }
  const ncclResult_t end = ncclGroupEnd();  // closes the group even after a failed call
  ncclCheck(rc);
  ncclCheck(end);
}

void NcclCommunicator::barrier() {
  // A one-element allreduce on the stream orders all earlier work on every rank.
  float* d = nullptr;
  cudaCheck(cudaMalloc(&d, sizeof(float)));
  cudaCheck(cudaMemsetAsync(d, 0, sizeof(float), stream_));
  allreduce_sum(d, 1, DType::f32);
  cudaCheck(cudaFree(d));
}

void NcclCommunicator::synchronize() { wait_stream("the NCCL stream"); }

void NcclCommunicator::check_async_error(const char* what) {
  if (comm_ && !aborted_) ncclCheckAsync(comm_, what);
}

}  // namespace cnnscale
