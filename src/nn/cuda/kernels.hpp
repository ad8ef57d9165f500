// kernels.hpp — the few CUDA kernels of the GPU model that no library call covers,
// launched on a given stream (host-callable wrappers; bodies in kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cnnscale::nn::cuda {

// Softmax cross-entropy of n samples with C classes, as the CPU model computes it
// (double log-sum-exp): loss[i] = lse(z_i) - z_i[y_i] and
// dz = (softmax(z) - onehot(y)) * loss_scale; then *total = sum_i loss[i] (in order).
void softmax_ce(const float* z, const int32_t* labels, int64_t n, int C, float loss_scale, float* dz, double* loss,
                double* total, cudaStream_t s);

// Dropout forward on n samples of `numel` elements: keep decided by dropout_keep
// (nn/dropout_mask.hpp) with key (seed, step, layer, ids[i]); y = keep ? x*scale : 0.
void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t numel, uint64_t seed, int64_t step,
                     int layer, const int64_t* ids, uint64_t threshold, float scale, cudaStream_t s);
// dx = mask ? dy*scale : 0 (accumulate: dx += that).
void dropout_backward(const float* dy, float* dx, const uint8_t* mask, int64_t total, float scale, bool accumulate,
                      cudaStream_t s);

// *p += 1 (batch-norm num_batches_tracked).
void increment(float* p, cudaStream_t s);

}  // namespace cnnscale::nn::cuda
