// step_graph.hpp — the GPU model's training step (forward, loss, backward) replayed as a
// CUDA graph (issue 37 item 3; CNNSCALE_GPU_GRAPH=1; NOT YET RUN ON A GPU, so not the
// default: docs/gpu.md).
//
// Why: every layer is one or more cuDNN/cuBLAS calls and kernels, ~1,000 launches per
// ResNet-50 step, each costing the host microseconds; a graph is one launch. It matters
// where the device step is short (small models, large GPUs), little where the device
// step is long (ResNet-50 at batch 128: ~30 ms of device time, the host ahead).
//
// Contract (CudaNet::forward_backward is the only user):
// - run(key, stream, enqueue): enqueue puts the step's device work on `stream` (no host
//   waits, no allocation, no other stream). The first time a key is seen it runs as is
//   (cuDNN and cuBLAS load their kernels, lazy allocations happen); the second time it is
//   captured (cudaStreamCaptureModeThreadLocal) into a graph, which is launched; after
//   that the graph is launched without calling enqueue. Same device work, same order, so
//   the same bits as without a graph (tested: test_cuda_model_gpu CudaGraph.*).
// - The key holds everything the captured work bakes in that may change between steps:
//   the batch size, the input slot (its device addresses), the loss scale, the plans'
//   generation (CudaNet bumps it whenever it replans: precision, tuning). Device
//   addresses: a graph is replayed only while DeviceBytes::epoch (every DevArray
//   allocation and free) is what it was at capture; otherwise every graph is dropped
//   and every key starts over (as is once, then captured). At most kMaxGraphs graphs
//   (least recently used dropped; its key is captured again when next seen).
//   The epoch is process-wide: another model's allocations drop this one's graphs too, and
//   one made on another thread during a capture fails it (graphs then stay off). The
//   trainer has one model, on one thread; tests that run models on threads do not use graphs.
// - A capture that fails (a call CUDA cannot capture: util/cuda/check.hpp CaptureScope
//   turns the failed check into CaptureFailed; the capture ending invalid; an allocation
//   during the capture; instantiation refused) ends the capture, runs the step as is and
//   never tries again in this model: note() says why, once, on stderr too.
// - The caller keeps what the graph cannot hold outside it: the input copies (before),
//   host waits and the grad-ready calls (after the launch: every bucket is then ready at
//   once, so a graph is only offered for one rank: StepContext::step_graph).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cnnscale::nn::cuda {

class StepGraphs {
 public:
  struct Key {
    int64_t n = 0;
    int slot = 0;
    uint32_t loss_scale_bits = 0;
    uint64_t plans = 0;
    bool operator==(const Key& o) const {
      return n == o.n && slot == o.slot && loss_scale_bits == o.loss_scale_bits && plans == o.plans;
    }
  };
  static constexpr size_t kMaxGraphs = 8;

  explicit StepGraphs(bool requested) : requested_(requested) {}
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;
  ~StepGraphs() { clear(); }

  bool requested() const { return requested_; }
  // True when the step ran as a graph (captured now or replayed).
  bool run(const Key& key, cudaStream_t stream, const std::function<void()>& enqueue);
  // A requested graph not offered for this step (dropout, --sync-bn, more ranks, the
  // profiler): the first reason is kept for note().
  void decline(const std::string& why);
  void clear();  // drops every graph (and what was seen)

  int64_t replays() const { return replays_; }  // steps run as a graph
  int captures() const { return captures_; }
  // Empty when not requested; else what happened: graphs and steps, or why none ran.
  std::string note() const;

 private:
  struct Entry {
    Key key;
    cudaGraphExec_t exec = nullptr;
    uint64_t epoch = 0;
    uint64_t used = 0;
  };
  void fail(const std::string& why);
  bool requested_;
  bool failed_ = false;
  std::string failure_, declined_;
  std::vector<Entry> graphs_;
  std::vector<Key> seen_;  // keys run once as is (the next time: captured)
  uint64_t clock_ = 0;
  int64_t replays_ = 0;
  int captures_ = 0;
};

}  // namespace cnnscale::nn::cuda
