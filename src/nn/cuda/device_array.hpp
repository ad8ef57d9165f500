// device_array.hpp — RAII holders for the GPU model: device arrays (zero-filled, and
// counted: DeviceBytes), page-locked host arrays, and cuDNN descriptors.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "util/cuda/check.hpp"

namespace cnnscale::nn::cuda {

// The bytes the GPU model's DevArrays hold in this process, now and at most at once:
// run.json's gpu.peak_memory_gib (Model::device_paths, which says what is and is not
// counted). Device memory the model allocates outside a DevArray is not counted: keep
// every model allocation a DevArray.
// `epoch` counts the allocations and frees: a captured CUDA graph holds the addresses it
// was captured with, so a step graph (step_graph.hpp) is replayed only while it is unchanged.
struct DeviceBytes {
  static inline std::atomic<size_t> live{0}, peak{0};
  static inline std::atomic<uint64_t> epoch{0};
  static void add(size_t n) {
    const size_t now = live.fetch_add(n) + n;
    size_t p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  static void sub(size_t n) { live.fetch_sub(n); }
};

// Device memory of n elements of T, freed on destruction. alloc() zero-fills it on the
// given stream (cudaMemsetAsync): the model's queue is non-blocking, so a memset on the
// legacy default stream would not be ordered before the model's first writes to it.
template <class T>
class DevArray {
 public:
  DevArray() = default;
  DevArray(const DevArray&) = delete;
  DevArray& operator=(const DevArray&) = delete;
  DevArray(DevArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  ~DevArray() { release(); }
  void alloc(size_t n, cudaStream_t stream) {
    release();
    if (n == 0) return;
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
    DeviceBytes::add(n * sizeof(T));
    ++DeviceBytes::epoch;
    cudaCheck(cudaMemsetAsync(p_, 0, n * sizeof(T), stream));
  }
  void release() {
    if (p_) {
      cudaFree(p_);
      DeviceBytes::sub(n_ * sizeof(T));
      ++DeviceBytes::epoch;
    }
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory (for asynchronous copies).
template <class T>
class Pinned {
 public:
  Pinned() = default;
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() { release(); }
  void alloc(size_t n) {
    release();
    if (n) cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  void release() {
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Desc {
 public:
  Desc() { cudnnCheck(Create(&d_)); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() { Destroy(d_); }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActDesc = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

// An n×c×h×w tensor descriptor: fp32 NCHW unless told otherwise (bf16 or fp32 NHWC).
inline std::unique_ptr<TensorDesc> tensor_desc(int64_t n, int c, int h, int w,
                                               cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW,
                                               cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  auto d = std::make_unique<TensorDesc>();
  cudnnCheck(cudnnSetTensor4dDescriptor(d->get(), format, type, static_cast<int>(n), c, h, w));
  return d;
}

}  // namespace cnnscale::nn::cuda
