// layer_dropout.cpp — dropout with PyTorch semantics (zero with probability p, scale
// the kept by 1/(1-p)); the mask is a counter-based hash of (seed, step, layer index,
// global sample id, element index in the plain C×H×W order), see dropout_mask.hpp.
// The output is in the plain layout (the input is reordered when it is blocked; a plain
// input is masked straight into the output, without a copy).
//
// The mask loop has an AVX-512 path (8 hashes → 16 uniforms per iteration) and an AVX2
// one (4 → 8) that compute exactly the scalar dropout_keep() decisions and the same float
// products.
// GCC 12 reports a false -Wmaybe-uninitialized inside the AVX-512 headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "nn/dropout_mask.hpp"
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

bool have_avx512_dropout() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

// Elements [0, count) of one sample, count a multiple of 16: mask bytes and y = x·(scale
// where kept, 0 where dropped), a product as PyTorch's x·mask·scale, so that a NaN input
// stays NaN (issue 28 item 2: a select dropped it) and a dropped −x gives −0 (x may be y); exactly dropout_keep(key, j, threshold) per element j
// (threshold <= 2^32 - 1 here).
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void dropout_fwd_avx512(
    uint64_t key, int64_t count, uint32_t threshold, float scale, const float* x, float* y, uint8_t* m) {
  const __m512i golden = _mm512_set1_epi64(static_cast<long long>(kGolden));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull));
  const __m512i vkey = _mm512_set1_epi64(static_cast<long long>(key));
  const __m512i thr = _mm512_set1_epi32(static_cast<int>(threshold));
  const __m512 vs = _mm512_set1_ps(scale);
  const __m512i one8 = _mm512_set1_epi64(8);
  __m512i k = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);  // (pair index) + 1
  for (int64_t j = 0; j < count; j += 16) {
    __m512i z = _mm512_add_epi64(vkey, _mm512_mullo_epi64(golden, k));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    // Element 2i uses the high half of hash i, element 2i+1 the low half.
    const __m512i u = _mm512_shuffle_epi32(z, _MM_PERM_CDAB);
    const __mmask16 keep = _mm512_cmpge_epu32_mask(u, thr);
    _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_maskz_mov_ps(keep, vs)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(m + j), _mm_maskz_set1_epi8(keep, 1));
    k = _mm512_add_epi64(k, one8);
  }
}

// dx = dy·(scale where kept, 0 where dropped), a product as above (dx may be dy).
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl"))) void dropout_bwd_avx512(int64_t count, float scale,
                                                                                    const float* dy, float* dx,
                                                                                    const uint8_t* m) {
  const __m512 vs = _mm512_set1_ps(scale);
  int64_t k = 0;
  for (; k + 16 <= count; k += 16) {
    const __m128i mb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(m + k));
    const __mmask16 keep = _mm_test_epi8_mask(mb, mb);
    _mm512_storeu_ps(dx + k, _mm512_mul_ps(_mm512_loadu_ps(dy + k), _mm512_maskz_mov_ps(keep, vs)));
  }
  for (; k < count; ++k) dx[k] = dy[k] * (m[k] ? scale : 0.f);
}

// The same two loops with AVX2 (no AVX-512: AMD EPYC Zen 2/3, issue 47): 4 hashes → 8
// uniforms per iteration, the 64-bit products made of 32-bit ones (AVX2 has no 64-bit
// mullo); exactly dropout_keep()'s decisions and the same float products. The scalar
// loops took 4.8 % of mnist_cnn's step on an AVX2 EPYC (perf).
__attribute__((target("avx2"))) inline __m256i mullo64_avx2(__m256i a, __m256i c_lo, __m256i c_hi) {
  const __m256i lo = _mm256_mul_epu32(a, c_lo);
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c_lo), _mm256_mul_epu32(a, c_hi));
  return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) void dropout_fwd_avx2(uint64_t key, int64_t count, uint32_t threshold, float scale,
                                                      const float* x, float* y, uint8_t* m) {
  constexpr uint64_t kC1 = 0xBF58476D1CE4E5B9ull, kC2 = 0x94D049BB133111EBull;  // mix64's (rng.hpp)
  const __m256i g_lo = _mm256_set1_epi64x(static_cast<long long>(kGolden & 0xFFFFFFFFull));
  const __m256i g_hi = _mm256_set1_epi64x(static_cast<long long>(kGolden >> 32));
  const __m256i c1_lo = _mm256_set1_epi64x(static_cast<long long>(kC1 & 0xFFFFFFFFull));
  const __m256i c1_hi = _mm256_set1_epi64x(static_cast<long long>(kC1 >> 32));
  const __m256i c2_lo = _mm256_set1_epi64x(static_cast<long long>(kC2 & 0xFFFFFFFFull));
  const __m256i c2_hi = _mm256_set1_epi64x(static_cast<long long>(kC2 >> 32));
  const __m256i vkey = _mm256_set1_epi64x(static_cast<long long>(key));
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i thr = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int>(threshold)), sign);
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i four = _mm256_set1_epi64x(4);
  __m256i k = _mm256_set_epi64x(4, 3, 2, 1);  // (pair index) + 1
  for (int64_t j = 0; j < count; j += 8) {
    __m256i z = _mm256_add_epi64(vkey, mullo64_avx2(k, g_lo, g_hi));
    z = mullo64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), c1_lo, c1_hi);
    z = mullo64_avx2(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), c2_lo, c2_hi);
    z = _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
    // Element 2i uses the high half of hash i, element 2i+1 the low half.
    const __m256i u = _mm256_shuffle_epi32(z, _MM_SHUFFLE(2, 3, 0, 1));
    // u >= threshold (unsigned): not (threshold > u), compared with the sign bits flipped
    const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(thr, _mm256_xor_si256(u, sign)), _mm256_set1_epi32(-1));
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_and_ps(_mm256_castsi256_ps(keep), vs)));
    const __m256i k01 = _mm256_and_si256(keep, one);
    const __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(k01), _mm256_extracti128_si256(k01, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(m + j), _mm_packus_epi16(p16, p16));
    k = _mm256_add_epi64(k, four);
  }
}

