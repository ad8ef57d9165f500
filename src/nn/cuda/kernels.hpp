// kernels.hpp — the few CUDA kernels of the GPU model that no library call covers,
// launched on a given stream (host-callable wrappers; bodies in kernels.cu).
#pragma once
#include <cuda_bf16.h>
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

// bf16 compute (--precision bf16, layer_conv.cpp and layer_linear.cpp): every value is
// rounded to the nearest bf16, ties to even (__float2bfloat16_rn; oneDNN and PyTorch
// round alike), and widened exactly.
using bf16_t = __nv_bfloat16;

// x: n images of c×hw fp32 (NCHW) → y: the same values as bf16, hw×c per image (NHWC).
// Also a KCRS filter → KRSC (n = K, c = C, hw = R·S). A 32×32 tiled transpose per image.
// Throws UserError when the transposed side (c for to_bf16_nhwc, hw for from_bf16_nhwc)
// needs more than 65535 tiles of 32 (gridDim.y).
// accumulate: y = nearest bf16 of (widened y + x), one rounding (the bf16 activation
// store's gradient sum, flatten's backward).
void to_bf16_nhwc(const float* x, bf16_t* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s,
                  bool accumulate = false);
// The inverse: x NHWC bf16 → y NCHW fp32, y = widened x, or y += widened x (accumulate).
void from_bf16_nhwc(const bf16_t* x, float* y, int64_t n, int64_t c, int64_t hw, bool accumulate, cudaStream_t s);
// The same layout changes for fp32 data, values unchanged (TF32 convolutions on NHWC
// copies, NetState::nhwc32); the same grid limit. accumulate: y += x (flatten's backward
// into an fp32 NHWC store tensor with another reader).
void to_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw, cudaStream_t s, bool accumulate = false);
void from_nhwc(const float* x, float* y, int64_t n, int64_t c, int64_t hw, bool accumulate, cudaStream_t s);
// count values, no layout change (linear layers' row-major operands).
void to_bf16(const float* x, bf16_t* y, int64_t count, cudaStream_t s);

// The bf16 activation store (NetState::half): elementwise layers on bf16 tensors, every
// sum or product in fp32 and rounded once to the nearest bf16 (ties to even), as the CPU
// model's oneDNN bf16 eltwise/binary primitives. count elements, any layout; 16-byte
// accesses (8 values) where count is a multiple of 8 and the pointers are 16-byte aligned.
// y = relu(x); a NaN passes (CUDNN_PROPAGATE_NAN, as the fp32 layer); relu(-0) = +0.
void relu_forward_bf16(const bf16_t* x, bf16_t* y, int64_t count, cudaStream_t s);
// dx = y > 0 ? dy : 0, or dx += that (accumulate; one rounding).
void relu_backward_bf16(const bf16_t* y, const bf16_t* dy, bf16_t* dx, int64_t count, bool accumulate,
                        cudaStream_t s);
// y = a + b (y may be a or b: the gradient sum of a tensor with several readers).
void add_bf16(const bf16_t* a, const bf16_t* b, bf16_t* y, int64_t count, cudaStream_t s);
// A convolution's bias on its bf16 NHWC output: y[r][ch] += b[ch] for rows r < rows (n·h·w).
void bias_add_nhwc_bf16(bf16_t* y, const float* b, int64_t rows, int c, cudaStream_t s);
// db[ch] = Σ_r dy[r][ch] in fp32, in a fixed order (deterministic): kBiasChunks partial
// sums per channel into `partial` (kBiasChunks × c floats), then summed in chunk order.
constexpr int kBiasChunks = 512;  // blocks per 32 channels: enough to fill a GPU on a few channels
void bias_grad_nhwc_bf16(const bf16_t* dy, float* db, int64_t rows, int c, float* partial, cudaStream_t s);

// *p += 1 (batch-norm num_batches_tracked).
void increment(float* p, cudaStream_t s);

}  // namespace cnnscale::nn::cuda
