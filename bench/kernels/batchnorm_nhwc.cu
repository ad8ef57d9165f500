// batchnorm_nhwc.cu — the development bench of our NHWC batch norm (GPU-KERNELS.md's
// method, after llm.c's dev/cuda): every version of the operation on ResNet-50's 53 batch
// norms at batch 128 (forward with its fused ReLU / residual add + ReLU, and backward), in
// bf16 and fp32, checked and timed in one run:
//   version 0  cuDNN's legacy spatial calls on NHWC descriptors (the default today; no
//              fusion: the ReLU and add it leaves are separate passes, not timed here)
//   version 1  naive: one block per channel, strided loads, sums in double (obviously right)
//   version 2  the product's kernels (src/nn/cuda/batchnorm_nhwc.cu; its reductions aim at
//              512 blocks)
//   versions 3-5  the same kernels and launch sequence (batchnorm_nhwc_impl.cuh) aiming at
//              256, 1024 and 2048 blocks: what the geometry constant costs or gains, from
//              the same call (checked against naive at the real size, and timed)
// Correctness: every version against a host reference in double at batch 2 (every layer's
// channels and fusion), and version 2 against version 1 at batch 128 (the real geometry).
// Time: CUDA events around `--iters` calls after warm-up, per layer and direction; GB/s of
// the bytes each version moves, as a share of this GPU's device-to-device copy rate
// (measured here) and of --peak-gbs (default: 3350 for H100 SXM, 4800 for H200 by name).
// Totals per version over the 53 layers against issue 37's target (12 ms per step) and the
// memory floor (forward reads x twice and writes y; backward reads x and dy twice and writes dx).
//   bn_kernel_bench [--iters N] [--batch N] [--types bf16,fp32] [--peak-gbs G]
// Exit 0 when every check passed, 1 when one failed (the table says which).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/cuda/batchnorm_nhwc.hpp"
#include "nn/cuda/batchnorm_nhwc_impl.cuh"
#include "nn/rng.hpp"
#include "util/bf16.hpp"

using cnnscale::nn::cuda::bf16_t;
namespace bn = cnnscale::nn::cuda::bn;

