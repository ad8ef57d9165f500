// layer_bn.cpp — batch-norm 2d on oneDNN with PyTorch semantics: training uses batch
// statistics and updates running_mean / running_var (unbiased) with momentum 0.1,
// eps 1e-5; evaluation uses the running statistics.
// Types: the activation's (f32, or bf16 under --precision bf16: oneDNN's bf16 batch-norm
// reads and writes bf16 and keeps the statistics, scale, shift and their gradients in
// f32, as PyTorch autocast runs batch-norm on a bf16 input with f32 parameters).
//
// Per-rank statistics (default, as DDP): oneDNN's forward_training computes them.
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
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "nn/exec.hpp"
#include "util/bf16.hpp"

namespace cnnscale::nn {
namespace {

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;

// Elements of an activation: f32, or bf16 (--precision bf16; util/bf16.hpp's rounding).
[[gnu::always_inline]] inline float ld(const float* p) { return *p; }
[[gnu::always_inline]] inline float ld(const uint16_t* p) { return bf16_to_float(*p); }
[[gnu::always_inline]] inline void st(float* p, float v) { *p = v; }
[[gnu::always_inline]] inline void st(uint16_t* p, float v) { *p = float_to_bf16(v); }

// The passes' inner loops (written once over the element type, compiled for AVX-512 and
// AVX2 as well, picked at run time).
// 16 channels interleaved (nChw16c): lane j is channel c0 + j; each lane keeps its own
// double sums, so the loop vectorises without reassociating a sum.
template <class T>
[[gnu::always_inline]] inline void sums16_t(const T* x, int64_t positions, double* sum, double* sq) {
  double s[16] = {}, q[16] = {};
  for (int64_t i = 0; i < positions; ++i)
    for (int j = 0; j < 16; ++j) {
      const double v = ld(x + i * 16 + j);
      s[j] += v;
      q[j] += v * v;
    }
  for (int j = 0; j < 16; ++j) sum[j] += s[j], sq[j] += q[j];
}
template <class T>
[[gnu::always_inline]] inline void correct16_t(T* dx, const T* x, int64_t positions, const float* k0, const float* k1,
                                               const float* m) {
  for (int64_t i = 0; i < positions; ++i)
    for (int j = 0; j < 16; ++j)
      st(dx + i * 16 + j, ld(dx + i * 16 + j) - (k0[j] + k1[j] * (ld(x + i * 16 + j) - m[j])));
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
#define CNNSCALE_BN_LOOPS(T)                                                                                          \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void sums16(const T* x, int64_t p, double* s,        \
                                                                           double* q) {                             \
    sums16_t(x, p, s, q);                                                                                            \
  }                                                                                                                  \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void correct16(                                      \
      T* dx, const T* x, int64_t p, const float* k0, const float* k1, const float* m) {                             \
    correct16_t(dx, x, p, k0, k1, m);                                                                                \
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
    if (d.ndims != 4 || (d.data_type != dnnl_f32 && d.data_type != dnnl_bf16) || d.format_kind != dnnl_blocked)
      throw std::logic_error("batch-norm --sync-bn: expected a 4-d f32 or bf16 activation");
    n = d.dims[0], c = d.dims[1], h = d.dims[2], w = d.dims[3];
    const dnnl_blocking_desc_t& b = d.format_desc.blocking;
    for (int i = 0; i < 4; ++i) s[i] = b.strides[i];
    offset0 = d.offset0;
    if (b.inner_nblks == 1 && b.inner_idxs[0] == 1) blk = b.inner_blks[0];
    else if (b.inner_nblks != 0) throw std::logic_error("batch-norm --sync-bn: unsupported activation layout");
  }

  // Dense nChw16c with whole blocks, or dense nchw: the vectorised loops above.
  bool blocked16() const { return blk == 16 && c % 16 == 0 && s[3] == 16 && s[2] == w * 16; }
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
    count_ = env.n * node.in.h * node.in.w;

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
    batch_normalization_forward::primitive_desc fpd({prop_kind::forward_training, in->md, kEps, flags}, env.eng);
    if (relu_out) {
      ws_buf_.resize(fpd.workspace_desc().get_size());
      ws = memory(fpd.workspace_desc(), env.eng, ws_buf_.data());
    }
    mean_buf_.resize(fpd.mean_desc().get_size());
    var_buf_.resize(fpd.variance_desc().get_size());
    memory mean(fpd.mean_desc(), env.eng, mean_buf_.data()), var(fpd.variance_desc(), env.eng, var_buf_.data());
    bind_forward(fwd_, fpd, mean, var);
    bind_backward(bwd_, {{prop_kind::backward, in->md, in->md, kEps, flags}, env.eng, fpd}, mean, var);

