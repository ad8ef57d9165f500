// batchnorm_nhwc_impl.cuh — the NHWC batch norm's kernels and launch sequence
// (batchnorm_nhwc.hpp), written once for two executors: the GPU (batchnorm_nhwc.cu, L =
// a <<<>>> launch) and a CPU emulator of CUDA's execution model
// (tests/nn/test_bn_emulated.cpp: every block's threads run as host threads meeting at
// __syncthreads barriers, shared memory per block), which checks this very code against
// a double reference on machines without a GPU. L::launch(kernel, grid, block,
// dynamic shared bytes, stream, args...) launches one kernel. Plain CUDA C++ otherwise:
// the emulator defines what nvcc provides (threadIdx, blockIdx, blockDim, __syncthreads,
// dynamic_shared()) before including this file with CNNSCALE_BN_EMULATED.
//
// Three kernels per direction:
//  forward:  stats (per block: shifted sums of x per channel) → finalize (per channel: the
//            blocks' sums in double, mean/invstd, running statistics, the apply's
//            coefficients) → apply (y = relu?((x − mean)·γ·invstd + β + z?)).
//  backward: reduce (Σg, Σg·(x − mean) with g = dy masked by the ReLU; dz written) →
//            finalize (dγ, dβ and dx's coefficients) → apply (dx = A·g + B·(x − mean) + E).
// Every kernel sees the tensor as rows × (c / V) vectors of V elements; a thread owns one
// channel vector and walks the rows of its block's row chunk, so consecutive threads of a
// warp read consecutive 16-byte pieces of a row (coalesced), and its per-channel
// coefficients stay in registers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "nn/cuda/batchnorm_nhwc.hpp"
#include "util/error.hpp"

