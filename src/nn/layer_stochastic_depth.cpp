// layer_stochastic_depth.cpp — torchvision.ops.StochasticDepth(p, "row") (Op::stochastic_depth:
// EfficientNet's and ConvNeXt's residual branches). In training, sample i of the batch is
// multiplied by s_i = keep_i / (1 − p) (keep_i drawn from (seed, step, node, global sample id)
// with dropout's hash, dropout_mask.hpp, element 0: the same decision on any split of the
// batch over ranks), in evaluation by 1. One oneDNN binary_mul with the N×1×1×1 scale
// broadcast, forward (y = x · s) and backward (dx = dy · s), in whatever layout and type the
// input has (every layout cnnscale uses keeps the batch outermost, so a sample's scale is one
// factor per sample in any of them).
#include <vector>

#include "nn/dropout_mask.hpp"
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class StochasticDepthExec : public Exec {
 public:
  StochasticDepthExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in) {
    using namespace dnnl;
    out->alloc(in->md, env.eng);
    out_ = out;
    n_ = in->dims[0];
    const md_t smd({n_, 1, 1, 1}, dt::f32, tag::abcd);
    scale_ = memory(smd, env.eng);  // oneDNN-owned: n_ floats
    threshold_ = dropout_threshold(node.p);
    keep_scale_ = node.p < 1 ? static_cast<float>(1.0 / (1.0 - node.p)) : 0.f;
    binary::primitive_desc fpd({algorithm::binary_mul, in->md, smd, in->md}, env.eng);
    fwd_.set(binary(fpd));
    fwd_.arg(DNNL_ARG_SRC_0, in->mem);
    fwd_.arg(DNNL_ARG_SRC_1, scale_);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    if (in->needs_diff) {
      const memory& to = in->diff_target(node.index);
      binary::primitive_desc bpd({algorithm::binary_mul, out->diff_mem.get_desc(), smd, to.get_desc()}, env.eng);
      bwd_.set(binary(bpd));
      bwd_.arg(DNNL_ARG_SRC_0, out->diff_mem);
      bwd_.arg(DNNL_ARG_SRC_1, scale_);
      bwd_.arg(DNNL_ARG_DST, to);
    }
  }

  void forward(const RunCtx& c) override {
    float* s = static_cast<float*>(scale_.get_data_handle());
    const bool active = c.training && node_.p > 0 && c.step != nullptr;
    for (int64_t i = 0; i < n_; ++i) {
      if (!active || i >= c.n) {
        s[i] = 1.f;
        continue;
      }
      const int64_t sid = c.step->sample_ids ? c.step->sample_ids[i] : i;
      const uint64_t key = dropout_sample_key(c.step->seed, c.step->step, node_.index, sid);
      s[i] = dropout_keep(key, 0, threshold_) ? keep_scale_ : 0.f;
    }
    fwd_.run(*c.stream);
  }

  void backward_data(const RunCtx& c) override {
    if (!bwd_.valid) return;
    bwd_.run(*c.stream);  // the scales of this step's forward
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_ = nullptr;
  int64_t n_ = 0;
  dnnl::memory scale_;
  uint64_t threshold_ = 0;
  float keep_scale_ = 1.f;
  Call fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_stochastic_depth(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<StochasticDepthExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
