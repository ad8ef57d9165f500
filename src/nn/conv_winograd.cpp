// conv_winograd.cpp — 3×3, stride-1 fp32 convolutions (padding 0, 1 or 2) by Winograd's minimal filtering
// F(2×2, 3×3) (Lavin & Gray 2016) on CPUs where oneDNN 2.6 runs its direct `jit:avx2`
// kernels: forward, backward-data and backward-weights, each as 16 sgemm calls
// (dnnl_sgemm) between transformed 4×4 tiles, in oneDNN's nChw8c layout.
//
// Why: on AVX2 oneDNN 2.6 has no Winograd kernel (its winograd is AVX-512 only), and
// ResNet-50's step is 92 % convolutions, of which the 3×3 stride-1 ones are ~40 % of the
// FLOPs in each direction; PyTorch 1.13 runs the same oneDNN 2.6 kernels. F(2×2, 3×3) does
// 16 multiplies per 2×2 output tile and channel pair instead of 36 (2.25× fewer), at the
// cost of four small linear transforms (additions only, and halves for the weights).
//
// Numerics: the transforms add and subtract neighbouring values before the products, so the
// rounding differs from the direct sum (docs/models.md, "How the gradients are checked
// against PyTorch": tests/nn/grad_torch.sh, resnet_torchvision and the zoo's float64 checks
// run this path under ONEDNN_MAX_CPU_ISA=AVX2 on any machine). Deterministic: fixed tile
// blocks and sgemm calls, the same bits every run on one machine and thread count.
//
// The transforms (d: 4×4 input tile, g: 3×3 filter, y: 2×2 output tile; Lavin's matrices):
//   forward         y  = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
//   backward-data   a forward with dY as input, padding 2 − pad, and the filter turned by
//                   180° with its in/out channels swapped
//   backward-weights dW = Gᵀ [ Σ_tiles (A dy Aᵀ) ⊙ (Bᵀ d B) ] G   (the transpose of the forward)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

#pragma GCC diagnostic ignored "-Wpsabi"
typedef __m256 v8f;  // 8 channels of one pixel (nChw8c's block); GCC's vector operators apply
#define WINO_TARGET __attribute__((target("avx2,fma")))

// Unaligned 32-byte loads and stores as single instructions (a memcpy into a vector made
// two 16-byte moves through the stack and a stalled reload: 4× slower transforms).
WINO_TARGET inline v8f ld(const float* p) { return _mm256_loadu_ps(p); }
WINO_TARGET inline void st(float* p, v8f v) { _mm256_storeu_ps(p, v); }

// The stride between the 16 ξ-planes of transformed tiles, filters or sums: the plane's
// floats and 64 bytes more, so that a tile's 16 values (one per plane) do not all fall in
// the same cache set (a power-of-two stride made the input transform take as long as its
// sgemm calls).
inline int64_t plane(int64_t floats) { return floats + 16; }

// One input tile of 8 channels at (top-left y0, x0), zero outside the h×w image, into
// v[16] = Bᵀ d B, stored at out + ξ·xi_stride.
WINO_TARGET void input_tile(const float* img, int64_t h, int64_t w, int64_t y0, int64_t x0, float* out,
                            int64_t xi_stride) {
  v8f d[4][4];
  const v8f z = {};
  if (y0 >= 0 && x0 >= 0 && y0 + 4 <= h && x0 + 4 <= w) {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) d[r][c] = ld(img + ((y0 + r) * w + x0 + c) * 8);
  } else {
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        const int64_t y = y0 + r, x = x0 + c;
        d[r][c] = (y >= 0 && y < h && x >= 0 && x < w) ? ld(img + (y * w + x) * 8) : z;
      }
  }
  v8f t[4][4];
  for (int c = 0; c < 4; ++c) {  // Bᵀ d
    t[0][c] = d[0][c] - d[2][c];
    t[1][c] = d[1][c] + d[2][c];
    t[2][c] = d[2][c] - d[1][c];
    t[3][c] = d[1][c] - d[3][c];
  }
  for (int r = 0; r < 4; ++r) {  // (Bᵀ d) B
    st(out + (r * 4 + 0) * xi_stride, t[r][0] - t[r][2]);
    st(out + (r * 4 + 1) * xi_stride, t[r][1] + t[r][2]);
    st(out + (r * 4 + 2) * xi_stride, t[r][2] - t[r][1]);
    st(out + (r * 4 + 3) * xi_stride, t[r][1] - t[r][3]);
  }
}

