// layer_bn.cpp — batch-norm 2d on oneDNN with PyTorch semantics: training uses batch
// statistics and updates running_mean / running_var (unbiased) with the node's momentum (0.1 as PyTorch's default),
// and the node's eps (1e-5 as PyTorch's default); evaluation uses the running statistics.
// Types: the activation's (f32, or bf16 under --precision bf16: oneDNN's bf16 batch-norm
// reads and writes bf16 and keeps the statistics, scale, shift and their gradients in
// f32, as PyTorch autocast runs batch-norm on a bf16 input with f32 parameters).
//
// Per-rank statistics (default, as DDP): summed here in double over this rank's batch (the
//   pass below, without the sum across ranks), oneDNN normalises with them; the backward
//   is oneDNN's, its float sums Σdy and Σdy·x̂ replaced by exact ones (exact_param_gradients,
//   correct_local_data_gradient): accuracy, with the measurements, at BnExec::forward.
//
// Global statistics (--sync-bn: StepContext::sum_across_ranks is set; as
// torch.nn.SyncBatchNorm):
//   forward: one pass here sums (Σx, Σx², count) per channel in double over this rank's
//     batch; the callback sums that message (2C + 1 doubles, the count as the last
//     element) over ranks; oneDNN's forward_training with use_global_stats normalises
//     with the global mean and biased variance. The running statistics take the global
//     mean and var·N/(N−1), N the global count: ranks with unequal batches (a short last
//     batch) are weighted by their counts, as SyncBatchNorm does.
//   backward: oneDNN's backward with use_global_stats gives dx' = γσ⁻¹·dy and this
//     rank's Σdy·x̂ (the weight gradient) and Σdy (the bias gradient). Those two are
//     copied in backward_params, before the grad-ready hook may start summing the
//     gradient buffer in place; in backward_data (after the hook launched the bucket
//     holding them, so gradient buckets stay in flight during the wait) the callback
//     sums (Σdy·x̂, Σdy) over ranks (2C doubles) and a pass here subtracts
//     γσ⁻¹/N·(Σdy + x̂·Σdy·x̂) from dx. The weight and bias gradients stay this rank's
//     sums: the gradient allreduce adds them up, as for every other parameter.
//   Why not oneDNN alone: its use_global_stats backward treats mean and variance as
//   constants (no correction terms: not SyncBatchNorm's gradient), and it has no
//   statistics-only forward. The two passes here walk the activation in the layout
//   oneDNN chose for it (plain, or channel-blocked such as nChw16c).
//   Cost of the two passes (resnet20, batch 32, one core, `nn_bench --sync-bn`): about
//   2 % of the step by `perf` (statistics 1.3 %, correction 0.9 %); the rest of the
//   path is oneDNN's own (global-stats forward/backward, no slower than the plain ones).
//   Between ranks: two latency-bound sums per layer (docs/models.md, "Batch norm
//   across ranks").
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "nn/exec.hpp"
#include "util/bf16.hpp"

namespace cnnscale::nn {
namespace {


// Elements of an activation: f32, or bf16 (--precision bf16; util/bf16.hpp's rounding).
[[gnu::always_inline]] inline float ld(const float* p) { return *p; }
[[gnu::always_inline]] inline float ld(const uint16_t* p) { return bf16_to_float(*p); }
[[gnu::always_inline]] inline void st(float* p, float v) { *p = v; }
[[gnu::always_inline]] inline void st(uint16_t* p, float v) { *p = float_to_bf16(v); }

// The passes' inner loops (written once over the element type, compiled for AVX-512 and
// AVX2 as well, picked at run time).
// f32 channel blocks as GCC vectors of 8 lanes (one ymm on AVX2 and AVX-512, two xmm
// otherwise): written so, the loops below keep each vector one block row; left to itself
// the compiler vectorised across positions with strided loads, 2× slower than oneDNN.
// The helpers are always inlined: no vector crosses a call, whatever the clone's ISA (the
// warning fires in the default clone's callers, reported at the end of the file: not popped).
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32), aligned(4)));
typedef int v8i __attribute__((vector_size(32), aligned(4)));
typedef float v4f __attribute__((vector_size(16), aligned(4)));
typedef double v4d __attribute__((vector_size(32), aligned(8)));
[[gnu::always_inline]] inline v8f vload(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void vstore(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline v8f vmask_pos(v8f d, v8f y) {  // d where y > 0, else 0
  return reinterpret_cast<v8f>(reinterpret_cast<v8i>(d) & (y > 0.f));
}
[[gnu::always_inline]] inline v4d lo4(v8f v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), v4d); }
[[gnu::always_inline]] inline v4d hi4(v8f v) { return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), v4d); }

