// conv_depthwise.cpp — the weight gradient of a depthwise convolution (groups = in = out
// channels) for kernels oneDNN 2.6 has no direct kernel for: its jit_dw backward-weights takes
// 3×3 only on AVX2, and the 5×5 of EfficientNet and 7×7 of ConvNeXt fell to x64:gemm:jit on
// plain layouts (im2col per channel) at under 1 GFLOP/s: 21 % of convnext_tiny's step (1837 ms
// of 8.06 s oneDNN time, batch 16, 224², AMD EPYC AVX2), 40 % of efficientnet_b0's.
// dW[c][ky][kx] = Σ_{n,oy,ox} dy[n,c,oy,ox] · x[n,c,oy·s − p + ky, ox·s − p + kx], read in the
// layouts the forward used (plain NCHW or oneDNN's nChw8c / nChw16c), summed per output row in
// float and the rows in double (per lane, fixed order: the same bits every run), written in
// PyTorch's C × 1 × k × k.
#include <cstring>
#include <vector>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v8f __attribute__((vector_size(32), aligned(4)));

[[gnu::always_inline]] inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One output row of one channel block against one kernel row: for each kx, the B lanes of
// Σ_ox dy[ox] · x[ox·s − p + kx] (valid ox only), added to acc[kx·B + lane] in double.
// K > 0 (the kernel width known at compile time, B ≥ 8): the K sums are K independent
// accumulators over one pass of ox (the interior, where every kx is inside the row, then the
// edges): a single accumulator per kx made each step wait on the previous add.
template <int B, int K>
[[gnu::always_inline]] inline void row_kernel(const float* dy, const float* x, int64_t ow, int64_t iw, int k, int s,
                                              int p, double* acc) {
  if constexpr (K > 0 && B >= 8) {
    constexpr int V = B / 8;
    v8f f[K][V] = {};
    auto at = [&](int64_t ox, int kx) {
      const float* xp = x + (ox * s - p + kx) * B;
      const float* dp = dy + ox * B;
      for (int v = 0; v < V; ++v) f[kx][v] += load8(dp + 8 * v) * load8(xp + 8 * v);
    };
    // interior: 0 <= ox·s − p and ox·s − p + K − 1 < iw
    int64_t lo = p > 0 ? (p + s - 1) / s : 0, hi = iw - K + p >= 0 ? (iw - K + p) / s + 1 : 0;
    if (hi > ow) hi = ow;
    if (lo > hi) lo = hi;
    for (int64_t ox = lo; ox < hi; ++ox)
      for (int kx = 0; kx < K; ++kx) at(ox, kx);
    for (int64_t ox = 0; ox < ow; ++ox) {
      if (ox == lo) ox = hi;
      if (ox >= ow) break;
      for (int kx = 0; kx < K; ++kx) {
        const int64_t ix = ox * s - p + kx;
        if (ix >= 0 && ix < iw) at(ox, kx);
      }
    }
    for (int kx = 0; kx < K; ++kx)
      for (int v = 0; v < V; ++v)
        for (int l = 0; l < 8; ++l) acc[kx * B + 8 * v + l] += f[kx][v][l];
    return;
  }
  for (int kx = 0; kx < k; ++kx) {
    // valid ox: 0 <= ox·s − p + kx < iw
    int64_t lo = p - kx > 0 ? (p - kx + s - 1) / s : 0;
    int64_t hi = (iw - 1 + p - kx) >= 0 ? (iw - 1 + p - kx) / s + 1 : 0;
    if (hi > ow) hi = ow;
    if constexpr (B == 1) {
      float f = 0;
      for (int64_t ox = lo; ox < hi; ++ox) f += dy[ox] * x[ox * s - p + kx];
      acc[kx] += f;
    } else {
      constexpr int V = B / 8;
      v8f f[V] = {};
      for (int64_t ox = lo; ox < hi; ++ox) {
        const float* xp = x + (ox * s - p + kx) * B;
        const float* dp = dy + ox * B;
        for (int v = 0; v < V; ++v) f[v] += load8(dp + 8 * v) * load8(xp + 8 * v);
      }
      for (int v = 0; v < V; ++v)
        for (int l = 0; l < 8; ++l) acc[kx * B + 8 * v + l] += f[v][l];
    }
  }
}

#define CNNSCALE_DW_CLONE __attribute__((target_clones("avx512f", "arch=haswell", "default")))

template <int B, int K>
[[gnu::always_inline]] inline void dw_bwd_w_k(const float* x, const float* dy, int64_t N, int64_t blocks, int64_t ih,
                                            int64_t iw, int64_t oh, int64_t ow, int64_t xs_n, int64_t xs_c,
                                            int64_t ds_n, int64_t ds_c, int k, int s, int p, double* acc) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < blocks; ++cb) {
      const float* x0 = x + n * xs_n + cb * xs_c;
      const float* d0 = dy + n * ds_n + cb * ds_c;
      double* a = acc + cb * k * k * B;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int ky = 0; ky < k; ++ky) {
          const int64_t iy = oy * s - p + ky;
          if (iy < 0 || iy >= ih) continue;
          row_kernel<B, K>(d0 + oy * ow * B, x0 + iy * iw * B, ow, iw, k, s, p, a + ky * k * B);
        }
    }
}