// An anonymous namespace inside: each including translation unit (the .cu, the emulator)
// has its own copy, so a program may hold both.
namespace cnnscale::nn::cuda::bn::detail {
namespace {

constexpr int kBlockThreads = 256;
// Blocks per reduction: about four per SM of an H100 (132 SMs), enough 16-byte loads in
// flight to reach memory speed. A constant (not the GPU's SM count): the sums' order, and
// so the bits, must not depend on the GPU.
constexpr int kTargetBlocks = 512;
constexpr int kMinRowsPerThread = 8;
constexpr int kFinalChannels = 16, kFinalLanes = 16;  // finalize blocks: 16 channels × 16 lanes

template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

#ifndef CNNSCALE_BN_EMULATED
// The block's dynamic shared memory (the emulator, tests/nn/test_bn_emulated.cpp, has its own).
__device__ __forceinline__ float* dynamic_shared() {
  extern __shared__ float bn_dynamic_shared[];
  return bn_dynamic_shared;
}
#endif

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(bf16_t v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16_t narrow<bf16_t>(float v) {
  return __float2bfloat16_rn(v);
}

// The gradient a batch norm's backward works from: dy, masked by the fused ReLU's output
// (y > 0; a NaN y passes none) when there is one (y is then read, else ignored).
template <bool Relu, class T>
__device__ __forceinline__ float masked_grad(T dy, T y) {
  if constexpr (Relu)
    if (!(widen(y) > 0.f)) return 0.f;
  return widen(dy);
}

// ReLU that keeps a NaN (as CUDNN_PROPAGATE_NAN and PyTorch); relu(-0) = +0.
__device__ __forceinline__ float relu_nan(float v) { return v > 0.f || v != v ? v : 0.f; }

// The launch geometry of every kernel over one tensor: blocks of ct channel vectors ×
// rt rows, grid (channel blocks, row chunks).
struct Geometry {
  int V = 1, cv = 1;
  dim3 block, grid;
  int64_t chunk = 1;  // rows per row chunk (blockIdx.y)
  int chunks() const { return static_cast<int>(grid.y); }
  size_t shared_bytes() const { return 2 * size_t{block.x} * block.y * V * sizeof(float); }
};

// target: the blocks a reduction aims at (kTargetBlocks; the development bench,
// bench/kernels/batchnorm_nhwc.cu, times others through its launcher's kTargetBlocks).
inline Geometry geometry(int64_t rows, int c, int V, int target = kTargetBlocks) {
  Geometry g;
  g.V = V;
  g.cv = c / V;
  const int ct = std::min(g.cv, 32);
  const int rt = std::max(1, kBlockThreads / ct);
  const int gx = (g.cv + ct - 1) / ct;
  int64_t G = std::max<int64_t>(1, (target + gx - 1) / gx);
  G = std::min<int64_t>(G, std::max<int64_t>(1, rows / (int64_t{rt} * kMinRowsPerThread)));
  G = std::min<int64_t>(G, 65535);
  g.chunk = (rows + G - 1) / G;
  G = (rows + g.chunk - 1) / g.chunk;  // no empty chunk
  g.block = dim3(static_cast<unsigned>(ct), static_cast<unsigned>(rt));
  g.grid = dim3(static_cast<unsigned>(gx), static_cast<unsigned>(G));
  return g;
}

// Partial sums [chunks][2][c], then the coefficients [4][c].
inline size_t workspace_floats(const Geometry& g, int c) { return (2 * size_t(g.chunks()) + 4) * size_t(c); }

// The widest access (elements) that c and every pointer allow: 16 bytes at most.
template <class T>
inline int vector_width(int c, std::initializer_list<const void*> ptrs) {
  for (int V = 16 / int(sizeof(T)); V > 1; V /= 2) {
    bool ok = c % V == 0;
    for (const void* p : ptrs)
      if (p && reinterpret_cast<uintptr_t>(p) % (size_t(V) * sizeof(T))) ok = false;
    if (ok) return V;
  }
  return 1;
}

// Runs f(std::integral_constant<int, V>) for the V chosen at run time.
template <class T, class F>
void with_width(int V, F&& f) {
  if constexpr (sizeof(T) == 2) {
    if (V == 8) return f(std::integral_constant<int, 8>{});
  }
  if (V == 4) return f(std::integral_constant<int, 4>{});
  if (V == 2) return f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 1>{});
}

template <class F>
void with_flags(bool relu, bool res, F&& f) {
  if (relu && res) f(std::true_type{}, std::true_type{});
  else if (relu) f(std::true_type{}, std::false_type{});
  else if (res) f(std::false_type{}, std::true_type{});
  else f(std::false_type{}, std::false_type{});
}

// Sums a[V] and b[V] of every thread of the block over threadIdx.y by a fixed tree and
// writes the block's sums of its channels to part[blockIdx.y][0|1][channel].
template <int V>
__device__ void block_sums_to(const float (&a)[V], const float (&b)[V], float* part, int c, bool active) {
  float* sh = dynamic_shared();  // [2][rt][V][ct]
  const int ct = blockDim.x, rt = blockDim.y, plane = rt * V * ct;
  const int base = threadIdx.y * V * ct + threadIdx.x;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    sh[base + i * ct] = a[i];
    sh[plane + base + i * ct] = b[i];
  }
  __syncthreads();
  for (int n = rt; n > 1;) {
    const int half = (n + 1) / 2;
    if (static_cast<int>(threadIdx.y) < n - half) {
      const int from = base + half * V * ct;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        sh[base + i * ct] += sh[from + i * ct];
        sh[plane + base + i * ct] += sh[plane + from + i * ct];
      }
    }
    __syncthreads();
    n = half;
  }
  if (threadIdx.y == 0 && active) {
    const int ch0 = (blockIdx.x * ct + threadIdx.x) * V;
    float* p = part + size_t(blockIdx.y) * 2 * c;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      p[ch0 + i] = sh[threadIdx.x + i * ct];
      p[c + ch0 + i] = sh[plane + threadIdx.x + i * ct];
    }
  }
}