// One output-gradient tile of 8 channels (2×2 at y0, x0, zero outside oh×ow) into A dy Aᵀ.
WINO_TARGET void dy_tile(const float* img, int64_t h, int64_t w, int64_t y0, int64_t x0, float* out,
                         int64_t xi_stride) {
  v8f d[2][2];
  const v8f z = {};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 2; ++c) {
      const int64_t y = y0 + r, x = x0 + c;
      d[r][c] = (y < h && x < w) ? ld(img + (y * w + x) * 8) : z;
    }
  v8f t[4][2];
  for (int c = 0; c < 2; ++c) {  // A dy, A = [1 0; 1 1; 1 −1; 0 −1]
    t[0][c] = d[0][c];
    t[1][c] = d[0][c] + d[1][c];
    t[2][c] = d[0][c] - d[1][c];
    t[3][c] = -d[1][c];
  }
  for (int r = 0; r < 4; ++r) {  // (A dy) Aᵀ
    st(out + (r * 4 + 0) * xi_stride, t[r][0]);
    st(out + (r * 4 + 1) * xi_stride, t[r][0] + t[r][1]);
    st(out + (r * 4 + 2) * xi_stride, t[r][0] - t[r][1]);
    st(out + (r * 4 + 3) * xi_stride, -t[r][1]);
  }
}

// One output tile of 8 channels from m (ξ-strided): y = Aᵀ m A (+ bias), the part inside
// oh×ow written (add: added to what is there).
WINO_TARGET void output_tile(const float* m, int64_t xi_stride, const float* bias, float* img, int64_t h, int64_t w,
                             int64_t y0, int64_t x0) {
  v8f v[4][4];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) v[r][c] = ld(m + (r * 4 + c) * xi_stride);
  v8f s[2][4];
  for (int c = 0; c < 4; ++c) {  // Aᵀ m, Aᵀ = [1 1 1 0; 0 1 −1 −1]
    s[0][c] = v[0][c] + v[1][c] + v[2][c];
    s[1][c] = v[1][c] - v[2][c] - v[3][c];
  }
  v8f b = {};
  if (bias) b = ld(bias);
  for (int r = 0; r < 2; ++r) {
    const int64_t y = y0 + r;
    if (y >= h) break;
    const v8f o0 = s[r][0] + s[r][1] + s[r][2] + b;
    const v8f o1 = s[r][1] - s[r][2] - s[r][3] + b;
    st(img + (y * w + x0) * 8, o0);
    if (x0 + 1 < w) st(img + (y * w + x0 + 1) * 8, o1);
  }
}

// U[ξ][ci][co] = (G g Gᵀ)[ξ] for the filter g = w[co][ci] (PyTorch's out × in × 3 × 3), planes
// plane(ci·co) apart; flip: the backward-data filter, g[i][j] = w[ci'][co'][2 − i][2 − j] with
// in/out swapped (then `ci` runs over the layer's outputs and `co` over its inputs). 8 co at a
// time, one per lane: each of the 9 taps a gather, each ξ one 8-float store (the scalar loop
// took 10–25 ms for 512 × 512 filters, as long as the layer's forward products).
WINO_TARGET void weight_transform(const float* w, int64_t out_c, int64_t in_c, bool flip, float* U) {
  const int64_t ci_n = flip ? out_c : in_c, co_n = flip ? in_c : out_c;
  const int64_t xs = plane(ci_n * co_n);
  // lane l (co = co0 + l) reads tap (i, k) at base + l·lane_stride + tap offset
  const int lane_stride = static_cast<int>(flip ? 9 : in_c * 9);
  const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(lane_stride));
  const v8f half = _mm256_set1_ps(0.5f);
  for (int64_t ci = 0; ci < ci_n; ++ci)
    for (int64_t co0 = 0; co0 < co_n; co0 += 8) {
      const float* base = flip ? w + (ci * in_c + co0) * 9 : w + (co0 * in_c + ci) * 9;
      v8f g[3][3];
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 3; ++k)
          g[i][k] = _mm256_i32gather_ps(base + (flip ? (2 - i) * 3 + (2 - k) : i * 3 + k), lanes, 4);
      v8f t[4][3];
      for (int k = 0; k < 3; ++k) {  // G g, G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1]
        t[0][k] = g[0][k];
        t[1][k] = half * (g[0][k] + g[1][k] + g[2][k]);
        t[2][k] = half * (g[0][k] - g[1][k] + g[2][k]);
        t[3][k] = g[2][k];
      }
      float* u = U + ci * co_n + co0;
      for (int r = 0; r < 4; ++r) {  // (G g) Gᵀ
        st(u + (r * 4 + 0) * xs, t[r][0]);
        st(u + (r * 4 + 1) * xs, half * (t[r][0] + t[r][1] + t[r][2]));
        st(u + (r * 4 + 2) * xs, half * (t[r][0] - t[r][1] + t[r][2]));
        st(u + (r * 4 + 3) * xs, t[r][2]);
      }
    }
}

