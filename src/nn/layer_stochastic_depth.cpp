// layer_stochastic_depth.cpp — torchvision.ops.StochasticDepth(p, "row") (Op::stochastic_depth:
// EfficientNet's and ConvNeXt's residual branches). In training, sample i of the batch is
// multiplied by s_i = keep_i / (1 − p) (keep_i drawn from (seed, step, node, global sample id)
// with dropout's hash, dropout_mask.hpp, element 0: the same decision on any split of the
// batch over ranks), in evaluation by 1: y = x · s forward, dx = dy · s backward, in whatever
// layout and type the input has (every layout cnnscale uses keeps the batch outermost, so a
// sample is one contiguous span in any of them). Our own loops: oneDNN 2.6's binary_mul with
// an N×1×1×1 operand runs its reference kernel (ref:any), which took 35 % of efficientnet_b0's
// oneDNN time (635 of 1789 ms, 9 such layers, batch 16, 224², AMD EPYC AVX2).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "nn/dropout_mask.hpp"
#include "nn/exec.hpp"
#include "util/bf16.hpp"

namespace cnnscale::nn {
namespace {

class StochasticDepthExec : public Exec {
 public:
  StochasticDepthExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in) {
    out->alloc(in->md, env.eng);
    out_ = out;
    n_ = in->dims[0];
    bf16_ = in->md.data_type() == dt::bf16;
    per_ = static_cast<int64_t>(in->md.get_size() / (bf16_ ? 2 : 4)) / n_;  // elements per sample, padding included
    scale_.assign(static_cast<size_t>(n_), 1.f);
    threshold_ = dropout_threshold(node.p);
    keep_scale_ = node.p < 1 ? static_cast<float>(1.0 / (1.0 - node.p)) : 0.f;
  }

  void forward(const RunCtx& c) override {
    const bool active = c.training && node_.p > 0 && c.step != nullptr;
    for (int64_t i = 0; i < n_; ++i) {
      float& s = scale_[static_cast<size_t>(i)];
      s = 1.f;
      if (!active || i >= c.n) continue;
      const int64_t sid = c.step->sample_ids ? c.step->sample_ids[i] : i;
      const uint64_t key = dropout_sample_key(c.step->seed, c.step->step, node_.index, sid);
      s = dropout_keep(key, 0, threshold_) ? keep_scale_ : 0.f;
    }
    scale(in_->mem.get_data_handle(), out_->mem.get_data_handle(), c.n);
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    scale(out_->diff_mem.get_data_handle(), in_->diff_target(node_.index).get_data_handle(), c.n);  // this step's s
    in_->diff_done(node_.index);
  }

 private:
  // dst = src · s_i per sample (float products; bf16 rounded to nearest even, as oneDNN's).
  void scale(const void* src, void* dst, int64_t n) const {
    n = std::min(n, n_);
    for (int64_t i = 0; i < n; ++i) {
      const float s = scale_[static_cast<size_t>(i)];
      if (bf16_) {
        const uint16_t* x = static_cast<const uint16_t*>(src) + i * per_;
        uint16_t* y = static_cast<uint16_t*>(dst) + i * per_;
        for (int64_t j = 0; j < per_; ++j) y[j] = float_to_bf16(bf16_to_float(x[j]) * s);
      } else {
        const float* x = static_cast<const float*>(src) + i * per_;
        float* y = static_cast<float*>(dst) + i * per_;
        for (int64_t j = 0; j < per_; ++j) y[j] = x[j] * s;
      }
    }
  }

  const Node& node_;
  Tensor *in_, *out_ = nullptr;
  int64_t n_ = 0, per_ = 0;
  bool bf16_ = false;
  std::vector<float> scale_;
  uint64_t threshold_ = 0;
  float keep_scale_ = 1.f;
};

}  // namespace

std::unique_ptr<Exec> make_stochastic_depth(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<StochasticDepthExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