// Per block: Σ(x − k) and Σ(x − k)² per channel over its rows, k = x[0][channel].
template <class T, int V>
__global__ void __launch_bounds__(kBlockThreads)
    stats_kernel(const T* __restrict__ x, int64_t rows, int c, int64_t chunk, float* __restrict__ part) {
  using P = Vec<T, V>;
  const int cv = c / V, j = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = j < cv;
  float s1[V] = {}, s2[V] = {};
  if (active) {
    const P* p = reinterpret_cast<const P*>(x) + j;
    const P k = p[0];
    float shift[V];
#pragma unroll
    for (int i = 0; i < V; ++i) shift[i] = widen(k.v[i]);
    const int64_t r1 = imin(rows, (blockIdx.y + 1) * chunk);
#pragma unroll 4
    for (int64_t r = blockIdx.y * chunk + threadIdx.y; r < r1; r += blockDim.y) {
      const P a = p[r * cv];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float d = widen(a.v[i]) - shift[i];
        s1[i] += d;
        s2[i] = fmaf(d, d, s2[i]);
      }
    }
  }
  block_sums_to<V>(s1, s2, part, c, active);
}

// Adds the row chunks' partial sums of channel ch in double, in chunk order split over
// kFinalLanes lanes (a fixed order); lane 0 gets the totals.
__device__ bool chunk_totals(const float* part, int chunks, int c, double& t1, double& t2) {
  __shared__ double sh[2][kFinalLanes][kFinalChannels];
  const int lane = threadIdx.y, ch = blockIdx.x * kFinalChannels + threadIdx.x;
  double a = 0, b = 0;
  if (ch < c)
    for (int g = lane; g < chunks; g += kFinalLanes) {
      a += part[size_t(g) * 2 * c + ch];
      b += part[size_t(g) * 2 * c + c + ch];
    }
  sh[0][lane][threadIdx.x] = a;
  sh[1][lane][threadIdx.x] = b;
  __syncthreads();
  if (lane != 0 || ch >= c) return false;
  t1 = 0, t2 = 0;
  for (int l = 0; l < kFinalLanes; ++l) t1 += sh[0][l][threadIdx.x], t2 += sh[1][l][threadIdx.x];
  return true;
}

// A channel's batch mean and biased variance over n samples: saved for the backward, the
// running statistics (momentum, unbiased variance), the apply's coefficients [mean][a][β].
__device__ void finish_statistics(int ch, int c, double mean, double var, double n, const Stats& st, double momentum,
                                  double eps, float* save_mean, float* save_invstd, float* coef) {
  if (var < 0) var = 0;  // rounding; a NaN stays NaN
  const double invstd = 1.0 / sqrt(var + eps), unbiased = n > 1 ? var * n / (n - 1) : var;
  save_mean[ch] = float(mean);
  save_invstd[ch] = float(invstd);
  st.running_mean[ch] = float((1 - momentum) * st.running_mean[ch] + momentum * mean);
  st.running_var[ch] = float((1 - momentum) * st.running_var[ch] + momentum * unbiased);
  coef[ch] = float(mean);
  coef[c + ch] = float(st.gamma[ch] * invstd);
  coef[2 * c + ch] = st.beta[ch];
}

// dx's coefficients for a channel (coef = [mean][A][B][E]) from the sums over n samples.
__device__ void finish_backward(int ch, int c, double sum_g, double sum_gx, double n, const float* gamma,
                                const float* save_mean, const float* save_invstd, float* coef) {
  const double invstd = save_invstd[ch], A = double(gamma[ch]) * invstd;
  coef[ch] = save_mean[ch];
  coef[c + ch] = float(A);
  coef[2 * c + ch] = float(-A * invstd * invstd * sum_gx / n);
  coef[3 * c + ch] = float(-A * sum_g / n);
}

template <class T>
__global__ void forward_finalize_kernel(const T* x, const float* part, int chunks, int64_t rows, int c, Stats st,
                                        double momentum, double eps, float* save_mean, float* save_invstd,
                                        float* coef) {
  double s1, s2;
  if (!chunk_totals(part, chunks, c, s1, s2)) return;
  const int ch = blockIdx.x * kFinalChannels + threadIdx.x;
  const double n = double(rows), d = s1 / n;
  finish_statistics(ch, c, double(widen(x[ch])) + d, s2 / n - d * d, n, st, momentum, eps, save_mean, save_invstd,
                    coef);
}