__attribute__((target("avx2"))) void dropout_bwd_avx2(int64_t count, float scale, const float* dy, float* dx,
                                                      const uint8_t* m) {
  const __m256 vs = _mm256_set1_ps(scale);
  int64_t k = 0;
  for (; k + 8 <= count; k += 8) {
    const __m256i mb = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + k)));
    const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(mb, _mm256_setzero_si256()));
    _mm256_storeu_ps(dx + k, _mm256_mul_ps(_mm256_loadu_ps(dy + k), _mm256_and_ps(keep, vs)));
  }
  for (; k < count; ++k) dx[k] = dy[k] * (m[k] ? scale : 0.f);
}

class DropoutExec : public Exec {
 public:
  DropoutExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    out->alloc(plain_md(out->dims), env.eng);
    numel_ = node.out.numel();
    mask_.resize(static_cast<size_t>(env.n * numel_));
    fwd_.set(dnnl::reorder(in->mem, out->mem));
    fwd_.arg(DNNL_ARG_FROM, in->mem);
    fwd_.arg(DNNL_ARG_TO, out->mem);
    if (in->needs_diff) {
      const dnnl::memory& to = in->diff_target(node.index);
      bwd_.set(dnnl::reorder(out->diff_mem, to));
      bwd_.arg(DNNL_ARG_FROM, out->diff_mem);
      bwd_.arg(DNNL_ARG_TO, to);
    }
    threshold_ = dropout_threshold(node.p);
    scale_ = node.p > 0 ? static_cast<float>(1.0 / (1.0 - node.p)) : 1.f;
    // A plain input (e.g. from the fused max-pool): mask straight from it into the
    // output, and straight back into its gradient: no copy / reorder pass.
    direct_ = in->md == out->md && (!in->needs_diff || in->diff_target_ptr(node.index) != nullptr);
  }

  void forward(const RunCtx& c) override {
    active_ = c.training && node_.p > 0;
    if (!active_ || !direct_) fwd_.run(*c.stream);
    if (!active_) return;
    float* y = out_->data_ptr();
    const float* x = direct_ ? static_cast<const float*>(in_->mem.get_data_handle()) : y;
    uint8_t* m = static_cast<uint8_t*>(mask_.data());
    const bool vec = (avx512_ || avx2_) && threshold_ <= 0xFFFFFFFFull;
    const int64_t vec_end = !vec ? 0 : avx512_ ? numel_ / 16 * 16 : numel_ / 8 * 8;
    for (int64_t i = 0; i < c.n; ++i) {
      const int64_t sid = c.step->sample_ids ? c.step->sample_ids[i] : i;
      const uint64_t key = dropout_sample_key(c.step->seed, c.step->step, node_.index, sid);
      const float* xi = x + i * numel_;
      float* yi = y + i * numel_;
      uint8_t* mi = m + i * numel_;
      if (vec_end && avx512_) dropout_fwd_avx512(key, vec_end, static_cast<uint32_t>(threshold_), scale_, xi, yi, mi);
      else if (vec_end) dropout_fwd_avx2(key, vec_end, static_cast<uint32_t>(threshold_), scale_, xi, yi, mi);
      for (int64_t j = vec_end; j < numel_; ++j) {
        const bool keep = dropout_keep(key, j, threshold_);
        mi[j] = keep;
        yi[j] = xi[j] * (keep ? scale_ : 0.f);
      }
    }
  }
  void forward_eval(const RunCtx& c) override {
    fwd_.run(*c.stream);
    active_ = false;
  }

  void backward_data(const RunCtx& c) override {
    if (!bwd_.valid) return;
    if (active_) {
      const float* dy = out_->diff_ptr();
      float* dx = direct_ ? in_->diff_target_ptr(node_.index) : out_->diff_ptr();
      const uint8_t* m = static_cast<const uint8_t*>(mask_.data());
      const int64_t total = c.n * numel_;
      if (avx512_) {
        dropout_bwd_avx512(total, scale_, dy, dx, m);
      } else if (avx2_) {
        dropout_bwd_avx2(total, scale_, dy, dx, m);
      } else {
        for (int64_t k = 0; k < total; ++k) dx[k] = dy[k] * (m[k] ? scale_ : 0.f);
      }
    }
    if (!active_ || !direct_) bwd_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  int64_t numel_ = 0;
  Buffer mask_;
  uint64_t threshold_ = 0;
  float scale_ = 1.f;
  bool active_ = false, direct_ = false;
  bool avx512_ = have_avx512_dropout();
  bool avx2_ = __builtin_cpu_supports("avx2");
  Call fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_dropout(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<DropoutExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