#define CK(call)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)
#define CKDNN(call)                                                                          \
  do {                                                                                       \
    cudnnStatus_t e_ = (call);                                                               \
    if (e_ != CUDNN_STATUS_SUCCESS) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudnnGetErrorString(e_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

namespace {

constexpr double kEps = 1e-5, kMomentum = 0.1;

// Versions 3.. : the product's kernels with another block target (kTuned[v - 3]).
constexpr int kTuned[] = {256, 1024, 2048};
constexpr int kNumTuned = int(sizeof(kTuned) / sizeof(kTuned[0]));
constexpr int kVersions = 3 + kNumTuned;
template <int B>
struct TunedLaunch {
  static constexpr int kTargetBlocks = B;
  template <class... P, class... A>
  static void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t s, A&&... args) {
    kernel<<<grid, block, shared, s>>>(std::forward<A>(args)...);
  }
};
// f(TunedLaunch<kTuned[i]>{}) for version 3 + i (one launcher per entry of kTuned).
template <class F, size_t... I>
void with_tuned(int v, F&& f, std::index_sequence<I...>) {
  ((v == 3 + int(I) ? f(TunedLaunch<kTuned[I]>{}) : void()), ...);
}
template <class F>
void with_tuned(int v, F&& f) {
  with_tuned(v, f, std::make_index_sequence<kNumTuned>{});
}
std::string version_name(int v) { return v == 0 ? "cudnn" : v == 1 ? "naive" : v == 2 ? "ours" : "ours@" + std::to_string(kTuned[v - 3]); }

// ---- ResNet-50's batch norms (torchvision, stride in the 3×3 conv) ----
struct Layer {
  int hw, c;      // spatial side and channels
  bool relu, res;  // fused ReLU; fused residual add (then ReLU too)
  int count;      // how many of ResNet-50's 53 have this shape and fusion
};
std::vector<Layer> resnet50_layers() {
  std::vector<Layer> L = {{112, 64, true, false, 1}};
  const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512};
  int side = 56;
  for (int s = 0; s < 4; ++s) {
    const int w = width[s], out_side = s == 0 ? 56 : side / 2;
    std::map<std::pair<int, int>, int> relu;  // (hw, c) → count
    relu[{side, w}] += 1;                     // block 1's bn1 at the input's side
    relu[{out_side, w}] += 1;                 // block 1's bn2
    relu[{out_side, w}] += 2 * (blocks[s] - 1);
    for (auto& [k, n] : relu) L.push_back({k.first, k.second, true, false, n});
    L.push_back({out_side, 4 * w, true, true, blocks[s]});   // bn3, then add + relu
    L.push_back({out_side, 4 * w, false, false, 1});         // the downsampling bn (z)
    side = out_side;
  }
  return L;
}

template <class T>
struct Ty;
template <>
struct Ty<float> {
  using H = float;
  static H from(double v) { return float(v); }
  static double to(H v) { return v; }
  static constexpr const char* name = "fp32";
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_FLOAT;
  static constexpr double tol = 1e-4;
};
template <>
struct Ty<bf16_t> {
  using H = uint16_t;
  static H from(double v) { return cnnscale::float_to_bf16(float(v)); }
  static double to(H v) { return cnnscale::bf16_to_float(v); }
  static constexpr const char* name = "bf16";
  static constexpr cudnnDataType_t dnn = CUDNN_DATA_BFLOAT16;
  static constexpr double tol = 1.6e-2;
};

__device__ float widen(float v) { return v; }
__device__ float widen(bf16_t v) { return __bfloat162float(v); }
template <class T>
__device__ T narrow(float v);
template <>
__device__ float narrow<float>(float v) { return v; }
template <>
__device__ bf16_t narrow<bf16_t>(float v) { return __float2bfloat16_rn(v); }

// ---- version 1: naive ----
template <class T>
__global__ void naive_stats(const T* x, int64_t R, int C, const float* gamma, const float* beta, float* rm, float* rv,
                            float* mean, float* invstd, float* coef) {
  __shared__ double s1[256], s2[256];
  const int c = blockIdx.x;
  double a = 0, b = 0;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    const double v = widen(x[r * C + c]);
    a += v, b += v * v;
  }
  s1[threadIdx.x] = a, s2[threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.x) return;
  double t1 = 0, t2 = 0;
  for (int i = 0; i < blockDim.x; ++i) t1 += s1[i], t2 += s2[i];
  const double m = t1 / R, var = fmax(t2 / R - m * m, 0.0), is = 1 / sqrt(var + kEps);
  mean[c] = float(m), invstd[c] = float(is);
  rm[c] = float((1 - kMomentum) * rm[c] + kMomentum * m);
  rv[c] = float((1 - kMomentum) * rv[c] + kMomentum * var * R / (R > 1 ? R - 1 : 1));
  coef[c] = float(m), coef[C + c] = float(gamma[c] * is), coef[2 * C + c] = beta[c];
}
template <class T>
__global__ void naive_apply(const T* x, const T* z, T* y, int64_t N, int C, const float* coef, bool relu) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < N; e += int64_t{gridDim.x} * blockDim.x) {
    const int c = int(e % C);
    float v = (widen(x[e]) - coef[c]) * coef[C + c] + coef[2 * C + c];
    if (z) v += widen(z[e]);
    if (relu) v = v > 0.f || v != v ? v : 0.f;
    y[e] = narrow<T>(v);
  }
}
template <class T>
__global__ void naive_bwd_reduce(const T* x, const T* y, const T* dy, T* dz, int64_t R, int C, const float* gamma,
                                 const float* mean, const float* invstd, float* dgamma, float* dbeta, float* coef,
                                 bool relu) {
  __shared__ double s1[256], s2[256];
  const int c = blockIdx.x;
  double a = 0, b = 0;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    const int64_t e = r * C + c;
    double g = widen(dy[e]);
    if (relu && !(widen(y[e]) > 0.f)) g = 0;
    if (dz) dz[e] = narrow<T>(float(g));
    a += g, b += g * (widen(x[e]) - mean[c]);
  }
  s1[threadIdx.x] = a, s2[threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.x) return;
  double t1 = 0, t2 = 0;
  for (int i = 0; i < blockDim.x; ++i) t1 += s1[i], t2 += s2[i];
  const double is = invstd[c], A = gamma[c] * is;
  dbeta[c] = float(t1), dgamma[c] = float(t2 * is);
  coef[c] = mean[c], coef[C + c] = float(A), coef[2 * C + c] = float(-A * is * is * t2 / R),
  coef[3 * C + c] = float(-A * t1 / R);
}
template <class T>
__global__ void naive_bwd_apply(const T* x, const T* y, const T* dy, T* dx, int64_t N, int C, const float* coef,
                                bool relu) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < N; e += int64_t{gridDim.x} * blockDim.x) {
    const int c = int(e % C);
    float g = widen(dy[e]);
    if (relu && !(widen(y[e]) > 0.f)) g = 0.f;
    dx[e] = narrow<T>(coef[C + c] * g + coef[2 * C + c] * (widen(x[e]) - coef[c]) + coef[3 * C + c]);
  }
}