    const auto gflags = nf::use_global_stats | flags;
    bind_forward(eval_, {{prop_kind::forward_inference, in->md, kEps, gflags}, env.eng}, rmean, rvar);

    // --sync-bn: the same primitives with the statistics as inputs (the global ones).
    batch_normalization_forward::primitive_desc gfpd({prop_kind::forward_training, in->md, kEps, gflags}, env.eng);
    gmean_buf_.resize(gfpd.mean_desc().get_size());
    gvar_buf_.resize(gfpd.variance_desc().get_size());
    memory gmean(gfpd.mean_desc(), env.eng, gmean_buf_.data()), gvar(gfpd.variance_desc(), env.eng, gvar_buf_.data());
    bind_forward(gfwd_, gfpd, gmean, gvar);
    bind_backward(gbwd_, {{prop_kind::backward, in->md, in->md, kEps, gflags}, env.eng, gfpd}, gmean, gvar);
  }

  void forward(const RunCtx& c) override {
    if (!c.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
    synced_ = static_cast<bool>(c.step->sum_across_ranks);
    double n_total = static_cast<double>(count_);
    const float* mean = mean_buf_.f();
    const float* var = var_buf_.f();
    if (synced_) {
      n_total = global_statistics(c);
      gfwd_.run(*c.stream);
      mean = gmean_buf_.f();
      var = gvar_buf_.f();
    } else {
      fwd_.run(*c.stream);
    }
    // Running statistics as PyTorch: unbiased variance, momentum 0.1.
    const float unbias = n_total > 1 ? static_cast<float>(n_total / (n_total - 1)) : 1.f;
    bool finite = true;
    for (int i = 0; i < channels_; ++i) {
      running_mean_[i] = (1.f - kMomentum) * running_mean_[i] + kMomentum * mean[i];
      running_var_[i] = (1.f - kMomentum) * running_var_[i] + kMomentum * var[i] * unbias;
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
    if (!synced_) {
      bwd_.run(*c.stream);
      return;
    }
    gbwd_.run(*c.stream);
    // This rank's Σdy·x̂ and Σdy, taken before the grad-ready hook hands the gradient
    // buffer to the allreduce.
    if (in_->needs_diff)
      for (int i = 0; i < channels_; ++i) bmsg_[i] = dgamma_[i], bmsg_[channels_ + i] = dbeta_[i];
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;  // the network input: no data gradient, no sync (same on every rank)
    if (synced_) correct_data_gradient(c);
    in_->diff_done(node_.index);
  }

 private:
  // Forward of --sync-bn: local sums → global sums → gmean_buf_/gvar_buf_ (biased
  // variance) and inv_std_. Returns the global count.
  double global_statistics(const RunCtx& c) {
    const int C = channels_;
    fmsg_.assign(static_cast<size_t>(2 * C + 1), 0.0);
    const ChannelWalk walk(in_->md);
    const void* x = in_->mem.get_data_handle();
    double* sum = fmsg_.data();
    double* sq = fmsg_.data() + C;
    if (in_->md.data_type() == dt::bf16) walk.sums(static_cast<const uint16_t*>(x), sum, sq);
    else walk.sums(static_cast<const float*>(x), sum, sq);
    fmsg_[static_cast<size_t>(2 * C)] = static_cast<double>(count_);
    c.step->sum_across_ranks(fmsg_.data(), fmsg_.size());
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
      inv_std_[i] = 1.0 / std::sqrt(static_cast<double>(gv[i]) + static_cast<double>(kEps));
    }
    global_count_ = n;
    return n;
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
  const float *gamma_ = nullptr, *beta_ = nullptr;
  const float *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *running_mean_ = nullptr, *running_var_ = nullptr, *tracked_ = nullptr;
  bool non_finite_ = false;
  int channels_ = 0;
  int64_t count_ = 0;
  Buffer mean_buf_, var_buf_, gmean_buf_, gvar_buf_, dummy_, ws_buf_;
  Call fwd_, eval_, bwd_, gfwd_, gbwd_;
  // --sync-bn state of the current step.
  bool synced_ = false;
  double global_count_ = 0;
  std::vector<double> fmsg_, bmsg_, inv_std_;
  std::vector<float> mean_, k0_, k1_;
};

}  // namespace

std::unique_ptr<Exec> make_bn(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* relu_out) {
  return std::make_unique<BnExec>(node, in, out, env, relu_out);
}

}  // namespace cnnscale::nn
