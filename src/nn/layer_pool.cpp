// layer_pool.cpp — max-pool and average-pool (also global average pool, an h×w window)
// on oneDNN pooling, PyTorch semantics: floor output size; max-pool padding never wins
// (oneDNN's max ignores padding, as PyTorch's -inf); average counts the padded window
// (count_include_pad=True).
//
// Max-pool after a conv's fused relu with kernel == stride (mnist_cnn's conv2 → relu →
// maxpool(2)) runs its own kernel instead (MaxPoolReluExec): forward takes the window
// maxima (no workspace) into a plain (PyTorch-order) output, backward writes the conv output's gradient in one pass: g at
// the window's first maximum (found again from the kept input) when the pooled value
// is > 0, else 0.
// That is exactly pooling-backward followed by relu-backward-from-dst (the relu output
// at the argmax is the pooled value; all other positions get 0 from the pooling) and
// replaces two oneDNN passes over the largest activation gradient plus oneDNN's
// workspace pooling. Any oneDNN layout that is plain or blocked on channels only.
// GCC 12 reports a false -Wmaybe-uninitialized inside avx512fintrin.h (_mm512_undefined_ps).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>
#include <vector>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

class PoolExec : public PrimitiveExec {
 public:
  PoolExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    using namespace dnnl;
    const algorithm alg = node.op == Op::maxpool ? algorithm::pooling_max : algorithm::pooling_avg_include_padding;
    const int kh = node.kernel, kw = node.kernel_w ? node.kernel_w : node.kernel;
    memory::dims strides{node.stride, node.stride}, kernel{kh, kw}, pl{node.pad, node.pad};
    // Right/bottom padding: what the floor output size reaches beyond the input (may be
    // negative: rows the floor mode leaves out).
    memory::dims pr{(int64_t{node.out.h} - 1) * node.stride + kh - node.in.h - node.pad,
                    (int64_t{node.out.w} - 1) * node.stride + kw - node.in.w - node.pad};
    if (node.in.volume()) {  // MaxPool3d / AvgPool3d: a kh window in depth too, depth first
      strides.push_back(node.stride);
      kernel.insert(kernel.begin(), kh);
      pl.push_back(node.pad);
      pr.insert(pr.begin(), (int64_t{node.out.d} - 1) * node.stride + kh - node.in.d - node.pad);
    }
    // The output in the input's type (bf16 between layers under --precision bf16).
    const md_t dst_any(batch_dims(env.n, node.out), in->md.data_type(), tag::any);
    pooling_forward::primitive_desc fpd({prop_kind::forward_training, alg, in->md, dst_any, strides, kernel, pl, pr},
                                        env.eng);
    out->alloc(fpd.dst_desc(), env.eng);
    fwd_.set(pooling_forward(fpd));
    fwd_.arg(DNNL_ARG_SRC, in->mem);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    const bool ws = alg == algorithm::pooling_max;
    if (ws) {
      ws_buf_.resize(fpd.workspace_desc().get_size());
      ws_ = memory(fpd.workspace_desc(), env.eng, ws_buf_.data());
      fwd_.arg(DNNL_ARG_WORKSPACE, ws_);
    }
    if (in->needs_diff) {
      pooling_backward::primitive_desc bpd({alg, in->md, out->md, strides, kernel, pl, pr}, env.eng, fpd);
      bwd_.set(pooling_backward(bpd));
      bwd_.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
      bwd_.arg(DNNL_ARG_DIFF_SRC, in->diff_target(node.index));
      if (ws) bwd_.arg(DNNL_ARG_WORKSPACE, ws_);
    }
  }
 private:
  Buffer ws_buf_;
  dnnl::memory ws_;
};

// Strides of a 4-d f32 layout as (n, channel group, h, w) with `lanes` contiguous
// channels per group; false for layouts this kernel does not handle.
struct Strided {
  int64_t n = 0, g = 0, h = 0, w = 0, lanes = 1;
  bool init(const md_t& md) {
    const dnnl_memory_desc_t& d = md.data;
    if (d.ndims != 4 || d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked || d.offset0 != 0) return false;
    for (int i = 0; i < 4; ++i)
      if (d.padded_dims[i] != d.dims[i]) return false;
    const auto& b = d.format_desc.blocking;
    if (b.inner_nblks == 0) {
      lanes = b.strides[1] == 1 ? d.dims[1] : 1;  // channels-last: all channels contiguous
    } else if (b.inner_nblks == 1 && b.inner_idxs[0] == 1 && d.dims[1] % b.inner_blks[0] == 0) {
      lanes = b.inner_blks[0];
    } else {
      return false;
    }
    n = b.strides[0], g = b.strides[1], h = b.strides[2], w = b.strides[3];
    if (lanes > 1 && (h % lanes || w % lanes)) return false;
    return true;
  }
};