// --sync-bn: this rank's Σx and Σx² per channel in double (the shifted sums unshifted:
// Σx = s1 + n·k, Σx² = s2 + 2k·s1 + n·k²) into sums[0..2c).
template <class T>
__global__ void local_sums_kernel(const T* x, const float* part, int chunks, int64_t rows, int c, double* sums) {
  double s1, s2;
  if (!chunk_totals(part, chunks, c, s1, s2)) return;
  const int ch = blockIdx.x * kFinalChannels + threadIdx.x;
  const double n = double(rows), k = double(widen(x[ch]));
  sums[ch] = s1 + n * k;
  sums[c + ch] = s2 + 2 * k * s1 + n * k * k;
}

// The backward's per-block sums (Σg, Σg·(x − mean)) totalled in double into sums[0..2c).
__global__ void plain_sums_kernel(const float* part, int chunks, int c, double* sums) {
  double s1, s2;
  if (!chunk_totals(part, chunks, c, s1, s2)) return;
  const int ch = blockIdx.x * kFinalChannels + threadIdx.x;
  sums[ch] = s1, sums[c + ch] = s2;
}

// --sync-bn forward: mean and biased variance from the global Σx, Σx² over n samples (as
// the CPU model's SyncBatchNorm), then as forward_finalize_kernel.
__global__ void global_finalize_kernel(const double* sums, double n, int c, Stats st, double momentum, double eps,
                                       float* save_mean, float* save_invstd, float* coef) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double mean = sums[ch] / n;
  finish_statistics(ch, c, mean, sums[c + ch] / n - mean * mean, n, st, momentum, eps, save_mean, save_invstd, coef);
}

// --sync-bn backward: dγ, dβ from this rank's sums (the parameter gradients the buckets
// then sum over ranks), dx's coefficients from the global ones over n samples.
__global__ void global_backward_finalize_kernel(const double* local, const double* global, double n, int c,
                                                const float* gamma, const float* save_mean, const float* save_invstd,
                                                float* dgamma, float* dbeta, float* coef) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  dbeta[ch] = float(local[ch]);
  dgamma[ch] = float(local[c + ch] * save_invstd[ch]);
  finish_backward(ch, c, global[ch], global[c + ch], n, gamma, save_mean, save_invstd, coef);
}

__global__ void eval_coef_kernel(int c, Stats st, double eps, float* coef) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  coef[ch] = st.running_mean[ch];
  coef[c + ch] = float(st.gamma[ch] / sqrt(double(st.running_var[ch]) + eps));
  coef[2 * c + ch] = st.beta[ch];
}

// y = relu?((x − mean)·a + β + z?), coef = [mean][a][β].
template <class T, int V, bool Relu, bool Res>
__global__ void __launch_bounds__(kBlockThreads)
    apply_kernel(const T* __restrict__ x, const T* __restrict__ z, T* __restrict__ y, int64_t rows, int c,
                 int64_t chunk, const float* __restrict__ coef) {
  using P = Vec<T, V>;
  const int cv = c / V, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cv) return;
  float m[V], a[V], b[V];
#pragma unroll
  for (int i = 0; i < V; ++i) m[i] = coef[j * V + i], a[i] = coef[c + j * V + i], b[i] = coef[2 * c + j * V + i];
  const int64_t r1 = imin(rows, (blockIdx.y + 1) * chunk);
#pragma unroll 4
  for (int64_t r = blockIdx.y * chunk + threadIdx.y; r < r1; r += blockDim.y) {
    const int64_t k = r * cv + j;
    const P xv = reinterpret_cast<const P*>(x)[k];
    P zv, out;
    if constexpr (Res) zv = reinterpret_cast<const P*>(z)[k];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      float v = fmaf(widen(xv.v[i]) - m[i], a[i], b[i]);
      if constexpr (Res) v += widen(zv.v[i]);
      if constexpr (Relu) v = relu_nan(v);
      out.v[i] = narrow<T>(v);
    }
    reinterpret_cast<P*>(y)[k] = out;
  }
}

