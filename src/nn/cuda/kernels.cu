// kernels.cu — see kernels.hpp.
#include "nn/cuda/kernels.hpp"
#include "nn/dropout_mask.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale::nn::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void softmax_ce_kernel(const float* z, const int32_t* labels, int64_t n, int C, float loss_scale, float* dz,
                                  double* loss) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float* zi = z + i * C;
  float* di = dz + i * C;
  const int32_t y = labels[i];
  float m = zi[0];
  for (int j = 1; j < C; ++j) m = fmaxf(m, zi[j]);
  double s = 0;
  for (int j = 0; j < C; ++j) s += exp(static_cast<double>(zi[j] - m));
  const double lse = m + log(s);
  loss[i] = lse - zi[y];
  for (int j = 0; j < C; ++j) {
    const double p = exp(static_cast<double>(zi[j]) - lse);
    di[j] = static_cast<float>((p - (j == y ? 1.0 : 0.0)) * loss_scale);
  }
}

// One thread, in sample order: the same summation order as the CPU model.
__global__ void sum_kernel(const double* loss, int64_t n, double* total) {
  double t = 0;
  for (int64_t i = 0; i < n; ++i) t += loss[i];
  *total = t;
}

__global__ void dropout_forward_kernel(const float* x, float* y, uint8_t* mask, int64_t n, int64_t numel, uint64_t seed,
                                       int64_t step, int layer, const int64_t* ids, uint64_t threshold, float scale) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= n * numel) return;
  const int64_t i = k / numel, j = k - i * numel;
  const uint64_t key = dropout_sample_key(seed, step, layer, ids[i]);
  const bool keep = dropout_keep(key, j, threshold);
  mask[k] = keep;
  y[k] = keep ? x[k] * scale : 0.f;
}

__global__ void dropout_backward_kernel(const float* dy, float* dx, const uint8_t* mask, int64_t total, float scale,
                                        bool accumulate) {
  const int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (k >= total) return;
  const float g = mask[k] ? __fmul_rn(dy[k], scale) : 0.f;  // _rn: no fused multiply-add
  dx[k] = accumulate ? dx[k] + g : g;
}

__global__ void increment_kernel(float* p) { *p += 1.f; }

}  // namespace

void softmax_ce(const float* z, const int32_t* labels, int64_t n, int C, float loss_scale, float* dz, double* loss,
                double* total, cudaStream_t s) {
  softmax_ce_kernel<<<blocks_for(n), kThreads, 0, s>>>(z, labels, n, C, loss_scale, dz, loss);
  cudaCheck(cudaGetLastError());
  sum_kernel<<<1, 1, 0, s>>>(loss, n, total);
  cudaCheck(cudaGetLastError());
}

void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t n, int64_t numel, uint64_t seed, int64_t step,
                     int layer, const int64_t* ids, uint64_t threshold, float scale, cudaStream_t s) {
  if (n * numel == 0) return;
  dropout_forward_kernel<<<blocks_for(n * numel), kThreads, 0, s>>>(x, y, mask, n, numel, seed, step, layer, ids,
                                                                      threshold, scale);
  cudaCheck(cudaGetLastError());
}

void dropout_backward(const float* dy, float* dx, const uint8_t* mask, int64_t total, float scale, bool accumulate,
                      cudaStream_t s) {
  if (total == 0) return;
  dropout_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, dx, mask, total, scale, accumulate);
  cudaCheck(cudaGetLastError());
}

void increment(float* p, cudaStream_t s) {
  increment_kernel<<<1, 1, 0, s>>>(p);
  cudaCheck(cudaGetLastError());
}

}  // namespace cnnscale::nn::cuda
