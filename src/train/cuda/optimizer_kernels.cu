// optimizer_kernels.cu — see optimizer_kernels.hpp. Every operation is written with a
// round-to-nearest intrinsic so that nvcc cannot fuse a multiply and an add: the result
// is then the CPU optimiser's (optimizer.cpp), operation by operation.
#include "train/cuda/optimizer_kernels.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale::cuda_opt {
namespace {

constexpr int kThreads = 256;

__global__ void sgd_kernel(float* p, const float* g, float* buf, size_t n, float lr, float mom, float wd, bool first,
                           bool nesterov) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float d = __fadd_rn(g[i], __fmul_rn(wd, p[i]));
  if (!buf) {
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, d));
    return;
  }
  const float b = first ? d : __fadd_rn(__fmul_rn(mom, buf[i]), d);
  buf[i] = b;
  p[i] = __fsub_rn(p[i], __fmul_rn(lr, nesterov ? __fadd_rn(d, __fmul_rn(mom, b)) : b));
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, size_t n, float decay, float b1,
                             float one_minus_b1, float b2, float one_minus_b2, float step_size, float inv_sqrt_bc2,
                             float eps) {
  const size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float gi = g[i];
  const float pi = __fmul_rn(p[i], decay);
  const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_minus_b1, gi));
  const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), inv_sqrt_bc2), eps);
  p[i] = __fsub_rn(pi, __fdiv_rn(__fmul_rn(step_size, mi), denom));
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

void sgd(float* p, const float* g, float* buf, size_t n, float lr, float mom, float wd, bool first, bool nesterov,
         cudaStream_t s) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, g, buf, n, lr, mom, wd, first, nesterov);
  cudaCheck(cudaGetLastError());
}

void adamw(float* p, const float* g, float* m, float* v, size_t n, float decay, float b1, float one_minus_b1, float b2,
           float one_minus_b2, float step_size, float inv_sqrt_bc2, float eps, cudaStream_t s) {
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, g, m, v, n, decay, b1, one_minus_b1, b2, one_minus_b2, step_size,
                                                  inv_sqrt_bc2, eps);
  cudaCheck(cudaGetLastError());
}

}  // namespace cnnscale::cuda_opt