// dW[co][ci] = Gᵀ S[co][ci] G, S[ξ][co][ci] (planes plane(co·ci) apart): the weight gradient
// in PyTorch's out × in × 3 × 3.
void weight_gradient(const float* S, int64_t out_c, int64_t in_c, float* dw) {
  const int64_t xs = plane(out_c * in_c);
  for (int64_t co = 0; co < out_c; ++co)
    for (int64_t ci = 0; ci < in_c; ++ci) {
      const float* s = S + co * in_c + ci;
      float v[4][4];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) v[r][c] = s[(r * 4 + c) * xs];
      float t[3][4];
      for (int c = 0; c < 4; ++c) {  // Gᵀ v, Gᵀ = [1 ½ ½ 0; 0 ½ −½ 0; 0 ½ ½ 1]
        t[0][c] = v[0][c] + 0.5f * (v[1][c] + v[2][c]);
        t[1][c] = 0.5f * (v[1][c] - v[2][c]);
        t[2][c] = 0.5f * (v[1][c] + v[2][c]) + v[3][c];
      }
      float* d = dw + (co * in_c + ci) * 9;
      for (int r = 0; r < 3; ++r) {  // (Gᵀ v) G
        d[r * 3 + 0] = t[r][0] + 0.5f * (t[r][1] + t[r][2]);
        d[r * 3 + 1] = 0.5f * (t[r][1] - t[r][2]);
        d[r * 3 + 2] = 0.5f * (t[r][1] + t[r][2]) + t[r][3];
      }
    }
}

// The one scratch of all Winograd convolutions of the process (layers run one at a time;
// the mutex keeps two nets in one process apart): transformed filters or the weight
// gradient's sums (16·in·out floats), and one block of transformed tiles on each side.
struct Scratch {
  std::mutex mu;
  Buffer u, v, m;
  void reserve(size_t u_floats, size_t v_floats, size_t m_floats) {
    std::lock_guard<std::mutex> lock(mu);
    if (u.bytes() < u_floats * 4) u.resize(u_floats * 4);
    if (v.bytes() < v_floats * 4) v.resize(v_floats * 4);
    if (m.bytes() < m_floats * 4) m.resize(m_floats * 4);
  }
};
Scratch& scratch() {
  static Scratch s;
  return s;
}

// The forward products give every tile the same bits whichever block it is in and however
// many tiles the block has — so that a sample's output does not depend on the batch it came
// in, nor on how the global batch is split over ranks (tests/train/sync_bn.sh compares
// 1 × 16 with 2 × 8 and 4 × 4 to 1e-4; resnet18's ties turn a 1e-7 difference into 1e-2).
// oneDNN 2.6's sgemm does that only for some shapes: its row remainder kernels and its K
// blocking (which depends on M and N) sum in other orders. Measured over K, N in 64…2048 and
// every M in steps of 48 up to 1536 at three row offsets (AVX2, one thread): rows come out
// the same when M is a multiple of 48 (oneDNN's AVX-512 sgemm kernel height, a multiple of its
// AVX2 one) and K at most 256 per call (beta 1 for the next 256); M multiples of 16, or K of
// 512 in one call, did not. So each block's product runs on a multiple of 48 rows (the rows
// past the block's tiles are scratch, never read back) and in K slices of 256.
constexpr int64_t kRowQuantum = 48, kKSlice = 256;
inline int64_t round_up(int64_t v, int64_t q) { return (v + q - 1) / q * q; }

// Tiles per block (a multiple of kRowQuantum): ~1 MiB of transformed tiles on the wider side
// (L2), at least 144 tiles so that each sgemm call keeps a useful size (measured on an AMD
// EPYC Zen 3 for ResNet-50's 64…512-channel layers: 512 KiB to 4 MiB were within noise, 16–64
// tiles slower for 512 channels).
int64_t tile_block(int64_t tiles, int64_t c_max) {
  const int64_t tb =
      std::max<int64_t>(3 * kRowQuantum, (int64_t{1} << 20) / (16 * 4 * c_max) / kRowQuantum * kRowQuantum);
  return std::min(round_up(tiles, kRowQuantum), tb);
}

