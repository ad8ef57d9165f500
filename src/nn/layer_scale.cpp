// layer_scale.cpp — a learned per-channel scale y = x · γ (Op::layer_scale: ConvNeXt's
// `layer_scale * block(x)`, γ an nn.Parameter of C×1×1). Input read in plain fp32 NCHW
// (reordered when the producer chose another layout or bf16), output plain fp32; backward:
// dx = dy · γ, dγ = Σ_{n,h,w} dy · x summed in double.
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class LayerScaleExec : public Exec {
 public:
  LayerScaleExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    n_ = in->dims[0];
    c_ = in->dims[1];
    hw_ = in->dims.size() == 4 ? in->dims[2] * in->dims[3] : 1;
    const md_t plain = plain_md(in->dims);
    out->alloc(plain, env.eng);
    x_cv_.init(in->mem, plain, env.eng);  // read again by backward: kept
    if (in->needs_diff) dx_cv_.init_into(plain, in->diff_target(node.index), env.eng, env.transients);
    const auto& gp = env.graph->params;
    gamma_ = env.params + gp[node.params[0]].info.offset;
    dgamma_ = env.grads + gp[node.params[0]].info.offset;
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = ptr(x_cv_.out);
    float* y = out_->data_ptr();
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float g = gamma_[ch];
        const int64_t o = (n * c_ + ch) * hw_;
        for (int64_t k = 0; k < hw_; ++k) y[o + k] = x[o + k] * g;
      }
  }

  void backward_params(const RunCtx& c) override {
    const float* x = ptr(x_cv_.out);
    const float* dy = out_->diff_ptr();
    for (int64_t ch = 0; ch < c_; ++ch) {
      double s = 0;
      for (int64_t n = 0; n < c.n; ++n) {
        const int64_t o = (n * c_ + ch) * hw_;
        for (int64_t k = 0; k < hw_; ++k) s += static_cast<double>(dy[o + k]) * x[o + k];
      }
      dgamma_[ch] = static_cast<float>(s);
    }
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* dy = out_->diff_ptr();
    float* dx = ptr(dx_cv_.out);
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float g = gamma_[ch];
        const int64_t o = (n * c_ + ch) * hw_;
        for (int64_t k = 0; k < hw_; ++k) dx[o + k] = dy[o + k] * g;
      }
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  const Node& node_;
  Tensor *in_, *out_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  const float* gamma_ = nullptr;
  float* dgamma_ = nullptr;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_layer_scale(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<LayerScaleExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