class MaxPoolReluExec : public Exec {
 public:
  MaxPoolReluExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* relu_in)
      : node_(node), in_(in), out_(out), relu_in_(relu_in), relu_node_(node.inputs[0] - 1) {
    using namespace dnnl;
    if (!xs_.init(in->md) || !(relu_in->md == in->md)) {
      fallback_ = std::make_unique<PoolExec>(node, in, out, env);
      eltwise_forward::primitive_desc fpd(
          {prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, in->md, 0.f, 0.f}, env.eng);
      eltwise_backward::primitive_desc bpd({algorithm::eltwise_relu_use_dst_for_bwd, in->md, in->md, 0.f, 0.f},
                                           env.eng, fpd);
      relu_bwd_.set(eltwise_backward(bpd));
      relu_bwd_.arg(DNNL_ARG_DST, in->mem);
      relu_bwd_.arg(DNNL_ARG_DIFF_DST, in->diff_mem);
      relu_bwd_.arg(DNNL_ARG_DIFF_SRC, relu_in->diff_target(relu_node_));
      return;
    }
    // The output is plain (PyTorch order): the dropout/flatten after it need no reorder.
    out->alloc(plain_md(out->dims), env.eng);
    y_c_ = int64_t{node.out.h} * node.out.w;
    y_n_ = node.out.c * y_c_;
    groups_ = node.out.c / xs_.lanes;
    covered_ = node.out.h * node.stride == node.in.h && node.out.w * node.stride == node.in.w;
  }

  void forward(const RunCtx& c) override {
    if (fallback_) return fallback_->forward(c);
    if (avx512_ && xs_.lanes % 16 == 0) return fwd_avx512(c.n);
    if (avx2_ && xs_.lanes % 8 == 0) return fwd_avx2(c.n);
    switch (xs_.lanes) {
      case 16: return fwd<16>(c.n);
      case 8: return fwd<8>(c.n);
      case 1: return fwd<1>(c.n);
      default: return fwd<0>(c.n);
    }
  }

  void backward_data(const RunCtx& c) override {
    if (fallback_) {
      fallback_->backward_data(c);
      relu_bwd_.run(*c.stream);
      relu_in_->diff_done(relu_node_);
      return;
    }
    if (!covered_) std::memset(relu_in_->diff_target_ptr(relu_node_), 0, relu_in_->md.get_size());
    if (avx512_ && xs_.lanes % 16 == 0) {
      bwd_avx512(c.n);
    } else if (avx2_ && xs_.lanes % 8 == 0) {
      bwd_avx2(c.n);
    } else {
      switch (xs_.lanes) {
        case 16: bwd<16>(c.n); break;
        case 8: bwd<8>(c.n); break;
        case 1: bwd<1>(c.n); break;
        default: bwd<0>(c.n); break;
      }
    }
    relu_in_->diff_done(relu_node_);
  }

  // Lanes a multiple of 16 (nChw16c, channels-last) with AVX-512: the same operations as
  // fwd<L>/bwd<L>, 16 lanes per vector (_mm512_max_ps(a, b) is exactly a > b ? a : b);
  // the plain output is written / read with a 16-lane scatter / gather (stride OH·OW).
  __attribute__((target("avx512f"))) void fwd_avx512(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const float* x = in_->data_ptr();
    float* y = out_->data_ptr();
    const __m512i vidx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(y_c_)));
    if (K == 2 && S == 2 && xs_.lanes == 16) {
      // 2×2, stride 2, nChw16c (mnist_cnn's pool): the four loads unrolled, in the same
      // max order as below, and the next row pair prefetched: the input was just written
      // by the convolution and mostly sits beyond L2, so the loads were waiting on memory.
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t g = 0; g < groups_; ++g) {
          const float* plane = x + n * xs_.n + g * xs_.g;
          float* yg = y + n * y_n_ + g * 16 * y_c_;
          for (int oh = 0; oh < OH; ++oh) {
            const float* r0 = plane + int64_t{2 * oh} * xs_.h;
            const float* r1 = r0 + xs_.h;
            const float* p0 = r1 + xs_.h;  // the next pair of rows (the next plane's after the last)
            for (int ow = 0; ow < OW; ++ow) {
              const int64_t c = int64_t{2 * ow} * xs_.w;
              _mm_prefetch(reinterpret_cast<const char*>(p0 + c), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(p0 + c + xs_.w), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(p0 + xs_.h + c), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(p0 + xs_.h + c + xs_.w), _MM_HINT_T0);
              __m512 m = _mm512_loadu_ps(r0 + c);
              m = _mm512_max_ps(_mm512_loadu_ps(r0 + c + xs_.w), m);
              m = _mm512_max_ps(_mm512_loadu_ps(r1 + c), m);
              m = _mm512_max_ps(_mm512_loadu_ps(r1 + c + xs_.w), m);
              _mm512_i32scatter_ps(yg + oh * OW + ow, vidx, m, 4);
            }
          }
        }
      return;
    }
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow)
            for (int64_t l = 0; l < xs_.lanes; l += 16) {
              const float* xb = x + n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w + l;
              __m512 m = _mm512_loadu_ps(xb);
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw)
                  if (kh | kw) m = _mm512_max_ps(_mm512_loadu_ps(xb + kh * xs_.h + kw * xs_.w), m);
              _mm512_i32scatter_ps(y + n * y_n_ + (g * xs_.lanes + l) * y_c_ + oh * OW + ow, vidx, m, 4);
            }
  }
  __attribute__((target("avx512f"))) void bwd_avx512(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const float* x = in_->data_ptr();
    const float* y = out_->data_ptr();
    const float* dy = out_->diff_ptr();
    float* dx = relu_in_->diff_target_ptr(relu_node_);
    const __m512 zero = _mm512_setzero_ps();
    const __m512i vidx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(static_cast<int>(y_c_)));
    if (K == 2 && S == 2 && xs_.lanes == 16) {
      // As fwd_avx512's 2×2 path: unrolled in the generic order, next row pair prefetched
      // (input for reading, its gradient for writing).
      for (int64_t n = 0; n < batch; ++n)
        for (int64_t g = 0; g < groups_; ++g) {
          const int64_t plane = n * xs_.n + g * xs_.g;
          const int64_t yg = n * y_n_ + g * 16 * y_c_;
          for (int oh = 0; oh < OH; ++oh) {
            const int64_t r0 = plane + int64_t{2 * oh} * xs_.h, r1 = r0 + xs_.h, p0 = r1 + xs_.h;
            for (int ow = 0; ow < OW; ++ow) {
              const int64_t c = int64_t{2 * ow} * xs_.w;
              _mm_prefetch(reinterpret_cast<const char*>(x + p0 + c), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(x + p0 + c + xs_.w), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(x + p0 + xs_.h + c), _MM_HINT_T0);
              _mm_prefetch(reinterpret_cast<const char*>(x + p0 + xs_.h + c + xs_.w), _MM_HINT_T0);
              const int64_t yo = yg + oh * OW + ow;
              const __m512 yv = _mm512_i32gather_ps(vidx, y + yo, 4);
              const __m512 gv =
                  _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(yv, zero, _CMP_GT_OQ), _mm512_i32gather_ps(vidx, dy + yo, 4));
              const int64_t o[4] = {r0 + c, r0 + c + xs_.w, r1 + c, r1 + c + xs_.w};
              __mmask16 taken = 0;
              for (int k = 0; k < 4; ++k) {
                const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + o[k]), yv, _CMP_EQ_OQ) & ~taken;
                _mm512_storeu_ps(dx + o[k], _mm512_maskz_mov_ps(hit, gv));
                taken |= hit;
              }
            }
          }
        }
      return;
    }
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow)
            for (int64_t l = 0; l < xs_.lanes; l += 16) {
              const int64_t yo = n * y_n_ + (g * xs_.lanes + l) * y_c_ + oh * OW + ow;
              const __m512 yv = _mm512_i32gather_ps(vidx, y + yo, 4);
              const __m512 gv =
                  _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(yv, zero, _CMP_GT_OQ), _mm512_i32gather_ps(vidx, dy + yo, 4));
              __mmask16 taken = 0;
              const int64_t off = n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w + l;
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  const int64_t o = off + kh * xs_.h + kw * xs_.w;
                  const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + o), yv, _CMP_EQ_OQ) & ~taken;
                  _mm512_storeu_ps(dx + o, _mm512_maskz_mov_ps(hit, gv));
                  taken |= hit;
                }
            }
  }

  // Lanes a multiple of 8 (nChw8c: oneDNN's layout on AVX2 CPUs) with AVX2, no AVX-512:
  // the same operations as fwd<L>/bwd<L>, 8 lanes per vector (_mm256_max_ps(a, b) is
  // exactly a > b ? a : b); the plain output is written lane by lane and read with an
  // 8-lane gather (stride OH·OW). The scalar loops took 7.5 ms of mnist_cnn's ~80 ms step
  // at batch 64 on an AVX2 EPYC (perf), these about a quarter of that.
  __attribute__((target("avx2"))) void fwd_avx2(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const float* x = in_->data_ptr();
    float* y = out_->data_ptr();
    alignas(32) float m8[8];
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow)
            for (int64_t l = 0; l < xs_.lanes; l += 8) {
              const float* xb = x + n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w + l;
              __m256 m = _mm256_loadu_ps(xb);
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw)
                  if (kh | kw) m = _mm256_max_ps(_mm256_loadu_ps(xb + kh * xs_.h + kw * xs_.w), m);
              _mm256_store_ps(m8, m);
              float* yb = y + n * y_n_ + (g * xs_.lanes + l) * y_c_ + oh * OW + ow;
              for (int k = 0; k < 8; ++k) yb[k * y_c_] = m8[k];
            }
  }
  __attribute__((target("avx2"))) void bwd_avx2(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const float* x = in_->data_ptr();
    const float* y = out_->data_ptr();
    const float* dy = out_->diff_ptr();
    float* dx = relu_in_->diff_target_ptr(relu_node_);
    const __m256 zero = _mm256_setzero_ps();
    const __m256i vidx = _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm256_set1_epi32(static_cast<int>(y_c_)));
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow)
            for (int64_t l = 0; l < xs_.lanes; l += 8) {
              const int64_t yo = n * y_n_ + (g * xs_.lanes + l) * y_c_ + oh * OW + ow;
              const __m256 yv = _mm256_i32gather_ps(y + yo, vidx, 4);
              // relu backward (from dst): the gradient where the pooled value is > 0
              const __m256 gv = _mm256_and_ps(_mm256_cmp_ps(yv, zero, _CMP_GT_OQ), _mm256_i32gather_ps(dy + yo, vidx, 4));
              __m256 taken = _mm256_setzero_ps();
              const int64_t off = n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w + l;
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  const int64_t o = off + kh * xs_.h + kw * xs_.w;
                  const __m256 hit = _mm256_andnot_ps(taken, _mm256_cmp_ps(_mm256_loadu_ps(x + o), yv, _CMP_EQ_OQ));
                  _mm256_storeu_ps(dx + o, _mm256_and_ps(hit, gv));
                  taken = _mm256_or_ps(taken, hit);
                }
            }
  }

  // LC: lanes known at compile time (0: runtime xs_.lanes).
  template <int LC>
  void fwd(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const int64_t L = LC ? LC : xs_.lanes;
    const float* x = in_->data_ptr();
    float* y = out_->data_ptr();
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow) {
            const float* xb = x + n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w;
            float* yb = y + n * y_n_ + g * L * y_c_ + oh * OW + ow;
            for (int64_t l = 0; l < L; ++l) {
              float m = xb[l];
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  if (kh == 0 && kw == 0) continue;
                  const float v = xb[kh * xs_.h + kw * xs_.w + l];
                  m = v > m ? v : m;
                }
              yb[l * y_c_] = m;
            }
          }
  }

  // The gradient goes to the first position of the window that holds the maximum (as
  // PyTorch's argmax), found again from the kept input instead of a stored index.
  template <int LC>
  void bwd(int64_t batch) {
    const int K = node_.kernel, S = node_.stride, OH = node_.out.h, OW = node_.out.w;
    const int64_t L = LC ? LC : xs_.lanes;
    const float* x = in_->data_ptr();
    const float* y = out_->data_ptr();
    const float* dy = out_->diff_ptr();
    float* dx = relu_in_->diff_target_ptr(relu_node_);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t g = 0; g < groups_; ++g)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow) {
            const int64_t yb = n * y_n_ + g * L * y_c_ + oh * OW + ow;
            const int64_t off = n * xs_.n + g * xs_.g + int64_t{oh} * S * xs_.h + int64_t{ow} * S * xs_.w;
            for (int64_t l = 0; l < L; ++l) {
              const float yv = y[yb + l * y_c_];
              const float gv = yv > 0.f ? dy[yb + l * y_c_] : 0.f;  // relu backward (from dst)
              bool taken = false;
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  const int64_t o = off + kh * xs_.h + kw * xs_.w + l;
                  const bool hit = !taken && x[o] == yv;
                  dx[o] = hit ? gv : 0.f;
                  taken = taken || hit;
                }
            }
          }
  }

 private:
  const Node& node_;
  Tensor *in_, *out_, *relu_in_;
  int relu_node_;
  Strided xs_;
  int64_t y_n_ = 0, y_c_ = 0;  // plain output strides (sample, channel)
  int64_t groups_ = 0;
  bool covered_ = true;
  bool avx512_ = __builtin_cpu_supports("avx512f");
  bool avx2_ = __builtin_cpu_supports("avx2");
  std::unique_ptr<PoolExec> fallback_;
  Call relu_bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_pool(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* relu_in) {
  if (node.relu_into_pool && (node.pad != 0 || node.kernel != node.stride || node.kernel_w != node.kernel))
    internal_error("node ", node.index, ": the fused max-pool+relu kernel takes only unpadded kernel == stride");
  if (node.op == Op::maxpool && node.relu_into_pool && relu_in)
    return std::make_unique<MaxPoolReluExec>(node, in, out, env, relu_in);
  return std::make_unique<PoolExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