// ---- buffers of one layer ----
template <class T>
struct Buffers {
  int64_t R;
  int C;
  size_t N;
  T *x, *z, *y, *dy, *dx, *dz;
  float *gamma, *beta, *rm, *rv, *mean, *invstd, *dgamma, *dbeta, *coef;
  void* ws;
  size_t ws_bytes;
  Buffers(int64_t rows, int c) : R(rows), C(c), N(size_t(rows) * c) {
    for (T** p : {&x, &z, &y, &dy, &dx, &dz}) CK(cudaMalloc(p, N * sizeof(T)));
    for (float** p : {&gamma, &beta, &rm, &rv, &mean, &invstd, &dgamma, &dbeta}) CK(cudaMalloc(p, C * sizeof(float)));
    CK(cudaMalloc(&coef, 4 * C * sizeof(float)));
    ws_bytes = std::max<size_t>(bn::workspace_bytes(R, C, sizeof(T) == 2), 1);
    for (int t : kTuned) ws_bytes = std::max(ws_bytes, bn::detail::workspace_bytes_impl(R, C, sizeof(T) == 2, t));
    CK(cudaMalloc(&ws, ws_bytes));
  }
  ~Buffers() {
    for (T* p : {x, z, y, dy, dx, dz}) cudaFree(p);
    for (float* p : {gamma, beta, rm, rv, mean, invstd, dgamma, dbeta, coef}) cudaFree(p);
    cudaFree(ws);
  }
  // Random inputs (host copies kept for the reference).
  std::vector<typename Ty<T>::H> hx, hz, hdy;
  std::vector<float> hg, hb;
  void fill(uint64_t seed) {
    cnnscale::nn::SplitMix64 r(seed);
    hx.resize(N), hz.resize(N), hdy.resize(N);
    for (size_t i = 0; i < N; ++i)
      hx[i] = Ty<T>::from(0.3 + 2 * r.uniform(-1, 1)), hz[i] = Ty<T>::from(r.uniform(-1, 1)),
      hdy[i] = Ty<T>::from(r.uniform(-1, 1));
    hg.resize(C), hb.resize(C);
    for (int c = 0; c < C; ++c) hg[c] = float(r.uniform(0.5, 1.5)), hb[c] = float(r.uniform(-0.5, 0.5));
    CK(cudaMemcpy(x, hx.data(), N * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(z, hz.data(), N * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, hdy.data(), N * sizeof(T), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(gamma, hg.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(beta, hb.data(), C * 4, cudaMemcpyHostToDevice));
    reset_stats();
  }
  void reset_stats() {
    std::vector<float> zero(C, 0.f), one(C, 1.f);
    CK(cudaMemcpy(rm, zero.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(rv, one.data(), C * 4, cudaMemcpyHostToDevice));
  }
  std::vector<double> get(const T* d) const {
    std::vector<typename Ty<T>::H> h(N);
    CK(cudaMemcpy(h.data(), d, N * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<double> out(N);
    for (size_t i = 0; i < N; ++i) out[i] = Ty<T>::to(h[i]);
    return out;
  }
  std::vector<double> getf(const float* d) const {
    std::vector<float> h(C);
    CK(cudaMemcpy(h.data(), d, C * 4, cudaMemcpyDeviceToHost));
    return std::vector<double>(h.begin(), h.end());
  }
};

// ---- the versions: forward (training) and backward of one layer ----
struct Cudnn {
  cudnnHandle_t h = nullptr;
  cudnnTensorDescriptor_t xd = nullptr, cd = nullptr;
};

template <class T>
void forward(int v, Buffers<T>& b, const Layer& L, Cudnn& dnn) {
  const T* z = L.res ? b.z : nullptr;
  if (v == 0) {
    const float one = 1, zero = 0;
    CKDNN(cudnnBatchNormalizationForwardTraining(dnn.h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, dnn.xd, b.x, dnn.xd, b.y,
                                                 dnn.cd, b.gamma, b.beta, kMomentum, b.rm, b.rv, kEps, b.mean,
                                                 b.invstd));
  } else if (v == 1) {
    naive_stats<T><<<b.C, 256>>>(b.x, b.R, b.C, b.gamma, b.beta, b.rm, b.rv, b.mean, b.invstd, b.coef);
    naive_apply<T><<<2048, 256>>>(b.x, z, b.y, int64_t(b.N), b.C, b.coef, L.relu);
  } else if (v == 2) {
    bn::forward_train<T>(b.x, z, b.y, b.R, b.C, {b.gamma, b.beta, b.rm, b.rv}, kMomentum, kEps, b.mean, b.invstd,
                         L.relu, b.ws, nullptr);
  } else {
    with_tuned(v, [&](auto l) {
      bn::detail::forward_train_impl<decltype(l), T>(b.x, z, b.y, b.R, b.C, {b.gamma, b.beta, b.rm, b.rv}, kMomentum,
                                                     kEps, b.mean, b.invstd, L.relu, b.ws, nullptr);
    });
  }
  CK(cudaGetLastError());
}

template <class T>
void backward(int v, Buffers<T>& b, const Layer& L, Cudnn& dnn) {
  T* dz = L.res ? b.dz : nullptr;
  if (v == 0) {
    const float one = 1, zero = 0;
    CKDNN(cudnnBatchNormalizationBackward(dnn.h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, dnn.xd, b.x,
                                          dnn.xd, b.dy, dnn.xd, b.dx, dnn.cd, b.gamma, b.dgamma, b.dbeta, kEps, b.mean,
                                          b.invstd));
  } else if (v == 1) {
    naive_bwd_reduce<T><<<b.C, 256>>>(b.x, b.y, b.dy, dz, b.R, b.C, b.gamma, b.mean, b.invstd, b.dgamma, b.dbeta,
                                      b.coef, L.relu);
    naive_bwd_apply<T><<<2048, 256>>>(b.x, b.y, b.dy, b.dx, int64_t(b.N), b.C, b.coef, L.relu);
  } else if (v == 2) {
    bn::backward<T>(b.x, L.relu ? b.y : nullptr, b.dy, b.dx, false, dz, false, b.R, b.C, b.gamma, b.mean, b.invstd,
                    b.dgamma, b.dbeta, L.relu, b.ws, nullptr);
  } else {
    with_tuned(v, [&](auto l) {
      bn::detail::backward_impl<decltype(l), T>(b.x, L.relu ? b.y : nullptr, b.dy, b.dx, false, dz, false, b.R, b.C,
                                                b.gamma, b.mean, b.invstd, b.dgamma, b.dbeta, L.relu, b.ws, nullptr);
    });
  }
  CK(cudaGetLastError());
}

double max_rel(const std::vector<double>& a, const std::vector<double>& ref) {
  double e = 0, s = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) e = std::max(e, std::fabs(a[i] - ref[i])), s = std::max(s, std::fabs(ref[i]));
  return e / s;
}

// Host reference of forward + backward of buffers b (its y is the version's own, for the
// ReLU mask). Returns the worst relative error of y, dx, dγ, dβ (and dz).
template <class T>
double check_against_reference(Buffers<T>& b, const Layer& L) {
  const int64_t R = b.R;
  const int C = b.C;
  std::vector<double> mean(C, 0), var(C, 0), is(C);
  for (size_t e = 0; e < b.N; ++e) mean[e % C] += Ty<T>::to(b.hx[e]);
  for (int c = 0; c < C; ++c) mean[c] /= R;
  for (size_t e = 0; e < b.N; ++e) var[e % C] += std::pow(Ty<T>::to(b.hx[e]) - mean[e % C], 2);
  for (int c = 0; c < C; ++c) is[c] = 1 / std::sqrt(var[c] / R + kEps);
  std::vector<double> y(b.N), g(b.N), sg(C, 0), sgx(C, 0);
  const std::vector<double> gy = b.get(b.y);
  for (size_t e = 0; e < b.N; ++e) {
    const int c = int(e % C);
    double v = (Ty<T>::to(b.hx[e]) - mean[c]) * is[c] * b.hg[c] + b.hb[c] + (L.res ? Ty<T>::to(b.hz[e]) : 0.0);
    y[e] = L.relu ? std::max(v, 0.0) : v;
    g[e] = L.relu && !(gy[e] > 0) ? 0.0 : Ty<T>::to(b.hdy[e]);
    sg[c] += g[e], sgx[c] += g[e] * (Ty<T>::to(b.hx[e]) - mean[c]) * is[c];
  }
  std::vector<double> dx(b.N);
  for (size_t e = 0; e < b.N; ++e) {
    const int c = int(e % C);
    const double xh = (Ty<T>::to(b.hx[e]) - mean[c]) * is[c];
    dx[e] = b.hg[c] * is[c] * (g[e] - sg[c] / R - xh * sgx[c] / R);
  }
  double err = std::max({max_rel(gy, y), max_rel(b.get(b.dx), dx), max_rel(b.getf(b.dgamma), sgx),
                         max_rel(b.getf(b.dbeta), sg)});
  if (L.res) err = std::max(err, max_rel(b.get(b.dz), g));
  return err;
}

struct Timing {
  double fwd_us = 0, bwd_us = 0, err = -1;
};

template <class T>
Timing run_version(int v, Buffers<T>& b, const Layer& L, Cudnn& dnn, int iters) {
  Timing t;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int w = 0; w < 2; ++w) forward(v, b, L, dnn), backward(v, b, L, dnn);
  float ms = 0;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) forward(v, b, L, dnn);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  t.fwd_us = 1e3 * ms / iters;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < iters; ++i) backward(v, b, L, dnn);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  t.bwd_us = 1e3 * ms / iters;
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return t;
}

double copy_rate_gbs() {  // device-to-device copy: bytes read + written per second
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaFree(a), cudaFree(b);
  return 2.0 * bytes * 10 / (ms * 1e-3) / 1e9;
}


template <class T>
bool bench_type(const std::vector<Layer>& layers, int batch, int iters, double peak, double copy, Cudnn& dnn) {
  bool ok = true;
  const size_t es = sizeof(T);
  std::printf("\n### %s, batch %d (µs per call; GB/s of the bytes each version moves; err: max error relative to the "
              "tensor's largest, at batch 2 against double, and ours against naive at batch %d)\n\n",
              Ty<T>::name, batch, batch);
  std::printf("| n | h=w | c | fusion | floor µs | cudnn fwd/bwd | naive fwd/bwd | ours fwd/bwd | ours GB/s (%% of peak) "
              "| err cudnn / naive / ours | ours vs naive |");
  for (int v = 3; v < kVersions; ++v) std::printf(" %s fwd+bwd (vs naive) |", version_name(v).c_str());
  std::printf("\n|---|---|---|---|---|---|---|---|---|---|---|");
  for (int v = 3; v < kVersions; ++v) std::printf("---|");
  std::printf("\n");
  double total[kVersions] = {}, floor_total = 0;
  for (const Layer& L : layers) {
    const int64_t R = int64_t(batch) * L.hw * L.hw;
    // Floor: forward reads x twice, writes y; backward reads x, dy twice, writes dx.
    const double floor_bytes = double(R) * L.c * es * (3 + 5);
    const double floor_us = floor_bytes / (peak * 1e9) * 1e6;
    // Ours moves also z (fused add) and y (the ReLU mask, twice), dz.
    const double our_bytes = double(R) * L.c * es * (3 + (L.res ? 1 : 0) + 5 + (L.relu ? 2 : 0) + (L.res ? 1 : 0));
    double err[3] = {-1, -1, -1};
    {  // correctness at batch 2 against double
      Buffers<T> s(int64_t(2) * L.hw * L.hw, L.c);
      s.fill(17 + L.c);
      CKDNN(cudnnSetTensor4dDescriptor(dnn.xd, CUDNN_TENSOR_NHWC, Ty<T>::dnn, 2, L.c, L.hw, L.hw));
      CKDNN(cudnnSetTensor4dDescriptor(dnn.cd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, L.c, 1, 1));
      for (int v = 0; v < 3; ++v) {
        if (v == 0 && (L.relu || L.res)) {  // cuDNN has no fusion here: checked on the plain batch norm
          Layer plain{L.hw, L.c, false, false, 1};
          s.reset_stats();
          forward(0, s, plain, dnn), backward(0, s, plain, dnn);
          CK(cudaDeviceSynchronize());
          err[0] = check_against_reference(s, plain);
          continue;
        }
        s.reset_stats();
        forward(v, s, L, dnn), backward(v, s, L, dnn);
        CK(cudaDeviceSynchronize());
        err[v] = check_against_reference(s, L);
      }
    }
    Buffers<T> b(R, L.c);
    b.fill(5 + L.c);
    CKDNN(cudnnSetTensor4dDescriptor(dnn.xd, CUDNN_TENSOR_NHWC, Ty<T>::dnn, batch, L.c, L.hw, L.hw));
    Timing t[kVersions];
    for (int v = 0; v < kVersions; ++v) t[v] = run_version(v, b, L, dnn, v == 1 ? std::max(1, iters / 4) : iters);
    // Ours (and its tuned versions) against naive at the full size: one fresh forward +
    // backward of each.
    b.reset_stats();
    forward(1, b, L, dnn), backward(1, b, L, dnn);
    const auto ny = b.get(b.y), ndx = b.get(b.dx);
    double vs_of[kVersions] = {};
    for (int v = 2; v < kVersions; ++v) {
      b.reset_stats();
      forward(v, b, L, dnn), backward(v, b, L, dnn);
      vs_of[v] = std::max(max_rel(b.get(b.y), ny), max_rel(b.get(b.dx), ndx));
    }
    bool pass = err[0] < Ty<T>::tol && err[1] < Ty<T>::tol && err[2] < Ty<T>::tol;
    for (int v = 2; v < kVersions; ++v) pass = pass && vs_of[v] < 2 * Ty<T>::tol;
    ok = ok && pass;
    const double our_us = t[2].fwd_us + t[2].bwd_us;
    std::printf("| %d | %d | %d | %s | %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.0f (%.0f%%) | %.1e / %.1e / "
                "%.1e | %.1e%s |",
                L.count, L.hw, L.c, L.res ? "add+relu" : L.relu ? "relu" : "-", floor_us, t[0].fwd_us, t[0].bwd_us,
                t[1].fwd_us, t[1].bwd_us, t[2].fwd_us, t[2].bwd_us, our_bytes / (our_us * 1e-6) / 1e9,
                100 * our_bytes / (our_us * 1e-6) / 1e9 / peak, err[0], err[1], err[2], vs_of[2], pass ? "" : " **FAIL**");
    for (int v = 3; v < kVersions; ++v) std::printf(" %.1f (%.1e) |", t[v].fwd_us + t[v].bwd_us, vs_of[v]);
    std::printf("\n");
    for (int v = 0; v < kVersions; ++v) total[v] += L.count * (t[v].fwd_us + t[v].bwd_us);
    floor_total += L.count * floor_us;
  }
  std::printf("\n%s totals over ResNet-50's 53 batch norms, ms per step (forward + backward): cudnn %.2f (no ReLU/add "
              "fused) · naive %.2f · ours %.2f (fused) · floor %.2f at %.0f GB/s · target 12 (issue 37) · copy rate "
              "%.0f GB/s\n",
              Ty<T>::name, total[0] / 1e3, total[1] / 1e3, total[2] / 1e3, floor_total / 1e3, peak, copy);
  std::printf("%s totals of our kernels by block target, ms per step:", Ty<T>::name);
  for (int v = 2; v < kVersions; ++v) std::printf(" %s %.2f%s", version_name(v).c_str(), total[v] / 1e3, v + 1 < kVersions ? " ·" : "");
  int best = 2;
  for (int v = 3; v < kVersions; ++v)
    if (total[v] < total[best]) best = v;
  std::printf(" (fastest: %s)\n", version_name(best).c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20, batch = 128;
  double peak = 0;
  std::string types = "bf16,fp32";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) std::fprintf(stderr, "bn_kernel_bench: %s needs a value\n", a.c_str()), std::exit(2);
      return argv[++i];
    };
    if (a == "--iters") iters = std::max(1, std::atoi(next()));
    else if (a == "--batch") batch = std::max(2, std::atoi(next()));
    else if (a == "--types") types = next();
    else if (a == "--peak-gbs") peak = std::atof(next());
    else {
      std::fprintf(stderr,
                   "usage: bn_kernel_bench [--iters N] [--batch N] [--types bf16,fp32] [--peak-gbs G]\n"
                   "  ResNet-50's batch norms: cuDNN, naive and our NHWC kernels, checked and timed\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bn_kernel_bench: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const std::string name = prop.name;
  if (peak <= 0) peak = name.find("H200") != std::string::npos ? 4800 : name.find("H100") != std::string::npos ? 3350 : 0;
  const double copy = copy_rate_gbs();
  if (peak <= 0) peak = copy;
  std::printf("## NHWC batch norm: %s (sm_%d%d), cuDNN %zu, peak %.0f GB/s (copy %.0f GB/s), %d iterations\n",
              prop.name, prop.major, prop.minor, cudnnGetVersion(), peak, copy, iters);
  Cudnn dnn;
  CKDNN(cudnnCreate(&dnn.h));
  CKDNN(cudnnCreateTensorDescriptor(&dnn.xd));
  CKDNN(cudnnCreateTensorDescriptor(&dnn.cd));
  const auto layers = resnet50_layers();
  int total = 0;
  for (const Layer& L : layers) total += L.count;
  if (total != 53) std::printf("warning: %d batch norms, not ResNet-50's 53\n", total);
  bool ok = true;
  if (types.find("bf16") != std::string::npos && prop.major >= 8) ok = bench_type<bf16_t>(layers, batch, iters, peak, copy, dnn) && ok;
  if (types.find("fp32") != std::string::npos) ok = bench_type<float>(layers, batch, iters, peak, copy, dnn) && ok;
  std::printf("\n%s\n", ok ? "all versions within tolerance" : "**a version is outside its tolerance (FAIL above)**");
  return ok ? 0 : 1;
}
