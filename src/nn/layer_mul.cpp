// layer_mul.cpp — a per-channel scale y = x · s, x N×C×H×W and s N×C×1×1 (Op::mul: the last
// step of squeeze-and-excitation, torchvision's `scale * input`). x is read in its producer's
// layout when that is fp32 nChw8c/nChw16c with whole channel blocks (what oneDNN's
// convolutions write: EfficientNet's and MobileNetV3's expanded channels are multiples of 8),
// and the output and x's gradient take that layout too, so nothing is reordered and no copy
// of x is kept for backward; otherwise x is read in plain fp32 NCHW (reordered when its
// producer chose another layout or bf16) and the output is plain. s is read plain (N×C
// values). Backward: dx = dy · s (per channel), ds = Σ_hw dy · x summed in double over the
// pixels in order — the same operations per channel in either layout, so the same bits.
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class MulExec : public Exec {
 public:
  MulExec(const Node& node, Tensor* x, Tensor* s, Tensor* out, const ExecEnv& env) : node_(node), x_(x), s_(s) {
    n_ = x->dims[0];
    c_ = x->dims[1];
    hw_ = x->dims[2] * x->dims[3];
    const md_t layout = channel_layer_md(*x, &block_);
    out->alloc(layout, env.eng);
    out_ = out;
    x_cv_.init(x->mem, layout, env.eng);  // read again by backward: kept (x itself when no reorder)
    s_cv_.init(s->mem, plain_md(s->dims), env.eng);
    if (x->needs_diff) dx_cv_.init_into(layout, x->diff_target(node.index), env.eng, env.transients);
    if (s->needs_diff) ds_cv_.init_into(plain_md(s->dims), s->diff_target(node.index), env.eng, env.transients);
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    s_cv_.run(*c.stream);
    scale(ptr(x_cv_.out), ptr(s_cv_.out), out_->data_ptr());
  }

  void backward_data(const RunCtx& c) override {
    const float* dy = out_->diff_ptr();
    if (x_->needs_diff) {
      scale(dy, ptr(s_cv_.out), ptr(dx_cv_.out));
      dx_cv_.run(*c.stream);
      x_->diff_done(node_.index);
    }
    if (s_->needs_diff) {
      const float* x = ptr(x_cv_.out);
      float* ds = ptr(ds_cv_.out);
      const int64_t B = block_;
      std::vector<double>& acc = acc_;
      for (int64_t n = 0; n < n_; ++n)
        for (int64_t cb = 0; cb < c_ / B; ++cb) {
          const int64_t o = (n * c_ + cb * B) * hw_;  // the block's first value, in either layout
          acc.assign(static_cast<size_t>(B), 0.0);
          for (int64_t i = 0; i < hw_; ++i)
            for (int64_t l = 0; l < B; ++l) {
              // plain (B = 1): pixel i of channel cb; blocked: lane l of pixel i
              const int64_t at = o + i * B + l;
              acc[static_cast<size_t>(l)] += static_cast<double>(dy[at]) * x[at];
            }
          for (int64_t l = 0; l < B; ++l) ds[n * c_ + cb * B + l] = static_cast<float>(acc[static_cast<size_t>(l)]);
        }
      ds_cv_.run(*c.stream);
      s_->diff_done(node_.index);
    }
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  // y = x · s per channel, in the layer's layout (block_ channels per pixel run).
  void scale(const float* x, const float* s, float* y) const {
    const int64_t B = block_;
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t cb = 0; cb < c_ / B; ++cb) {
        const int64_t o = (n * c_ + cb * B) * hw_;
        const float* sv = s + n * c_ + cb * B;
        if (B == 1) {
          const float v = sv[0];
          for (int64_t i = 0; i < hw_; ++i) y[o + i] = x[o + i] * v;
        } else {
          for (int64_t i = 0; i < hw_; ++i)
            for (int64_t l = 0; l < B; ++l) y[o + i * B + l] = x[o + i * B + l] * sv[l];
        }
      }
  }
  const Node& node_;
  Tensor *x_, *s_, *out_ = nullptr;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  int block_ = 1;
  std::vector<double> acc_;  // ds's per-lane sums: assigned per block, kept between steps
  Convert x_cv_, s_cv_, dx_cv_, ds_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_mul(const Node& node, Tensor* x, Tensor* s, Tensor* out, const ExecEnv& env) {
  return std::make_unique<MulExec>(node, x, s, out, env);
}

}  // namespace cnnscale::nn
