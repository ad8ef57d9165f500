// layer_layernorm.cpp — LayerNorm over the channels of each position (Op::layernorm:
// ConvNeXt's LayerNorm2d, and its permute → nn.LayerNorm(C) → permute), PyTorch's semantics:
// per sample and position, μ and σ² (biased) over the C channels, y = (x − μ)/√(σ² + eps)·γ + β
// with γ, β of C values. Statistics and the parameter gradients summed in double (torch's
// CPU kernel accumulates in float; the sums here are over C = 96…768 values per position and
// N·H·W positions per parameter). The input is read, and the output and the input's gradient
// written, in the producer's layout when that is fp32 nChw8c/nChw16c with whole channel blocks
// (ConvNeXt's depthwise convolution writes it; no reorder, no copy kept for backward), else in
// plain fp32 NCHW (reordered when the producer chose another layout or bf16); every sum runs
// over the channels, or over (n, pixel), in the same order in either layout: the same bits.
// Backward, with x̂ = (x − μ)·r,
// r = 1/√(σ² + eps), g = dy·γ: dx = r·(g − mean_C(g) − x̂·mean_C(g·x̂)), dγ = Σ dy·x̂, dβ = Σ dy.
#include <cmath>
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class LayerNormExec : public Exec {
 public:
  LayerNormExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    n_ = in->dims[0];
    c_ = in->dims[1];
    hw_ = in->dims.size() == 4 ? in->dims[2] * in->dims[3] : 1;
    int block = 1;
    const md_t layout = in->dims.size() == 4 ? channel_layer_md(*in, &block) : plain_md(in->dims);
    out->alloc(layout, env.eng);
    x_cv_.init(in->mem, layout, env.eng);  // read again by backward: kept (the input itself when no reorder)
    if (in->needs_diff) dx_cv_.init_into(layout, in->diff_target(node.index), env.eng, env.transients);
    // channel cb·B + l of a sample's pixel k is at (cb·hw + k)·B + l (plain: B = 1); a
    // sample is c·hw values in both. Every loop runs cb, k, l: the sums over the channels of
    // a pixel, and over (n, k) of a channel, add in the same order in either layout.
    ks_ = block;
    pg_.resize(static_cast<size_t>(c_));
    pb_.resize(static_cast<size_t>(c_));
    const auto& gp = env.graph->params;
    gamma_ = env.params + gp[node.params[0]].info.offset;
    beta_ = env.params + gp[node.params[1]].info.offset;
    dgamma_ = env.grads + gp[node.params[0]].info.offset;
    dbeta_ = env.grads + gp[node.params[1]].info.offset;
    mean_.resize(static_cast<size_t>(n_ * hw_));
    rstd_.resize(static_cast<size_t>(n_ * hw_));
    s1_.resize(static_cast<size_t>(hw_));
    s2_.resize(static_cast<size_t>(hw_));
    eps_ = node.eps;
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = ptr(x_cv_.out);
    float* y = out_->data_ptr();
    const int64_t B = ks_, nb = c_ / B;
    for (int64_t n = 0; n < c.n; ++n) {
      const float* xn = x + n * c_ * hw_;
      std::fill(s1_.begin(), s1_.end(), 0.0);
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) s1_[k] += xn[(cb * hw_ + k) * B + l];
      double* m = mean_.data() + n * hw_;
      for (int64_t k = 0; k < hw_; ++k) m[k] = s1_[k] / static_cast<double>(c_);
      std::fill(s2_.begin(), s2_.end(), 0.0);
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) {
            const double d = xn[(cb * hw_ + k) * B + l] - m[k];
            s2_[k] += d * d;
          }
      double* r = rstd_.data() + n * hw_;
      for (int64_t k = 0; k < hw_; ++k) r[k] = 1.0 / std::sqrt(s2_[k] / static_cast<double>(c_) + eps_);
      float* yn = y + n * c_ * hw_;
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) {
            const int64_t at = (cb * hw_ + k) * B + l, ch = cb * B + l;
            yn[at] = static_cast<float>((xn[at] - m[k]) * r[k] * static_cast<double>(gamma_[ch]) +
                                        static_cast<double>(beta_[ch]));
          }
    }
  }

  void backward_params(const RunCtx& c) override {
    const float* x = ptr(x_cv_.out);
    const float* dy = out_->diff_ptr();
    const int64_t B = ks_, nb = c_ / B;
    std::fill(pg_.begin(), pg_.end(), 0.0);
    std::fill(pb_.begin(), pb_.end(), 0.0);
    for (int64_t n = 0; n < c.n; ++n) {
      const float* xn = x + n * c_ * hw_;
      const float* dn = dy + n * c_ * hw_;
      const double* m = mean_.data() + n * hw_;
      const double* r = rstd_.data() + n * hw_;
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) {
            const int64_t at = (cb * hw_ + k) * B + l, ch = cb * B + l;
            pg_[ch] += dn[at] * ((xn[at] - m[k]) * r[k]);
            pb_[ch] += dn[at];
          }
    }
    for (int64_t ch = 0; ch < c_; ++ch) {
      dgamma_[ch] = static_cast<float>(pg_[ch]);
      dbeta_[ch] = static_cast<float>(pb_[ch]);
    }
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* x = ptr(x_cv_.out);
    const float* dy = out_->diff_ptr();
    float* dx = ptr(dx_cv_.out);
    const int64_t B = ks_, nb = c_ / B;
    const double inv_c = 1.0 / static_cast<double>(c_);
    for (int64_t n = 0; n < c.n; ++n) {
      const float* xn = x + n * c_ * hw_;
      const float* dn = dy + n * c_ * hw_;
      const double* m = mean_.data() + n * hw_;
      const double* r = rstd_.data() + n * hw_;
      std::fill(s1_.begin(), s1_.end(), 0.0);  // Σ_C g
      std::fill(s2_.begin(), s2_.end(), 0.0);  // Σ_C g·x̂
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) {
            const int64_t at = (cb * hw_ + k) * B + l;
            const double g = dn[at] * static_cast<double>(gamma_[cb * B + l]);
            s1_[k] += g;
            s2_[k] += g * ((xn[at] - m[k]) * r[k]);
          }
      float* dxn = dx + n * c_ * hw_;
      for (int64_t cb = 0; cb < nb; ++cb)
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) {
            const int64_t at = (cb * hw_ + k) * B + l;
            const double xh = (xn[at] - m[k]) * r[k];
            dxn[at] = static_cast<float>(r[k] * (dn[at] * static_cast<double>(gamma_[cb * B + l]) - s1_[k] * inv_c -
                                                 xh * s2_[k] * inv_c));
          }
    }
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  const Node& node_;
  Tensor *in_, *out_;
  int64_t n_ = 0, c_ = 0, hw_ = 0, ks_ = 1;
  double eps_ = 1e-5;
  const float *gamma_ = nullptr, *beta_ = nullptr;
  float *dgamma_ = nullptr, *dbeta_ = nullptr;
  std::vector<double> mean_, rstd_, s1_, s2_, pg_, pb_;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_layernorm(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<LayerNormExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