// g = dy, masked by y > 0 under Relu; dz = g (or += g) under Res. Per block: Σg and
// Σg·(x − mean) per channel.
template <class T, int V, bool Relu, bool Res>
__global__ void __launch_bounds__(kBlockThreads)
    backward_reduce_kernel(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy, T* dz,
                           bool dz_accumulate, int64_t rows, int c, int64_t chunk, const float* __restrict__ mean,
                           float* __restrict__ part) {
  using P = Vec<T, V>;
  const int cv = c / V, j = blockIdx.x * blockDim.x + threadIdx.x;
  const bool active = j < cv;
  float s1[V] = {}, s2[V] = {};
  if (active) {
    float m[V];
#pragma unroll
    for (int i = 0; i < V; ++i) m[i] = mean[j * V + i];
    const int64_t r1 = imin(rows, (blockIdx.y + 1) * chunk);
#pragma unroll 2
    for (int64_t r = blockIdx.y * chunk + threadIdx.y; r < r1; r += blockDim.y) {
      const int64_t k = r * cv + j;
      const P xv = reinterpret_cast<const P*>(x)[k], dv = reinterpret_cast<const P*>(dy)[k];
      P yv{}, zv;
      if constexpr (Relu) yv = reinterpret_cast<const P*>(y)[k];
      if constexpr (Res)
        if (dz_accumulate) zv = reinterpret_cast<const P*>(dz)[k];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float g = masked_grad<Relu>(dv.v[i], yv.v[i]);
        if constexpr (Res) zv.v[i] = narrow<T>(dz_accumulate ? widen(zv.v[i]) + g : g);
        s1[i] += g;
        s2[i] = fmaf(g, widen(xv.v[i]) - m[i], s2[i]);
      }
      if constexpr (Res) reinterpret_cast<P*>(dz)[k] = zv;
    }
  }
  block_sums_to<V>(s1, s2, part, c, active);
}

// dβ = Σg, dγ = Σg·(x − mean)·invstd; dx = A·g + B·(x − mean) + E with A = γ·invstd,
// B = −A·invstd²·Σg(x − mean)/n, E = −A·Σg/n: coef = [mean][A][B][E].
__global__ void backward_finalize_kernel(const float* part, int chunks, int64_t rows, int c, const float* gamma,
                                         const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
                                         float* coef) {
  double s1, s2;
  if (!chunk_totals(part, chunks, c, s1, s2)) return;
  const int ch = blockIdx.x * kFinalChannels + threadIdx.x;
  dbeta[ch] = float(s1);
  dgamma[ch] = float(s2 * save_invstd[ch]);
  finish_backward(ch, c, s1, s2, double(rows), gamma, save_mean, save_invstd, coef);
}

template <class T, int V, bool Relu>
__global__ void __launch_bounds__(kBlockThreads)
    backward_apply_kernel(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy, T* dx,
                          bool dx_accumulate, int64_t rows, int c, int64_t chunk, const float* __restrict__ coef) {
  using P = Vec<T, V>;
  const int cv = c / V, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cv) return;
  float m[V], A[V], B[V], E[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    const int ch = j * V + i;
    m[i] = coef[ch], A[i] = coef[c + ch], B[i] = coef[2 * c + ch], E[i] = coef[3 * c + ch];
  }
  const int64_t r1 = imin(rows, (blockIdx.y + 1) * chunk);
#pragma unroll 2
  for (int64_t r = blockIdx.y * chunk + threadIdx.y; r < r1; r += blockDim.y) {
    const int64_t k = r * cv + j;
    const P xv = reinterpret_cast<const P*>(x)[k], dv = reinterpret_cast<const P*>(dy)[k];
    P yv{}, out;
    if constexpr (Relu) yv = reinterpret_cast<const P*>(y)[k];
    if (dx_accumulate) out = reinterpret_cast<const P*>(dx)[k];
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float g = masked_grad<Relu>(dv.v[i], yv.v[i]);
      float v = fmaf(A[i], g, fmaf(B[i], widen(xv.v[i]) - m[i], E[i]));
      if (dx_accumulate) v += widen(out.v[i]);
      out.v[i] = narrow<T>(v);
    }
    reinterpret_cast<P*>(dx)[k] = out;
  }
}

inline void check_shape(int64_t rows, int c) {
  if (rows < 1 || c < 1) fail("batch norm of an empty tensor (", rows, " rows × ", c, " channels)");
}

inline dim3 finalize_grid(int c) { return dim3(static_cast<unsigned>((c + kFinalChannels - 1) / kFinalChannels)); }
const dim3 kFinalBlock(kFinalChannels, kFinalLanes);