// A convolution's tiles: the output's oh×ow in 2×2 tiles (the last row and column of tiles
// half outside when odd), each reading the 4×4 input window at (2·ty − pad, 2·tx − pad).
struct Geometry {
  int64_t n, ih, iw, oh, ow, pad, th, tw, tiles;
  Geometry(int64_t n_, int64_t ih_, int64_t iw_, int64_t oh_, int64_t ow_, int64_t pad_)
      : n(n_), ih(ih_), iw(iw_), oh(oh_), ow(ow_), pad(pad_), th((oh_ + 1) / 2), tw((ow_ + 1) / 2) {
    tiles = n * th * tw;
  }
  // Backward data: a forward from dY (oh×ow) to dX (ih×iw) with padding 2 − pad.
  Geometry transposed() const { return Geometry(n, oh, ow, ih, iw, 2 - pad); }
  void tile(int64_t t, int64_t* b, int64_t* ty, int64_t* tx) const {
    *tx = t % tw;
    *ty = (t / tw) % th;
    *b = t / (tw * th);
  }
};

// Tiles t0 … t0 + nt − 1 of x (ci channels, nChw8c) transformed into V (tile t's channels at
// V + ξ·vs + (t − t0)·ci).
WINO_TARGET void input_block(const float* x, int64_t ci, const Geometry& g, int64_t t0, int64_t nt, float* V,
                             int64_t vs) {
  const int64_t cib = ci / 8, ihw8 = g.ih * g.iw * 8;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < nt; ++t) {
    int64_t b, ty, tx;
    g.tile(t0 + t, &b, &ty, &tx);
    for (int64_t cb = 0; cb < cib; ++cb)
      input_tile(x + (b * cib + cb) * ihw8, g.ih, g.iw, 2 * ty - g.pad, 2 * tx - g.pad, V + t * ci + cb * 8, vs);
  }
}

// y (n × co × oh × ow, nChw8c) = the 3×3 correlation with padding g.pad of x (n × ci × ih × iw,
// nChw8c) with the transformed filters U[ξ][ci][co] (+ bias).
WINO_TARGET void wino_forward(const float* x, int64_t ci, int64_t co, const Geometry& g, const float* U,
                              const float* bias, float* y, float* V, float* M) {
  const int64_t tb = tile_block(g.tiles, std::max(ci, co));
  const int64_t cob = co / 8, ohw8 = g.oh * g.ow * 8;
  const int64_t vs = plane(tb * ci), ms = plane(tb * co), us = plane(ci * co);
  for (int64_t t0 = 0; t0 < g.tiles; t0 += tb) {
    const int64_t nt = std::min(tb, g.tiles - t0);
    input_block(x, ci, g, t0, nt, V, vs);
    const int64_t rows = round_up(nt, kRowQuantum);  // see kRowQuantum
    for (int xi = 0; xi < 16; ++xi)
      for (int64_t k0 = 0; k0 < ci; k0 += kKSlice)
        dnnl_sgemm('N', 'N', rows, co, std::min(kKSlice, ci - k0), 1.f, V + xi * vs + k0, ci, U + xi * us + k0 * co, co,
                   k0 == 0 ? 0.f : 1.f, M + xi * ms, co);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < nt; ++t) {
      int64_t b, ty, tx;
      g.tile(t0 + t, &b, &ty, &tx);
      for (int64_t kb = 0; kb < cob; ++kb)
        output_tile(M + t * co + kb * 8, ms, bias ? bias + kb * 8 : nullptr, y + (b * cob + kb) * ohw8, g.oh, g.ow,
                    2 * ty, 2 * tx);
    }
  }
}

// S[ξ][co][ci] = Σ_tiles (A dy Aᵀ)[ξ][co] · (Bᵀ x B)[ξ][ci], then dW = Gᵀ S G.
WINO_TARGET void wino_backward_weights(const float* x, const float* dy, int64_t ci, int64_t co, const Geometry& g,
                                       float* S, float* V, float* M, float* dw) {
  const int64_t tb = tile_block(g.tiles, std::max(ci, co));
  const int64_t cob = co / 8, ohw8 = g.oh * g.ow * 8;
  const int64_t vs = plane(tb * ci), ms = plane(tb * co), ss = plane(co * ci);
  for (int64_t t0 = 0; t0 < g.tiles; t0 += tb) {
    const int64_t nt = std::min(tb, g.tiles - t0);
    input_block(x, ci, g, t0, nt, V, vs);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < nt; ++t) {
      int64_t b, ty, tx;
      g.tile(t0 + t, &b, &ty, &tx);
      for (int64_t kb = 0; kb < cob; ++kb)
        dy_tile(dy + (b * cob + kb) * ohw8, g.oh, g.ow, 2 * ty, 2 * tx, M + t * co + kb * 8, ms);
    }
    for (int xi = 0; xi < 16; ++xi)
      dnnl_sgemm('T', 'N', co, ci, nt, 1.f, M + xi * ms, co, V + xi * vs, ci, t0 == 0 ? 0.f : 1.f, S + xi * ss, ci);
  }
  weight_gradient(S, co, ci, dw);
}

