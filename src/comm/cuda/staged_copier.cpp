// staged_copier.cpp — the CUDA side of the staged host data plane (staged_communicator.hpp):
// a non-blocking copy stream of its own on the rank's device, page-locked host memory
// (cudaMallocHost), marks that are events polled from the host (yielding, then sleeping
// 50 us between polls, as NcclCommunicator's waits: never blocking inside CUDA, so a wait
// stays interruptible by the watchdog). NOT YET RUN ON A GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "comm/staged_communicator.hpp"
#include "util/cuda/check.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

void poll(cudaEvent_t ev) {
  for (int64_t polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cudaCheck(q);
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class CudaCopier final : public DeviceCopier {
 public:
  CudaCopier(int device, int sharing) : device_(device) {
    int mode = cudaComputeModeDefault;
    cudaCheck(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device_));
    if (sharing > 1 && (mode == cudaComputeModeExclusiveProcess || mode == cudaComputeModeProhibited))
      fail("GPU ", device_, " is in ", mode == cudaComputeModeProhibited ? "prohibited" : "exclusive-process",
           " compute mode, so the ", sharing,
           " ranks given it cannot share it: run one rank per GPU, ask for the default compute mode or MPS (Slurm: "
           "--gpu-mode or the site's MPS option; nvidia-smi -c DEFAULT as root), or start fewer ranks");
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaCopier() override {  // no checks: a destructor must not abort the job
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  void* stream() const override { return stream_; }
  void* alloc_host(size_t bytes) override {
    void* p = nullptr;
    cudaCheck(cudaMallocHost(&p, bytes));
    return p;
  }
  void free_host(void* p) override { cudaFreeHost(p); }
  void to_host(void* host, const void* device, size_t bytes) override {
    cudaCheck(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  }
  void to_device(void* device, const void* host, size_t bytes) override {
    cudaCheck(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  }
  std::unique_ptr<Mark> mark() override {
    class Event final : public Mark {
     public:
      explicit Event(cudaStream_t s) {
        cudaCheck(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming));
        cudaCheck(cudaEventRecord(ev_, s));
      }
      ~Event() override { cudaEventDestroy(ev_); }
      void wait() override { poll(ev_); }

     private:
      cudaEvent_t ev_ = nullptr;
    };
    cudaCheck(cudaSetDevice(device_));
    return std::make_unique<Event>(stream_);
  }
  void synchronize() override { mark()->wait(); }
  void quiesce() noexcept override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceCopier> make_cuda_copier(int device, int sharing) {
  return std::make_unique<CudaCopier>(device, sharing);
}

}  // namespace cnnscale