// The blocks a launcher L's reductions aim at: L::kTargetBlocks where it says, else
// kTargetBlocks (the product's launcher and the emulator's do not say).
template <class L, class = void>
struct TargetOf {
  static constexpr int value = kTargetBlocks;
};
template <class L>
struct TargetOf<L, std::void_t<decltype(L::kTargetBlocks)>> {
  static constexpr int value = L::kTargetBlocks;
};

inline size_t workspace_bytes_impl(int64_t rows, int c, bool bf16, int target = kTargetBlocks) {
  size_t most = 0;
  for (int V = bf16 ? 8 : 4; V >= 1; V /= 2)
    if (c % V == 0) most = std::max(most, workspace_floats(geometry(rows, c, V, target), c));
  return most * sizeof(float);
}

// ---- the passes, each over the geometry its caller chose ----

// The apply's coefficients: in the workspace after the partial sums.
inline float* coef_of(const Geometry& g, void* workspace, int c) {
  return static_cast<float*>(workspace) + 2 * size_t(g.chunks()) * size_t(c);
}

template <class L, class T>
void stats_pass(const Geometry& g, const T* x, int64_t rows, int c, float* part, cudaStream_t s) {
  with_width<T>(g.V, [&](auto v) {
    constexpr int V = decltype(v)::value;
    L::launch(stats_kernel<T, V>, g.grid, g.block, g.shared_bytes(), s, x, rows, c, g.chunk, part);
  });
}

template <class L, class T>
void apply_pass(const Geometry& g, const T* x, const T* z, T* y, int64_t rows, int c, const float* coef, bool relu,
                cudaStream_t s) {
  with_width<T>(g.V, [&](auto v) {
    constexpr int V = decltype(v)::value;
    with_flags(relu, z != nullptr, [&](auto r, auto res) {
      L::launch(apply_kernel<T, V, decltype(r)::value, decltype(res)::value>, g.grid, g.block, 0, s, x, z, y, rows, c,
                g.chunk, coef);
    });
  });
}

template <class L, class T>
void reduce_pass(const Geometry& g, const T* x, const T* y, const T* dy, T* dz, bool dz_accumulate, int64_t rows, int c,
                 const float* save_mean, float* part, bool relu, cudaStream_t s) {
  if (relu && !y) fail("batch-norm backward with a fused ReLU needs the forward's output");
  with_width<T>(g.V, [&](auto v) {
    constexpr int V = decltype(v)::value;
    with_flags(relu, dz != nullptr, [&](auto r, auto res) {
      L::launch(backward_reduce_kernel<T, V, decltype(r)::value, decltype(res)::value>, g.grid, g.block,
                g.shared_bytes(), s, x, y, dy, dz, dz_accumulate, rows, c, g.chunk, save_mean, part);
    });
  });
}

template <class L, class T>
void backward_apply_pass(const Geometry& g, const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate,
                         int64_t rows, int c, const float* coef, bool relu, cudaStream_t s) {
  with_width<T>(g.V, [&](auto v) {
    constexpr int V = decltype(v)::value;
    if (relu)
      L::launch(backward_apply_kernel<T, V, true>, g.grid, g.block, 0, s, x, y, dy, dx, dx_accumulate, rows, c, g.chunk,
                coef);
    else
      L::launch(backward_apply_kernel<T, V, false>, g.grid, g.block, 0, s, x, y, dy, dx, dx_accumulate, rows, c,
                g.chunk, coef);
  });
}

inline dim3 channel_grid(int c) { return dim3(static_cast<unsigned>((c + 255) / 256)); }

// ---- the operations ----

template <class L, class T>
void forward_train_impl(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double momentum, double eps,
                        float* save_mean, float* save_invstd, bool relu, void* workspace, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, z, y}), TargetOf<L>::value);
  float* part = static_cast<float*>(workspace);
  float* coef = coef_of(g, workspace, c);
  stats_pass<L>(g, x, rows, c, part, s);
  L::launch(forward_finalize_kernel<T>, finalize_grid(c), kFinalBlock, 0, s, x, part, g.chunks(), rows, c, st, momentum,
            eps, save_mean, save_invstd, coef);
  apply_pass<L>(g, x, z, y, rows, c, coef, relu, s);
}