// Fewer channels make the sgemm calls too thin to win: mnist_cnn's 32 → 64 conv2 made its
// step 2 % slower (nn_bench, AMD EPYC Zen 3), ResNet-50's 64…512-channel convolutions ~18 % faster.
constexpr int kMinChannels = 64;

bool cpu_has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

class WinogradConvExec : public Exec {
 public:
  WinogradConvExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env)
      : node_(node), in_(in), out_(out), geo_(env.n, node.in.h, node.in.w, node.out.h, node.out.w, node.pad) {
    const auto& eng = env.eng;
    const auto& gp = env.graph->params;
    ci_ = node.in.c;
    co_ = node.out_channels;
    const ParamInfo& wi = gp[node.params[0]].info;
    w_ = env.params + wi.offset;
    dw_ = env.grads + wi.offset;
    if (node.params.size() > 1) {
      const ParamInfo& bi = gp[node.params[1]].info;
      b_ = env.params + bi.offset;
      db_ = env.grads + bi.offset;
    }
    const md_t in8({env.n, ci_, node.in.h, node.in.w}, dt::f32, tag::nChw8c);
    const md_t out8({env.n, co_, node.out.h, node.out.w}, dt::f32, tag::nChw8c);
    src_cv_.init(in->mem, in8, eng);  // read again by backward weights: kept
    out->alloc(out8, eng);
    if (in->needs_diff) dsrc_cv_.init_into(in8, in->diff_target(node.index), eng, env.transients);
    const int64_t tb = tile_block(std::max(geo_.tiles, geo_.transposed().tiles), std::max(ci_, co_));
    const size_t tiles = size_t(16 * plane(tb * std::max(ci_, co_)));
    scratch().reserve(size_t(16 * plane(ci_ * co_)), tiles, tiles);
  }

  void forward(const RunCtx& c) override {
    src_cv_.run(*c.stream);
    Scratch& s = scratch();
    std::lock_guard<std::mutex> lock(s.mu);
    weight_transform(w_, co_, ci_, false, s.u.f());
    wino_forward(static_cast<const float*>(src_cv_.out.get_data_handle()), ci_, co_, geo_, s.u.f(), b_,
                 static_cast<float*>(out_->mem.get_data_handle()), s.v.f(), s.m.f());
  }

  void backward_params(const RunCtx&) override {
    {
      Scratch& s = scratch();
      std::lock_guard<std::mutex> lock(s.mu);
      wino_backward_weights(static_cast<const float*>(src_cv_.out.get_data_handle()),
                            static_cast<const float*>(out_->diff_mem.get_data_handle()), ci_, co_, geo_, s.u.f(),
                            s.v.f(), s.m.f(), dw_);
    }
    if (db_) channel_sums(out_->diff_mem, db_, bias_acc_);
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    {
      Scratch& s = scratch();
      std::lock_guard<std::mutex> lock(s.mu);
      weight_transform(w_, co_, ci_, true, s.u.f());
      wino_forward(static_cast<const float*>(out_->diff_mem.get_data_handle()), co_, ci_, geo_.transposed(), s.u.f(),
                   nullptr, static_cast<float*>(dsrc_cv_.out.get_data_handle()), s.v.f(), s.m.f());
    }
    dsrc_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  Geometry geo_;
  int64_t ci_ = 0, co_ = 0;
  const float* w_ = nullptr;
  float* dw_ = nullptr;
  const float* b_ = nullptr;
  float* db_ = nullptr;
  Convert src_cv_, dsrc_cv_;
  std::vector<double> bias_acc_;
};

}  // namespace

bool winograd_conv_applies(const Node& node, const ExecEnv& env, const std::string& direct_impl) {
  return env.precision == Precision::fp32 && node.kernel == 3 && node.stride == 1 && node.pad >= 0 && node.pad <= 2 &&
         node.groups == 1 && node.in.c % 8 == 0 && node.out_channels % 8 == 0 && node.in.c >= kMinChannels &&
         node.out_channels >= kMinChannels && node.out.h == node.in.h + 2 * node.pad - 2 &&
         node.out.w == node.in.w + 2 * node.pad - 2 && node.out.h > 0 && node.out.w > 0 && direct_impl == "jit:avx2" &&
         cpu_has_avx2_fma();
}

std::unique_ptr<Exec> make_winograd_conv(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<WinogradConvExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