// B channels interleaved (nChw16c, nChw8c: oneDNN's layout on AVX-512 / AVX2): lane j is
// channel c0 + j; each lane keeps its own double sums, so the loop vectorises without
// reassociating a sum.
template <int B, class T>
[[gnu::always_inline]] inline void sums_blk_t(const T* x, int64_t positions, double* sum, double* sq) {
  if constexpr (std::is_same_v<T, float>) {
    constexpr int V = B / 8;
    v4d s[2 * V] = {}, q[2 * V] = {};
    for (int64_t i = 0; i < positions; ++i)
      for (int v = 0; v < V; ++v) {
        const v8f f = vload(x + i * B + 8 * v);
        const v4d l = lo4(f), h = hi4(f);
        s[2 * v] += l, s[2 * v + 1] += h, q[2 * v] += l * l, q[2 * v + 1] += h * h;
      }
    for (int j = 0; j < B; ++j) sum[j] += s[j / 4][j % 4], sq[j] += q[j / 4][j % 4];
    return;
  }
  double s[B] = {}, q[B] = {};
  for (int64_t i = 0; i < positions; ++i)
    for (int j = 0; j < B; ++j) {
      const double v = ld(x + i * B + j);
      s[j] += v;
      q[j] += v * v;
    }
  for (int j = 0; j < B; ++j) sum[j] += s[j], sq[j] += q[j];
}
template <int B, class T>
[[gnu::always_inline]] inline void correct_blk_t(T* dx, const T* x, int64_t positions, const float* k0, const float* k1,
                                                 const float* m) {
  for (int64_t i = 0; i < positions; ++i)
    for (int j = 0; j < B; ++j)
      st(dx + i * B + j, ld(dx + i * B + j) - (k0[j] + k1[j] * (ld(x + i * B + j) - m[j])));
}
// One channel's contiguous run (nchw): 8 partial sums, added in a fixed order.
template <class T>
[[gnu::always_inline]] inline void sums_run_t(const T* x, int64_t len, double* sum, double* sq) {
  double s[8] = {}, q[8] = {};
  int64_t i = 0;
  for (; i + 8 <= len; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double v = ld(x + i + j);
      s[j] += v;
      q[j] += v * v;
    }
  for (; i < len; ++i) {
    const double v = ld(x + i);
    s[0] += v, q[0] += v * v;
  }
  for (int j = 0; j < 8; ++j) *sum += s[j], *sq += q[j];
}
template <class T>
[[gnu::always_inline]] inline void correct_run_t(T* dx, const T* x, int64_t len, float k0, float k1, float m) {
  for (int64_t i = 0; i < len; ++i) st(dx + i, ld(dx + i) - (k0 + k1 * (ld(x + i) - m)));
}
// The weight and bias gradients' sums over one channel block's positions (B interleaved
// channels, B = 1 for a plain run): sdy[j] += Σdy, sdyx[j] += Σdy·(x − m[j]), in double per
// lane; with y (bn_relu: the relu's output) dy counts only where y > 0 (the relu's mask).
// Each lane sums 32 positions in float, those partial sums in double (as channel_sums: a
// float sum of 32 terms is within ~32 ulps, the double sum of the chunks exact enough),
// so that the loop vectorises in float.
template <int B, bool Mask, class T>
[[gnu::always_inline]] inline void grad_sums_m(const T* dy, const T* x, const T* y, int64_t positions, const float* m,
                                               double* sdy, double* sdyx) {
  if constexpr (std::is_same_v<T, float> && B % 8 == 0) {
    constexpr int V = B / 8;
    v8f mv[V];
    for (int v = 0; v < V; ++v) mv[v] = vload(m + 8 * v);
    double a[B] = {}, b[B] = {};
    for (int64_t i0 = 0; i0 < positions; i0 += 32) {
      const int64_t i1 = std::min(positions, i0 + 32);
      v8f fa[V] = {}, fb[V] = {};
      for (int64_t i = i0; i < i1; ++i)
        for (int v = 0; v < V; ++v) {
          v8f d = vload(dy + i * B + 8 * v);
          if constexpr (Mask) d = vmask_pos(d, vload(y + i * B + 8 * v));
          fa[v] += d;
          fb[v] += d * (vload(x + i * B + 8 * v) - mv[v]);
        }
      for (int j = 0; j < B; ++j) a[j] += fa[j / 8][j % 8], b[j] += fb[j / 8][j % 8];
    }
    for (int j = 0; j < B; ++j) sdy[j] += a[j], sdyx[j] += b[j];
    return;
  }
  double a[B] = {}, b[B] = {};
  for (int64_t i0 = 0; i0 < positions; i0 += 32) {
    const int64_t i1 = std::min(positions, i0 + 32);
    float fa[B] = {}, fb[B] = {};
    for (int64_t i = i0; i < i1; ++i)
      for (int j = 0; j < B; ++j) {
        const float v = ld(dy + i * B + j);
        const float d = Mask ? (ld(y + i * B + j) > 0.f ? v : 0.f) : v;
        fa[j] += d;
        fb[j] += d * (ld(x + i * B + j) - m[j]);
      }
    for (int j = 0; j < B; ++j) a[j] += fa[j], b[j] += fb[j];
  }
  for (int j = 0; j < B; ++j) sdy[j] += a[j], sdyx[j] += b[j];
}
template <int B, class T>
[[gnu::always_inline]] inline void grad_sums_t(const T* dy, const T* x, const T* y, int64_t positions, const float* m,
                                               double* sdy, double* sdyx) {
  if (y) grad_sums_m<B, true>(dy, x, y, positions, m, sdy, sdyx);
  else grad_sums_m<B, false>(dy, x, y, positions, m, sdy, sdyx);
}
// The local backward's dx = a·dy' − b − c·(x − m) per lane (dy' = dy where y > 0 with y given):
// a = γσ⁻¹, b = γσ⁻¹·Σdy/M, c = γσ⁻³·Σdy·(x − m)/M, as torch's batch_norm_backward in float.
template <int B, bool Mask, class T>
[[gnu::always_inline]] inline void bwd_dx_m(T* dx, const T* dy, const T* x, const T* y, int64_t positions,
                                            const float* a, const float* b, const float* c, const float* m) {
  if constexpr (std::is_same_v<T, float> && B % 8 == 0) {
    constexpr int V = B / 8;
    v8f av[V], bv[V], cv[V], mv[V];
    for (int v = 0; v < V; ++v)
      av[v] = vload(a + 8 * v), bv[v] = vload(b + 8 * v), cv[v] = vload(c + 8 * v), mv[v] = vload(m + 8 * v);
    for (int64_t i = 0; i < positions; ++i)
      for (int v = 0; v < V; ++v) {
        v8f d = vload(dy + i * B + 8 * v);
        if constexpr (Mask) d = vmask_pos(d, vload(y + i * B + 8 * v));
        vstore(dx + i * B + 8 * v, av[v] * d - bv[v] - cv[v] * (vload(x + i * B + 8 * v) - mv[v]));
      }
    return;
  }
  for (int64_t i = 0; i < positions; ++i)
    for (int j = 0; j < B; ++j) {
      const float v = ld(dy + i * B + j);
      const float d = Mask ? (ld(y + i * B + j) > 0.f ? v : 0.f) : v;
      st(dx + i * B + j, a[j] * d - b[j] - c[j] * (ld(x + i * B + j) - m[j]));
    }
}
template <int B, class T>
[[gnu::always_inline]] inline void bwd_dx_t(T* dx, const T* dy, const T* x, const T* y, int64_t positions,
                                            const float* a, const float* b, const float* c, const float* m) {
  if (y) bwd_dx_m<B, true>(dx, dy, x, y, positions, a, b, c, m);
  else bwd_dx_m<B, false>(dx, dy, x, y, positions, a, b, c, m);
}
#define CNNSCALE_BN_LOOPS(T)                                                                                          \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void grad_sums16(                                    \
      const T* dy, const T* x, const T* y, int64_t p, const float* m, double* a, double* b) {                       \
    grad_sums_t<16>(dy, x, y, p, m, a, b);                                                                           \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void grad_sums8(                                     \
      const T* dy, const T* x, const T* y, int64_t p, const float* m, double* a, double* b) {                       \
    grad_sums_t<8>(dy, x, y, p, m, a, b);                                                                            \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void grad_sums1(                                     \
      const T* dy, const T* x, const T* y, int64_t p, const float* m, double* a, double* b) {                       \
    grad_sums_t<1>(dy, x, y, p, m, a, b);                                                                            \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void bwd_dx16(                                       \
      T* dx, const T* dy, const T* x, const T* y, int64_t p, const float* a, const float* b, const float* c,        \
      const float* m) {                                                                                              \
    bwd_dx_t<16>(dx, dy, x, y, p, a, b, c, m);                                                                       \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void bwd_dx8(                                        \
      T* dx, const T* dy, const T* x, const T* y, int64_t p, const float* a, const float* b, const float* c,        \
      const float* m) {                                                                                              \
    bwd_dx_t<8>(dx, dy, x, y, p, a, b, c, m);                                                                        \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void bwd_dx1(                                        \
      T* dx, const T* dy, const T* x, const T* y, int64_t p, const float* a, const float* b, const float* c,        \
      const float* m) {                                                                                              \
    bwd_dx_t<1>(dx, dy, x, y, p, a, b, c, m);                                                                        \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void sums16(const T* x, int64_t p, double* s,        \
                                                                           double* q) {                             \
    sums_blk_t<16>(x, p, s, q);                                                                                      \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void sums8(const T* x, int64_t p, double* s,         \
                                                                          double* q) {                              \
    sums_blk_t<8>(x, p, s, q);                                                                                       \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void correct16(                                      \
      T* dx, const T* x, int64_t p, const float* k0, const float* k1, const float* m) {                             \
    correct_blk_t<16>(dx, x, p, k0, k1, m);                                                                          \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void correct8(                                       \
      T* dx, const T* x, int64_t p, const float* k0, const float* k1, const float* m) {                             \
    correct_blk_t<8>(dx, x, p, k0, k1, m);                                                                           \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void sums_run(const T* x, int64_t len, double* s,    \
                                                                             double* q) {                           \
    sums_run_t(x, len, s, q);                                                                                        \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void correct_run(T* dx, const T* x, int64_t len,     \
                                                                                float k0, float k1, float m) {       \
    correct_run_t(dx, x, len, k0, k1, m);                                                                            \
  }
CNNSCALE_BN_LOOPS(float)
CNNSCALE_BN_LOOPS(uint16_t)
#undef CNNSCALE_BN_LOOPS

// The element offsets of a 4-D f32 or bf16 activation, channel by channel, in its memory
// layout: plain (any strides) or blocked over channels only (nChw8c, nChw16c ...).
struct ChannelWalk {
  int64_t n = 0, c = 0, h = 0, w = 0, blk = 1;
  int64_t s[4] = {0, 0, 0, 0};
  int64_t offset0 = 0;

  explicit ChannelWalk(const md_t& md) {
    const dnnl_memory_desc_t& d = md.data;
    if ((d.ndims != 4 && d.ndims != 5) || (d.data_type != dnnl_f32 && d.data_type != dnnl_bf16) ||
        d.format_kind != dnnl_blocked)
      throw std::logic_error("batch-norm --sync-bn: expected a 4-d or 5-d f32 or bf16 activation");
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    n = d.dims[0], c = d.dims[1];
    s[0] = b.strides[0], s[1] = b.strides[1];
    if (d.ndims == 5) {  // a volume: depth and height as one (D·H) when depth steps over whole planes
      if (b.strides[2] != d.dims[3] * b.strides[3])
        throw std::logic_error("batch-norm: a 5-d activation whose depth is not dense over its rows");
      h = d.dims[2] * d.dims[3], w = d.dims[4], s[2] = b.strides[3], s[3] = b.strides[4];
    } else {
      h = d.dims[2], w = d.dims[3], s[2] = b.strides[2], s[3] = b.strides[3];
    }
    offset0 = d.offset0;
    if (b.inner_nblks == 1 && b.inner_idxs[0] == 1) blk = b.inner_blks[0];
    else if (b.inner_nblks != 0) throw std::logic_error("batch-norm --sync-bn: unsupported activation layout");
  }

  // Dense nChw16c with whole blocks, or dense nchw: the vectorised loops above.
  bool blocked16() const { return blk == 16 && c % 16 == 0 && s[3] == 16 && s[2] == w * 16; }
  bool blocked8() const { return blk == 8 && c % 8 == 0 && s[3] == 8 && s[2] == w * 8; }
  bool plain() const { return blk == 1 && s[3] == 1 && s[2] == w; }

  // sum[c] += Σx, sq[c] += Σx² over this layout's elements.
  template <class T>
  void sums(const T* x, double* sum, double* sq) const {
    // Threads (--threads) split the channels: each channel is summed by one thread, in
    // sample order, so the sums do not depend on the thread count.
    if (blocked16()) {
#pragma omp parallel for schedule(static)
      for (int64_t cb = 0; cb < c / 16; ++cb)
        for (int64_t in = 0; in < n; ++in)
          sums16(x + offset0 + in * s[0] + cb * s[1], h * w, sum + cb * 16, sq + cb * 16);
    } else if (blocked8()) {
#pragma omp parallel for schedule(static)
      for (int64_t cb = 0; cb < c / 8; ++cb)
        for (int64_t in = 0; in < n; ++in)
          sums8(x + offset0 + in * s[0] + cb * s[1], h * w, sum + cb * 8, sq + cb * 8);
    } else if (plain()) {
#pragma omp parallel for schedule(static)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t in = 0; in < n; ++in) sums_run(x + offset0 + in * s[0] + ch * s[1], h * w, sum + ch, sq + ch);
    } else {
      each([&](int64_t off, int64_t ch) {
        const double v = ld(x + off);
        sum[ch] += v;
        sq[ch] += v * v;
      });
    }
  }

  // sdy[c] = Σdy, sdyx[c] = Σdy·(x − m[c]) in double (dy masked by y > 0 when y is given),
  // each channel summed by one thread in sample order (independent of the thread count).
  template <class T>
  void grad_sums(const T* dy, const T* x, const T* y, const float* m, double* sdy, double* sdyx) const {
    std::fill(sdy, sdy + c, 0.0);
    std::fill(sdyx, sdyx + c, 0.0);
    auto at = [&](const T* p, int64_t o) { return p ? p + o : nullptr; };
    if (blocked16() || blocked8()) {
#pragma omp parallel for schedule(static)
      for (int64_t cb = 0; cb < c / blk; ++cb)
        for (int64_t in = 0; in < n; ++in) {
          const int64_t o = offset0 + in * s[0] + cb * s[1];
          if (blk == 16) grad_sums16(dy + o, x + o, at(y, o), h * w, m + cb * 16, sdy + cb * 16, sdyx + cb * 16);
          else grad_sums8(dy + o, x + o, at(y, o), h * w, m + cb * 8, sdy + cb * 8, sdyx + cb * 8);
        }
    } else if (plain()) {
#pragma omp parallel for schedule(static)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t in = 0; in < n; ++in) {
          const int64_t o = offset0 + in * s[0] + ch * s[1];
          grad_sums1(dy + o, x + o, at(y, o), h * w, m + ch, sdy + ch, sdyx + ch);
        }
    } else {
      each([&](int64_t off, int64_t ch) {
        const float d = y && !(ld(y + off) > 0.f) ? 0.f : ld(dy + off);
        sdy[ch] += d;
        sdyx[ch] += static_cast<double>(d) * (static_cast<double>(ld(x + off)) - m[ch]);
      });
    }
  }

  // dx = a[c]·dy' − b[c] − c[c]·(x − m[c]), dy' = dy masked by y > 0 when y is given.
  template <class T>
  void bwd_dx(T* dx, const T* dy, const T* x, const T* y, const float* a, const float* b, const float* cc,
              const float* m) const {
    auto at = [&](const T* p, int64_t o) { return p ? p + o : nullptr; };
    if (blocked16() || blocked8()) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in)
        for (int64_t cb = 0; cb < c / blk; ++cb) {
          const int64_t o = offset0 + in * s[0] + cb * s[1], k = cb * blk;
          if (blk == 16) bwd_dx16(dx + o, dy + o, x + o, at(y, o), h * w, a + k, b + k, cc + k, m + k);
          else bwd_dx8(dx + o, dy + o, x + o, at(y, o), h * w, a + k, b + k, cc + k, m + k);
        }
    } else if (plain()) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in)
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t o = offset0 + in * s[0] + ch * s[1];
          bwd_dx1(dx + o, dy + o, x + o, at(y, o), h * w, a + ch, b + ch, cc + ch, m + ch);
        }
    } else {
      each([&](int64_t off, int64_t ch) {
        const float v = ld(dy + off);
        const float d = y ? (ld(y + off) > 0.f ? v : 0.f) : v;
        st(dx + off, a[ch] * d - b[ch] - cc[ch] * (ld(x + off) - m[ch]));
      });
    }
  }

  // dx −= k0[c] + k1[c]·(x − m[c]).
  template <class T>
  void correct(T* dx, const T* x, const float* k0, const float* k1, const float* m) const {
    if (blocked16()) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in)
        for (int64_t cb = 0; cb < c / 16; ++cb) {
          const int64_t o = offset0 + in * s[0] + cb * s[1];
          correct16(dx + o, x + o, h * w, k0 + cb * 16, k1 + cb * 16, m + cb * 16);
        }
    } else if (blocked8()) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in)
        for (int64_t cb = 0; cb < c / 8; ++cb) {
          const int64_t o = offset0 + in * s[0] + cb * s[1];
          correct8(dx + o, x + o, h * w, k0 + cb * 8, k1 + cb * 8, m + cb * 8);
        }
    } else if (plain()) {
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t in = 0; in < n; ++in)
        for (int64_t ch = 0; ch < c; ++ch) {
          const int64_t o = offset0 + in * s[0] + ch * s[1];
          correct_run(dx + o, x + o, h * w, k0[ch], k1[ch], m[ch]);
        }
    } else {
      each([&](int64_t off, int64_t ch) { st(dx + off, ld(dx + off) - (k0[ch] + k1[ch] * (ld(x + off) - m[ch]))); });
    }
  }

  // f(offset, channel) for every element (any supported layout).
  template <class F>
  void each(F&& f) const {
    const int64_t blocks = (c + blk - 1) / blk;
    for (int64_t in = 0; in < n; ++in)
      for (int64_t cb = 0; cb < blocks; ++cb) {
        const int64_t c0 = cb * blk, jn = std::min(blk, c - c0);
        for (int64_t ih = 0; ih < h; ++ih)
          for (int64_t iw = 0; iw < w; ++iw) {
            const int64_t base = offset0 + in * s[0] + cb * s[1] + ih * s[2] + iw * s[3];
            for (int64_t j = 0; j < jn; ++j) f(base + j, c0 + j);
          }
      }
  }
};