template <class L, class T>
void forward_eval_impl(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double eps, bool relu,
                       void* workspace, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, z, y}), TargetOf<L>::value);
  float* coef = coef_of(g, workspace, c);
  L::launch(eval_coef_kernel, channel_grid(c), 256, 0, s, c, st, eps, coef);
  apply_pass<L>(g, x, z, y, rows, c, coef, relu, s);
}

template <class L, class T>
void backward_impl(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, T* dz, bool dz_accumulate,
                   int64_t rows, int c, const float* gamma, const float* save_mean, const float* save_invstd,
                   float* dgamma, float* dbeta, bool relu, void* workspace, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, y, dy, dx, dz}), TargetOf<L>::value);
  float* part = static_cast<float*>(workspace);
  float* coef = coef_of(g, workspace, c);
  reduce_pass<L>(g, x, y, dy, dz, dz_accumulate, rows, c, save_mean, part, relu, s);
  L::launch(backward_finalize_kernel, finalize_grid(c), kFinalBlock, 0, s, part, g.chunks(), rows, c, gamma, save_mean,
            save_invstd, dgamma, dbeta, coef);
  backward_apply_pass<L>(g, x, y, dy, dx, dx_accumulate, rows, c, coef, relu, s);
}

// ---- --sync-bn: the same passes with the per-channel sums summed over ranks between ----

// Forward, first half: this rank's Σx, Σx² (2c doubles, device) for the sum over ranks.
template <class L, class T>
void forward_local_sums_impl(const T* x, int64_t rows, int c, void* workspace, double* sums, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x}), TargetOf<L>::value);
  float* part = static_cast<float*>(workspace);
  stats_pass<L>(g, x, rows, c, part, s);
  L::launch(local_sums_kernel<T>, finalize_grid(c), kFinalBlock, 0, s, x, part, g.chunks(), rows, c, sums);
}

// Forward, second half: normalise with the global sums over n samples.
template <class L, class T>
void forward_global_impl(const T* x, const T* z, T* y, int64_t rows, int c, const double* sums, double n,
                         const Stats& st, double momentum, double eps, float* save_mean, float* save_invstd, bool relu,
                         void* workspace, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, z, y}), TargetOf<L>::value);
  float* coef = coef_of(g, workspace, c);
  L::launch(global_finalize_kernel, channel_grid(c), 256, 0, s, sums, n, c, st, momentum, eps, save_mean, save_invstd,
            coef);
  apply_pass<L>(g, x, z, y, rows, c, coef, relu, s);
}

// Backward, first half: this rank's Σg, Σg·(x − mean) (2c doubles, device); dz written.
template <class L, class T>
void backward_local_sums_impl(const T* x, const T* y, const T* dy, T* dz, bool dz_accumulate, int64_t rows, int c,
                              const float* save_mean, bool relu, void* workspace, double* sums, cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, y, dy, dz}), TargetOf<L>::value);
  float* part = static_cast<float*>(workspace);
  reduce_pass<L>(g, x, y, dy, dz, dz_accumulate, rows, c, save_mean, part, relu, s);
  L::launch(plain_sums_kernel, finalize_grid(c), kFinalBlock, 0, s, part, g.chunks(), c, sums);
}

// Backward, second half: dγ, dβ from the local sums, dx from the global ones over n.
template <class L, class T>
void backward_global_impl(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, int64_t rows, int c,
                          const float* gamma, const float* save_mean, const float* save_invstd, const double* local,
                          const double* global, double n, float* dgamma, float* dbeta, bool relu, void* workspace,
                          cudaStream_t s) {
  check_shape(rows, c);
  const Geometry g = geometry(rows, c, vector_width<T>(c, {x, y, dy, dx}), TargetOf<L>::value);
  float* coef = coef_of(g, workspace, c);
  L::launch(global_backward_finalize_kernel, channel_grid(c), 256, 0, s, local, global, n, c, gamma, save_mean,
            save_invstd, dgamma, dbeta, coef);
  backward_apply_pass<L>(g, x, y, dy, dx, dx_accumulate, rows, c, coef, relu, s);
}

}  // namespace
}  // namespace cnnscale::nn::cuda::bn::detail