template <int B>
[[gnu::always_inline]] inline void dw_bwd_w(const float* x, const float* dy, int64_t N, int64_t blocks, int64_t ih,
                                            int64_t iw, int64_t oh, int64_t ow, int64_t xs_n, int64_t xs_c,
                                            int64_t ds_n, int64_t ds_c, int k, int s, int p, double* acc) {
  switch (k) {
    case 3: return dw_bwd_w_k<B, 3>(x, dy, N, blocks, ih, iw, oh, ow, xs_n, xs_c, ds_n, ds_c, k, s, p, acc);
    case 5: return dw_bwd_w_k<B, 5>(x, dy, N, blocks, ih, iw, oh, ow, xs_n, xs_c, ds_n, ds_c, k, s, p, acc);
    case 7: return dw_bwd_w_k<B, 7>(x, dy, N, blocks, ih, iw, oh, ow, xs_n, xs_c, ds_n, ds_c, k, s, p, acc);
    default: return dw_bwd_w_k<B, 0>(x, dy, N, blocks, ih, iw, oh, ow, xs_n, xs_c, ds_n, ds_c, k, s, p, acc);
  }
}

CNNSCALE_DW_CLONE void dw_bwd_w1(const float* x, const float* dy, int64_t N, int64_t C, int64_t ih, int64_t iw,
                                 int64_t oh, int64_t ow, int k, int s, int p, double* acc) {
  dw_bwd_w<1>(x, dy, N, C, ih, iw, oh, ow, C * ih * iw, ih * iw, C * oh * ow, oh * ow, k, s, p, acc);
}
CNNSCALE_DW_CLONE void dw_bwd_w8(const float* x, const float* dy, int64_t N, int64_t blocks, int64_t ih, int64_t iw,
                                 int64_t oh, int64_t ow, int k, int s, int p, double* acc) {
  dw_bwd_w<8>(x, dy, N, blocks, ih, iw, oh, ow, blocks * ih * iw * 8, ih * iw * 8, blocks * oh * ow * 8, oh * ow * 8,
              k, s, p, acc);
}
CNNSCALE_DW_CLONE void dw_bwd_w16(const float* x, const float* dy, int64_t N, int64_t blocks, int64_t ih, int64_t iw,
                                  int64_t oh, int64_t ow, int k, int s, int p, double* acc) {
  dw_bwd_w<16>(x, dy, N, blocks, ih, iw, oh, ow, blocks * ih * iw * 16, ih * iw * 16, blocks * oh * ow * 16,
               oh * ow * 16, k, s, p, acc);
}

}  // namespace

bool depthwise_backward_weights_supported(const md_t& src, const md_t& diff_dst) {
  const int b = channel_block(src);
  return b != 0 && b == channel_block(diff_dst);
}

void depthwise_backward_weights(const dnnl::memory& src, const dnnl::memory& diff_dst, int k, int stride, int pad,
                                float* dw, std::vector<double>& acc) {
  const md_t sm = src.get_desc(), dm = diff_dst.get_desc();
  const int B = channel_block(sm);
  if (B == 0 || B != channel_block(dm)) internal_error("depthwise_backward_weights: unsupported layout");
  const dnnl_memory_desc_t &s = sm.data, &d = dm.data;
  const int64_t N = s.dims[0], C = s.dims[1], ih = s.dims[2], iw = s.dims[3], oh = d.dims[2], ow = d.dims[3];
  const int64_t blocks = B == 1 ? C : s.padded_dims[1] / B;
  acc.assign(static_cast<size_t>(blocks * B * k * k), 0.0);
  const float* x = static_cast<const float*>(src.get_data_handle()) + s.offset0;
  const float* dy = static_cast<const float*>(diff_dst.get_data_handle()) + d.offset0;
  if (B == 1) dw_bwd_w1(x, dy, N, C, ih, iw, oh, ow, k, stride, pad, acc.data());
  else if (B == 8) dw_bwd_w8(x, dy, N, blocks, ih, iw, oh, ow, k, stride, pad, acc.data());
  else dw_bwd_w16(x, dy, N, blocks, ih, iw, oh, ow, k, stride, pad, acc.data());
  // acc: [block][ky][kx][lane] → dw: [c][ky][kx]
  const int64_t kk = int64_t{k} * k;
  for (int64_t c = 0; c < C; ++c) {
    const int64_t cb = c / B, l = c % B;
    for (int64_t t = 0; t < kk; ++t) dw[c * kk + t] = static_cast<float>(acc[static_cast<size_t>((cb * kk + t) * B + l)]);
  }
}

}  // namespace cnnscale::nn