class BnExec : public Exec {
 public:
  BnExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* relu_out) : node_(node), in_(in) {
    using namespace dnnl;
    using nf = normalization_flags;
    out_ = out;
    relu_mask_ = relu_out != nullptr;
    if (relu_out) {  // Node::bn_relu: relu(bn(x)) into the relu's output; ours is never materialised
      relu_out->alloc(in->md, env.eng);
      out->alloc(in->md, env.eng, relu_out->data_ptr(), relu_out->needs_diff ? relu_out->diff_ptr() : nullptr);
    } else {
      out->alloc(in->md, env.eng);
    }
    const auto& gp = env.graph->params;
    const md_t c_md({node.in.c}, dt::f32, tag::x);
    auto pmem = [&](int i, float* base) { return memory(c_md, env.eng, base + gp[node.params[i]].info.offset); };
    memory scale = pmem(0, env.params), shift = pmem(1, env.params);
    memory dscale = pmem(0, env.grads), dshift = pmem(1, env.grads);
    gamma_ = env.params + gp[node.params[0]].info.offset;
    beta_ = env.params + gp[node.params[1]].info.offset;
    dgamma_ = env.grads + gp[node.params[0]].info.offset;
    dbeta_ = env.grads + gp[node.params[1]].info.offset;
    running_mean_ = env.params + gp[node.params[2]].info.offset;
    running_var_ = env.params + gp[node.params[3]].info.offset;
    tracked_ = env.params + gp[node.params[4]].info.offset;
    memory rmean = pmem(2, env.params), rvar = pmem(3, env.params);
    channels_ = node.in.c;
    count_ = env.n * (node.in.volume() ? node.in.d : 1) * node.in.h * node.in.w;

    memory diff_src, ws;
    if (in->needs_diff) {
      diff_src = in->diff_target(node.index);
    } else {
      dummy_.resize(in->md.get_size());
      diff_src = memory(in->md, env.eng, dummy_.data());
    }
    // The training forward/backward pair, the inference forward and the --sync-bn pair
    // differ only in flags and in which statistics they read or write.
    auto bind_forward = [&](auto& prim, const batch_normalization_forward::primitive_desc& pd, const memory& m,
                            const memory& v) {
      prim.set(batch_normalization_forward(pd));
      prim.arg(DNNL_ARG_SRC, in->mem);
      prim.arg(DNNL_ARG_DST, out->mem);
      prim.arg(DNNL_ARG_SCALE, scale);
      prim.arg(DNNL_ARG_SHIFT, shift);
      prim.arg(DNNL_ARG_MEAN, m);
      prim.arg(DNNL_ARG_VARIANCE, v);
      if (relu_out && &prim != &eval_) prim.arg(DNNL_ARG_WORKSPACE, ws);  // training forwards
    };
    auto bind_backward = [&](auto& prim, const batch_normalization_backward::primitive_desc& pd, const memory& m,
                             const memory& v) {
      prim.set(batch_normalization_backward(pd));
      prim.arg(DNNL_ARG_SRC, in->mem);
      prim.arg(DNNL_ARG_MEAN, m);
      prim.arg(DNNL_ARG_VARIANCE, v);
      prim.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
      prim.arg(DNNL_ARG_SCALE, scale);
      prim.arg(DNNL_ARG_SHIFT, shift);
      prim.arg(DNNL_ARG_DIFF_SCALE, dscale);
      prim.arg(DNNL_ARG_DIFF_SHIFT, dshift);
      prim.arg(DNNL_ARG_DIFF_SRC, diff_src);
      if (relu_out) prim.arg(DNNL_ARG_WORKSPACE, ws);
    };

    // With bn_relu the relu's mask (one bit per element) is the workspace, written by the
    // training forward and read by the backward; the plain and --sync-bn pairs share it.
    const auto flags = nf::use_scale | nf::use_shift | (relu_out ? nf::fuse_norm_relu : nf::none);
    batch_normalization_forward::primitive_desc fpd({prop_kind::forward_training, in->md, eps_, flags}, env.eng);
    if (relu_out) {
      ws_buf_.resize(fpd.workspace_desc().get_size());
      ws = memory(fpd.workspace_desc(), env.eng, ws_buf_.data());
    }
    mean_buf_.resize(fpd.mean_desc().get_size());
    var_buf_.resize(fpd.variance_desc().get_size());
    memory mean(fpd.mean_desc(), env.eng, mean_buf_.data()), var(fpd.variance_desc(), env.eng, var_buf_.data());
    // CNNSCALE_BN_ONEDNN=1: oneDNN's own float statistics and backward (the path before
    // issue 49's accuracy change), for A/B timing only.
    const char* od = std::getenv("CNNSCALE_BN_ONEDNN");
    onednn_local_ = od && *od && std::string(od) != "0";
    if (onednn_local_) {
      bind_forward(fwd_, fpd, mean, var);
      bind_backward(bwd_, {{prop_kind::backward, in->md, in->md, eps_, flags}, env.eng, fpd}, mean, var);
    }

    const auto gflags = nf::use_global_stats | flags;
    bind_forward(eval_, {{prop_kind::forward_inference, in->md, eps_, gflags}, env.eng}, rmean, rvar);

    // --sync-bn: the same primitives with the statistics as inputs (the global ones).
    batch_normalization_forward::primitive_desc gfpd({prop_kind::forward_training, in->md, eps_, gflags}, env.eng);
    gmean_buf_.resize(gfpd.mean_desc().get_size());
    gvar_buf_.resize(gfpd.variance_desc().get_size());
    memory gmean(gfpd.mean_desc(), env.eng, gmean_buf_.data()), gvar(gfpd.variance_desc(), env.eng, gvar_buf_.data());
    bind_forward(gfwd_, gfpd, gmean, gvar);
    bind_backward(gbwd_, {{prop_kind::backward, in->md, in->md, eps_, gflags}, env.eng, gfpd}, gmean, gvar);
  }

  void forward(const RunCtx& c) override {
    if (!c.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
    synced_ = static_cast<bool>(c.step->sum_across_ranks);
    double n_total = static_cast<double>(count_);
    const float* mean = mean_buf_.f();
    const float* var = var_buf_.f();
    // The statistics are summed here in double, also without --sync-bn (then over this
    // rank's batch only), and oneDNN normalises with them (use_global_stats): oneDNN 2.6's
    // own forward_training sums in float, and over thousands of rows per channel its output
    // came out 20–250× further from float64 than torch's float32 (which accumulates in
    // double): per layer, max |y − y64| / max |y64| 1.3e-6 and 2.1e-5 vs torch 6.6e-8 and
    // 8.3e-8 (the two batch norms of "conv(16,7,2,3) bn relu bn relu ...", batch 8, 64×64,
    // 8192 rows per channel).
    if (onednn_local_ && !synced_) {
      fwd_.run(*c.stream);
    } else {
      n_total = global_statistics(c, synced_);
      gfwd_.run(*c.stream);
      mean = gmean_buf_.f();
      var = gvar_buf_.f();
    }
    // Running statistics as PyTorch: unbiased variance, the node's momentum (0.1 but MNASNet).
    const float momentum = static_cast<float>(node_.momentum);
    const float unbias = n_total > 1 ? static_cast<float>(n_total / (n_total - 1)) : 1.f;
    bool finite = true;
    for (int i = 0; i < channels_; ++i) {
      running_mean_[i] = (1.f - momentum) * running_mean_[i] + momentum * mean[i];
      running_var_[i] = (1.f - momentum) * running_var_[i] + momentum * var[i] * unbias;
      finite &= std::isfinite(mean[i]) && std::isfinite(var[i]) && std::isfinite(gamma_[i]) && std::isfinite(beta_[i]);
    }
    // A NaN or Inf anywhere in the input makes its channel's mean or variance NaN/Inf:
    // the net learns it from C numbers instead of a pass over the input (net.cpp). With
    // those and γ, β finite, the output is finite too, so the ReLU after a batch-norm
    // needs no scan of its input.
    non_finite_ = !finite;
    *tracked_ += 1.f;
  }
  bool saw_non_finite() const override { return non_finite_; }
  void forward_eval(const RunCtx& c) override { eval_.run(*c.stream); }

  void backward_params(const RunCtx& c) override {
    if (!synced_) {  // ours: the sums here, dx in backward_data (local_data_gradient)
      if (onednn_local_) bwd_.run(*c.stream);
      else exact_param_gradients();
      return;
    }
    gbwd_.run(*c.stream);
    exact_param_gradients();
    // This rank's Σdy·x̂ and Σdy, taken before the grad-ready hook hands the gradient
    // buffer to the allreduce.
    if (in_->needs_diff)
      for (int i = 0; i < channels_; ++i) bmsg_[i] = dgamma_[i], bmsg_[channels_ + i] = dbeta_[i];
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;  // the network input: no data gradient, no sync (same on every rank)
    if (synced_) correct_data_gradient(c);
    else if (!onednn_local_) local_data_gradient();
    in_->diff_done(node_.index);
  }

 private:
  // The forward's statistics: local sums (→ global sums with --sync-bn, `across`) →
  // gmean_buf_/gvar_buf_ (biased variance) and inv_std_. Returns the (global) count.
  double global_statistics(const RunCtx& c, bool across) {
    const int C = channels_;
    fmsg_.assign(static_cast<size_t>(2 * C + 1), 0.0);
    const ChannelWalk walk(in_->md);
    const void* x = in_->mem.get_data_handle();
    double* sum = fmsg_.data();
    double* sq = fmsg_.data() + C;
    if (in_->md.data_type() == dt::bf16) walk.sums(static_cast<const uint16_t*>(x), sum, sq);
    else walk.sums(static_cast<const float*>(x), sum, sq);
    fmsg_[static_cast<size_t>(2 * C)] = static_cast<double>(count_);
    if (across) c.step->sum_across_ranks(fmsg_.data(), fmsg_.size());
    const double n = fmsg_[static_cast<size_t>(2 * C)];
    mean_.resize(static_cast<size_t>(C));
    inv_std_.resize(static_cast<size_t>(C));
    bmsg_.assign(static_cast<size_t>(2 * C), 0.0);
    float* gm = gmean_buf_.f();
    float* gv = gvar_buf_.f();
    for (int i = 0; i < C; ++i) {
      const double m = sum[i] / n;
      const double v = std::max(0.0, sq[i] / n - m * m);
      gm[i] = static_cast<float>(m);
      gv[i] = static_cast<float>(v);
      mean_[i] = gm[i];  // what oneDNN normalised with
      inv_std_[i] = 1.0 / std::sqrt(static_cast<double>(gv[i]) + static_cast<double>(eps_));
    }
    global_count_ = n;
    return n;
  }

  // The weight and bias gradients, Σdy·x̂ and Σdy (dy through the fused relu's mask), summed
  // here in double (float over 32 positions, then double), written as the gradients (with
  // --sync-bn over oneDNN's). oneDNN 2.6's backward sums them in float: with thousands of rows
  // per channel its Σdy·x̂, a sum that cancels, came out up to 10× further from float64 than
  // torch's float32 (which accumulates in double: at::acc_type), e.g. densenet121's
  // features.norm0.weight at batch 8, 64×64: 6.1e-3 vs torch 6.5e-4; the spec
  // "conv(16,7,2,3) bn relu maxpool(3,2,1) bn relu conv(8,1) ..." 1.7e-3 vs 2.7e-5; and those
  // float sums went into its dx too. So the local backward is ours (these sums, then
  // local_data_gradient: one pass each, as oneDNN's two). With the statistics of this step's
  // forward (global_statistics: mean_, inv_std_; local or --sync-bn's).
  void exact_param_gradients() {
    const int C = channels_;
    sdy_.resize(static_cast<size_t>(C));
    sdyx_.resize(static_cast<size_t>(C));
    const ChannelWalk walk(in_->md);
    const void* x = in_->mem.get_data_handle();
    const void* dy = out_->diff_mem.get_data_handle();
    const void* y = relu_mask_ ? out_->mem.get_data_handle() : nullptr;
    if (in_->md.data_type() == dt::bf16)
      walk.grad_sums(static_cast<const uint16_t*>(dy), static_cast<const uint16_t*>(x),
                     static_cast<const uint16_t*>(y), mean_.data(), sdy_.data(), sdyx_.data());
    else
      walk.grad_sums(static_cast<const float*>(dy), static_cast<const float*>(x), static_cast<const float*>(y),
                     mean_.data(), sdy_.data(), sdyx_.data());
    for (int i = 0; i < C; ++i) {
      dgamma_[i] = static_cast<float>(sdyx_[i] * inv_std_[i]);
      dbeta_[i] = static_cast<float>(sdy_[i]);
    }
  }

  // dx = γσ⁻¹·(dy' − Σdy'/M − (x − m)·σ⁻²·Σdy'·(x − m)/M), dy' = dy through the relu's
  // mask (bn_relu), with the exact sums; into the input's gradient target.
  void local_data_gradient() {
    const int C = channels_;
    k0_.resize(static_cast<size_t>(C));
    k1_.resize(static_cast<size_t>(C));
    k2_.resize(static_cast<size_t>(C));
    const double M = static_cast<double>(count_);
    for (int i = 0; i < C; ++i) {
      const double is = inv_std_[i], g = static_cast<double>(gamma_[i]) * is;
      k0_[i] = static_cast<float>(g);
      k1_[i] = static_cast<float>(g * sdy_[i] / M);
      k2_[i] = static_cast<float>(g * is * is * sdyx_[i] / M);
    }
    const ChannelWalk walk(in_->md);
    const void* x = in_->mem.get_data_handle();
    const void* dy = out_->diff_mem.get_data_handle();
    const void* y = relu_mask_ ? out_->mem.get_data_handle() : nullptr;
    void* dx = in_->diff_target_ptr(node_.index);
    if (in_->md.data_type() == dt::bf16)
      walk.bwd_dx(static_cast<uint16_t*>(dx), static_cast<const uint16_t*>(dy), static_cast<const uint16_t*>(x),
                  static_cast<const uint16_t*>(y), k0_.data(), k1_.data(), k2_.data(), mean_.data());
    else
      walk.bwd_dx(static_cast<float*>(dx), static_cast<const float*>(dy), static_cast<const float*>(x),
                  static_cast<const float*>(y), k0_.data(), k1_.data(), k2_.data(), mean_.data());
  }

  // Backward of --sync-bn: dx = γσ⁻¹·(dy − (Σdy + x̂·Σdy·x̂)/N) with global sums; oneDNN
  // wrote the first term.
  void correct_data_gradient(const RunCtx& c) {
    const int C = channels_;
    c.step->sum_across_ranks(bmsg_.data(), bmsg_.size());
    const double* sum_dy_xhat = bmsg_.data();
    const double* sum_dy = bmsg_.data() + C;
    k0_.resize(static_cast<size_t>(C));
    k1_.resize(static_cast<size_t>(C));
    for (int i = 0; i < C; ++i) {
      const double g = static_cast<double>(gamma_[i]) * inv_std_[i] / global_count_;
      // dx −= g·Σdy + g·σ⁻¹·Σdy·x̂·(x − mean)  =  k0 + k1·(x − mean)
      k0_[i] = static_cast<float>(g * sum_dy[i]);
      k1_[i] = static_cast<float>(g * inv_std_[i] * sum_dy_xhat[i]);
    }
    const ChannelWalk walk(in_->md);
    const void* x = in_->mem.get_data_handle();
    void* dx = in_->diff_target_ptr(node_.index);
    const float* k0 = k0_.data();
    const float* k1 = k1_.data();
    const float* m = mean_.data();
    if (in_->md.data_type() == dt::bf16)
      walk.correct(static_cast<uint16_t*>(dx), static_cast<const uint16_t*>(x), k0, k1, m);
    else
      walk.correct(static_cast<float*>(dx), static_cast<const float*>(x), k0, k1, m);
  }

  const Node& node_;
  Tensor* in_;
  Tensor* out_ = nullptr;
  bool relu_mask_ = false;  // bn_relu: dy counts where the relu's output is > 0
  const float *gamma_ = nullptr, *beta_ = nullptr;
  const float eps_ = static_cast<float>(node_.eps);  // PyTorch's eps (1e-5 but MobileNetV3)
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr, *tracked_ = nullptr;
  bool non_finite_ = false;
  int channels_ = 0;
  int64_t count_ = 0;
  Buffer mean_buf_, var_buf_, gmean_buf_, gvar_buf_, dummy_, ws_buf_;
  Call fwd_, bwd_, eval_, gfwd_, gbwd_;
  bool onednn_local_ = false;  // CNNSCALE_BN_ONEDNN
  // --sync-bn state of the current step.
  bool synced_ = false;
  double global_count_ = 0;
  std::vector<double> fmsg_, bmsg_, inv_std_;
  // Exact weight and bias gradient sums (exact_param_gradients) and oneDNN's float ones.
  std::vector<double> sdy_, sdyx_;
  std::vector<float> mean_, k0_, k1_, k2_;
};

}  // namespace

std::unique_ptr<Exec> make_bn(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* relu_out) {
  return std::make_unique<BnExec>(node, in, out, env, relu_out);
}

}  // namespace cnnscale::nn
