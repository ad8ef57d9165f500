// layer_dropout.cpp — dropout with PyTorch semantics (zero with probability p, scale
// the kept by 1/(1-p)); the mask is a counter-based hash of (seed, step, layer index,
// global sample id, element index in the plain C×H×W order), see dropout_mask.hpp.
// The output is in the plain layout (the input is reordered when it is blocked).
#include "nn/dropout_mask.hpp"
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

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
  }

  void forward(const RunCtx& c) override {
    fwd_.run(*c.stream);
    active_ = c.training && node_.p > 0;
    if (!active_) return;
    float* y = out_->data.f();
    uint8_t* m = static_cast<uint8_t*>(mask_.data());
    for (int64_t i = 0; i < c.n; ++i) {
      const int64_t sid = c.step->sample_ids ? c.step->sample_ids[i] : i;
      const uint64_t key = dropout_sample_key(c.step->seed, c.step->step, node_.index, sid);
      float* yi = y + i * numel_;
      uint8_t* mi = m + i * numel_;
      for (int64_t j = 0; j < numel_; ++j) {
        const bool keep = dropout_keep(key, j, threshold_);
        mi[j] = keep;
        yi[j] = keep ? yi[j] * scale_ : 0.f;
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
      float* d = out_->diff.f();
      const uint8_t* m = static_cast<const uint8_t*>(mask_.data());
      const int64_t total = c.n * numel_;
      for (int64_t k = 0; k < total; ++k) d[k] = m[k] ? d[k] * scale_ : 0.f;
    }
    bwd_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  int64_t numel_ = 0;
  Buffer mask_;
  uint64_t threshold_ = 0;
  float scale_ = 1.f;
  bool active_ = false;
  Call fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_dropout(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<DropoutExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
