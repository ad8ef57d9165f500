// staged_copier.cpp — the CUDA side of the staged host data plane (staged_communicator.hpp):
// a non-blocking copy stream of its own on the rank's device, page-locked host memory
// (cudaMallocHost), marks that are events polled from the host (util/cuda/event_wait.hpp:
// never blocking inside CUDA, so a wait stays interruptible by the watchdog), taken from a
// pool of the copier's (a mark per bucket per step creates no event). NOT YET RUN ON A GPU.
#include <cuda_runtime.h>

#include <vector>

#include "comm/staged_communicator.hpp"
#include "util/cuda/check.hpp"
#include "util/cuda/event_wait.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

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
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
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
  // An event recorded on the stream now; it goes back to the pool with the mark (marks
  // never outlive the copier: the communicator owns both and waits its sums first).
  std::unique_ptr<Mark> mark() override {
    class Event final : public Mark {
     public:
      Event(CudaCopier& c, cudaEvent_t ev) : c_(c), ev_(ev) {}
      ~Event() override { c_.free_.push_back(ev_); }
      void wait() override { wait_event_polling(ev_); }

     private:
      CudaCopier& c_;
      cudaEvent_t ev_;
    };
    cudaCheck(cudaSetDevice(device_));
    cudaEvent_t ev = nullptr;
    if (free_.empty()) {
      cudaCheck(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    } else {
      ev = free_.back();
      free_.pop_back();
    }
    cudaCheck(cudaEventRecord(ev, stream_));
    return std::make_unique<Event>(*this, ev);
  }
  void synchronize() override { mark()->wait(); }
  void quiesce() noexcept override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> free_;  // events no mark holds
};

}  // namespace

std::unique_ptr<DeviceCopier> make_cuda_copier(int device, int sharing) {
  return std::make_unique<CudaCopier>(device, sharing);
}

}  // namespace cnnscale
