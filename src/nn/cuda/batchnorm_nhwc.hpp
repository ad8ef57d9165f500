// batchnorm_nhwc.hpp — batch norm of our own for NHWC tensors (bf16 or fp32), fused with
// the ReLU that follows it and with a bottleneck's residual add + ReLU (issue 37).
//
// Why: on the H100 (2026-11-27) cuDNN's legacy batch-norm calls on bf16 NHWC took 473 of
// a 499 ms ResNet-50 step (their training kernels are NCHW/stride-generic); the memory
// floor of those 53 layers is ~6.8 ms. PyTorch never sends bf16 batch norm to cuDNN
// either: it runs its own channels-last kernels (the design followed here, with apex's
// welford.cu for the fusion): a per-channel reduction in two levels, then one
// elementwise pass.
//
// Contract
// - Layout: every activation (x, z, y, dy, dz, dx) is `rows × c`, channel fastest
//   (NHWC with rows = N·H·W), element type T = float or bf16_t; gamma, beta, the
//   running and saved statistics and the parameter gradients are fp32 per channel.
// - Arithmetic in fp32, each result rounded once to T (bf16: to nearest, ties to even).
//   The per-channel sums: per thread in fp32 over its rows, shifted by the channel's
//   value in row 0 (x − x[0][ch]: no cancellation when |mean| ≫ std), per block in fp32 by
//   a fixed tree, across blocks in double in block order. The mean is then kept as a float
//   (as cuDNN's and PyTorch's saved mean): with |mean| ≫ std its rounding shifts every
//   normalised value by up to half an ulp of the mean, divided by std.
// - Deterministic: the launch geometry depends only on (rows, c, T) and the pointers'
//   alignment (the access width; the model's buffers are all 256-byte aligned), never on
//   the GPU, and every sum has a fixed order: the same inputs give the same bits on every run.
// - Training forward: biased batch variance for normalising; running_mean/running_var
//   updated with momentum and the unbiased variance (as PyTorch and the CPU model);
//   save_mean and save_invstd = 1/sqrt(var + eps) for the backward.
// - Fusion: y = relu?(bn(x) + z?) — `z` (nullable) is a residual added before the ReLU.
//   The backward masks dy with y > 0 when relu (a NaN y passes no gradient, as our
//   unfused ReLU kernels; PyTorch's threshold_backward would pass it: the step is lost
//   to --on-nan either way), writes that masked gradient to dz when z was fused,
//   and computes dx from it. A NaN in x reaches y (no fmax: the ReLU keeps NaN).
// - Accumulate flags blend into an existing gradient (a tensor with several readers):
//   the sum in fp32, rounded once.
// - Vector width: 16-byte accesses (8 bf16 / 4 floats) when c and the pointers allow,
//   else 8, 4 or 2 bytes; any c ≥ 1 works.
// - All work is queued on `s`; `workspace` must hold workspace_bytes(rows, c, T) bytes
//   and is used between the calls of one forward or one backward only.
// Tested against the CPU model and torch.nn.functional.batch_norm on a GPU
// (tests/nn/test_cuda_model_gpu.cpp, bench/kernels/batchnorm_nhwc.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "nn/cuda/kernels.hpp"

namespace cnnscale::nn::cuda::bn {

// The workspace one forward or backward of this shape needs.
size_t workspace_bytes(int64_t rows, int c, bool bf16);

struct Stats {        // per channel, fp32, on the device
  const float* gamma;  // scale
  const float* beta;   // shift
  float* running_mean;
  float* running_var;
};

// Training forward: batch statistics; running statistics updated; save_mean/save_invstd
// written for backward. z: nullable residual; relu: fused ReLU.
template <class T>
void forward_train(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double momentum, double eps,
                   float* save_mean, float* save_invstd, bool relu, void* workspace, cudaStream_t s);

// Evaluation forward: the running statistics.
template <class T>
void forward_eval(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double eps, bool relu,
                  void* workspace, cudaStream_t s);

// Backward of forward_train. y: the forward's output (read only when relu). dz: nullable,
// the residual's gradient (written or accumulated). dgamma, dbeta: written.
template <class T>
void backward(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, T* dz, bool dz_accumulate, int64_t rows,
              int c, const float* gamma, const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
              bool relu, void* workspace, cudaStream_t s);

// --sync-bn (torch.nn.SyncBatchNorm): the passes above split where the per-channel sums
// are summed over ranks by the caller (on the host, StepContext::sum_across_ranks), as the
// CPU model's SyncBatchNorm does. sums / local / global: 2c doubles on the device.
//   forward:  forward_local_sums → sums = [Σx | Σx²] of this rank's rows (double; from the
//             shifted fp32 sums) → the caller sums them over ranks, n = the global count →
//             forward_global: mean and biased variance of the global batch (Σx²/n − mean²,
//             in double, as the CPU model), running statistics with n/(n−1), the apply.
//   backward: backward_local_sums → local = [Σg | Σg·(x − mean)] of this rank's rows (dz
//             written when fused) → the caller sums a copy over ranks (global) →
//             backward_global: dγ, dβ from the local sums (the parameter gradients, which
//             the gradient buckets then sum), dx from the global sums over n.
template <class T>
void forward_local_sums(const T* x, int64_t rows, int c, void* workspace, double* sums, cudaStream_t s);
template <class T>
void forward_global(const T* x, const T* z, T* y, int64_t rows, int c, const double* sums, double n, const Stats& st,
                    double momentum, double eps, float* save_mean, float* save_invstd, bool relu, void* workspace,
                    cudaStream_t s);
template <class T>
void backward_local_sums(const T* x, const T* y, const T* dy, T* dz, bool dz_accumulate, int64_t rows, int c,
                         const float* save_mean, bool relu, void* workspace, double* local, cudaStream_t s);
template <class T>
void backward_global(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, int64_t rows, int c,
                     const float* gamma, const float* save_mean, const float* save_invstd, const double* local,
                     const double* global, double n, float* dgamma, float* dbeta, bool relu, void* workspace,
                     cudaStream_t s);

}  // namespace cnnscale::nn::cuda::bn
