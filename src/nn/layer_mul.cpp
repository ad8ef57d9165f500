// layer_mul.cpp — a per-channel scale y = x · s, x N×C×H×W and s N×C×1×1 (Op::mul: the last
// step of squeeze-and-excitation, torchvision's `scale * input`). Both inputs are read in
// plain fp32 NCHW (reordered when their producers chose another layout or bf16), the output
// is plain fp32; backward: dx = dy · s (per channel), ds = Σ_hw dy · x (summed in double,
// in a fixed order), each reordered into its input's gradient layout.
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
    out->alloc(plain_md(x->dims), env.eng);
    out_ = out;
    x_cv_.init(x->mem, plain_md(x->dims), env.eng);  // read again by backward: kept
    s_cv_.init(s->mem, plain_md(s->dims), env.eng);
    if (x->needs_diff) dx_cv_.init_into(plain_md(x->dims), x->diff_target(node.index), env.eng, env.transients);
    if (s->needs_diff) ds_cv_.init_into(plain_md(s->dims), s->diff_target(node.index), env.eng, env.transients);
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    s_cv_.run(*c.stream);
    const float* x = ptr(x_cv_.out);
    const float* s = ptr(s_cv_.out);
    float* y = out_->data_ptr();
    for (int64_t k = 0; k < n_ * c_; ++k) {
      const float v = s[k];
      for (int64_t i = 0; i < hw_; ++i) y[k * hw_ + i] = x[k * hw_ + i] * v;
    }
  }

  void backward_data(const RunCtx& c) override {
    const float* dy = out_->diff_ptr();
    if (x_->needs_diff) {
      const float* s = ptr(s_cv_.out);
      float* dx = ptr(dx_cv_.out);
      for (int64_t k = 0; k < n_ * c_; ++k) {
        const float v = s[k];
        for (int64_t i = 0; i < hw_; ++i) dx[k * hw_ + i] = dy[k * hw_ + i] * v;
      }
      dx_cv_.run(*c.stream);
      x_->diff_done(node_.index);
    }
    if (s_->needs_diff) {
      const float* x = ptr(x_cv_.out);
      float* ds = ptr(ds_cv_.out);
      for (int64_t k = 0; k < n_ * c_; ++k) {
        double sum = 0;
        for (int64_t i = 0; i < hw_; ++i) sum += static_cast<double>(dy[k * hw_ + i]) * x[k * hw_ + i];
        ds[k] = static_cast<float>(sum);
      }
      ds_cv_.run(*c.stream);
      s_->diff_done(node_.index);
    }
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  const Node& node_;
  Tensor *x_, *s_, *out_ = nullptr;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  Convert x_cv_, s_cv_, dx_cv_, ds_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_mul(const Node& node, Tensor* x, Tensor* s, Tensor* out, const ExecEnv& env) {
  return std::make_unique<MulExec>(node, x, s, out, env);
}

}  // namespace cnnscale::nn
