// event_wait.hpp — the host's wait for a CUDA event, polled and never inside CUDA: a queue
// may wait on the device for another queue's work (NCCL's sums, the staged copies) whose
// failure no CUDA call reports, so the caller's check runs between polls. Yields for the
// first ~1k polls (an event that is nearly there costs no sleep), then sleeps 50 us
// between polls, leaving the core to the data loader. Used by the GPU model's loss wait,
// its --sync-bn copies and the staged host plane's copies. CUDA build only.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include "util/cuda/check.hpp"

namespace cnnscale {

// Returns once ev has completed; between polls calls between() (may throw or end the job).
template <class Between>
void wait_event_polling(cudaEvent_t ev, Between&& between) {
  for (int64_t polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(ev);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cudaCheck(q);
    between();
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

inline void wait_event_polling(cudaEvent_t ev) {
  wait_event_polling(ev, [] {});
}

}  // namespace cnnscale
