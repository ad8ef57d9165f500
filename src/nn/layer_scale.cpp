// layer_scale.cpp — a learned per-channel scale y = x · γ (Op::layer_scale: ConvNeXt's
// `layer_scale * block(x)`, γ an nn.Parameter of C×1×1). The input is read in its producer's
// layout when that is fp32 nChw8c/nChw16c with whole channel blocks (ConvNeXt's 96…768
// channels), and the output and the input's gradient take it too (no reorder, no copy kept for
// backward); otherwise in plain fp32 NCHW (reordered when the producer chose another layout or
// bf16), output plain. Backward: dx = dy · γ, dγ = Σ_{n,h,w} dy · x summed in double, per
// channel in the same order (n, then pixels) in either layout: the same bits.
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
    const md_t layout = in->dims.size() == 4 ? channel_layer_md(*in, &block_) : plain_md(in->dims);
    out->alloc(layout, env.eng);
    x_cv_.init(in->mem, layout, env.eng);  // read again by backward: kept (the input itself when no reorder)
    if (in->needs_diff) dx_cv_.init_into(layout, in->diff_target(node.index), env.eng, env.transients);
    const auto& gp = env.graph->params;
    gamma_ = env.params + gp[node.params[0]].info.offset;
    dgamma_ = env.grads + gp[node.params[0]].info.offset;
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = ptr(x_cv_.out);
    scale(x, out_->data_ptr(), c.n);
  }

  void backward_params(const RunCtx& c) override {
    const float* x = ptr(x_cv_.out);
    const float* dy = out_->diff_ptr();
    const int64_t B = block_;
    std::vector<double>& acc = acc_;
    for (int64_t cb = 0; cb < c_ / B; ++cb) {
      acc.assign(static_cast<size_t>(B), 0.0);
      for (int64_t n = 0; n < c.n; ++n) {
        const int64_t o = (n * c_ + cb * B) * hw_;  // the block's first value, in either layout
        for (int64_t k = 0; k < hw_; ++k)
          for (int64_t l = 0; l < B; ++l) acc[static_cast<size_t>(l)] += static_cast<double>(dy[o + k * B + l]) * x[o + k * B + l];
      }
      for (int64_t l = 0; l < B; ++l) dgamma_[cb * B + l] = static_cast<float>(acc[static_cast<size_t>(l)]);
    }
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* dy = out_->diff_ptr();
    scale(dy, ptr(dx_cv_.out), c.n);
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  // y = x · γ per channel for n samples, in the layer's layout (block_ channels per pixel run).
  void scale(const float* x, float* y, int64_t n_samples) const {
    const int64_t B = block_;
    for (int64_t n = 0; n < n_samples; ++n)
      for (int64_t cb = 0; cb < c_ / B; ++cb) {
        const int64_t o = (n * c_ + cb * B) * hw_;
        const float* g = gamma_ + cb * B;
        if (B == 1) {
          for (int64_t k = 0; k < hw_; ++k) y[o + k] = x[o + k] * g[0];
        } else {
          for (int64_t k = 0; k < hw_; ++k)
            for (int64_t l = 0; l < B; ++l) y[o + k * B + l] = x[o + k * B + l] * g[l];
        }
      }
  }
  const Node& node_;
  Tensor *in_, *out_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  int block_ = 1;
  std::vector<double> acc_;  // the per-lane sums of a block: assigned per block, kept between steps
  const float* gamma_ = nullptr;
  float* dgamma_ = nullptr;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_layer_scale(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<LayerScaleExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
