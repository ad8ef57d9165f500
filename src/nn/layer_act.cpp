// layer_act.cpp — the element-wise activations other than ReLU (Op::act: ReLU6, sigmoid,
// SiLU, hard-swish, GELU on oneDNN eltwise; hard-sigmoid our own), in whatever layout and type their input has,
// forward from the input and backward from the input (never in place: every one of them
// needs x for its gradient). The oneDNN algorithm of each, chosen for PyTorch's gradient:
//   relu6      eltwise_clip_v2(0, 6): gradient where 0 < x < 6, as hardtanh_backward
//              (eltwise_clip's would pass it at x = 6 too);
//   sigmoid    eltwise_logistic;
//   silu       eltwise_swish(alpha 1): x·σ(x);
//   hardswish  eltwise_hardswish: x·relu6(x + 3)/6;
//   gelu       eltwise_gelu_erf: x·Φ(x) (PyTorch's default, approximate='none');
//   leaky_relu eltwise_relu(alpha = slope): x > 0 ? x : slope·x, gradient dy·(x > 0 ? 1 : slope),
//              as leaky_relu_backward (torch's is x > 0 too: at 0 the slope);
//   tanh       eltwise_tanh;
//   scale      eltwise_linear(alpha = slope, beta 0): slope·x (CosmoFlow's output ×1.2);
//   hardsigmoid  ours (oneDNN 2.6 has none): PyTorch's CPU kernel's float operations,
//              min(max(x + 3, 0), 6) / 6 forward, dy · (1/6) where -3 < x < 3 backward, on
//              plain fp32 (its use, MobileNetV3's squeeze-and-excitation gate, is N×C×1×1).
#include <algorithm>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct EltwiseOf {
  dnnl::algorithm alg;
  float alpha, beta;
};

EltwiseOf eltwise_of(Act a, float slope) {
  using dnnl::algorithm;
  switch (a) {
    case Act::relu6: return {algorithm::eltwise_clip_v2, 0.f, 6.f};
    case Act::sigmoid: return {algorithm::eltwise_logistic, 0.f, 0.f};
    case Act::silu: return {algorithm::eltwise_swish, 1.f, 0.f};
    case Act::hardswish: return {algorithm::eltwise_hardswish, 0.f, 0.f};
    case Act::gelu: return {algorithm::eltwise_gelu_erf, 0.f, 0.f};
    case Act::leaky_relu: return {algorithm::eltwise_relu, slope, 0.f};
    case Act::tanh: return {algorithm::eltwise_tanh, 0.f, 0.f};
    case Act::scale: return {algorithm::eltwise_linear, slope, 0.f};
    case Act::hardsigmoid: break;  // HardSigmoidExec
  }
  internal_error("eltwise_of: unknown activation");
}

class ActExec : public PrimitiveExec {
 public:
  ActExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    using namespace dnnl;
    const EltwiseOf e = eltwise_of(node.act, node.slope);
    out->alloc(in->md, env.eng);
    eltwise_forward::primitive_desc fpd({prop_kind::forward_training, e.alg, in->md, e.alpha, e.beta}, env.eng);
    fwd_.set(eltwise_forward(fpd));
    fwd_.arg(DNNL_ARG_SRC, in->mem);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    if (in->needs_diff) {
      eltwise_backward::primitive_desc bpd({e.alg, in->md, in->md, e.alpha, e.beta}, env.eng, fpd);
      bwd_.set(eltwise_backward(bpd));
      bwd_.arg(DNNL_ARG_SRC, in->mem);
      bwd_.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
      bwd_.arg(DNNL_ARG_DIFF_SRC, in->diff_target(node.index));
    }
  }
};

class HardSigmoidExec : public Exec {
 public:
  HardSigmoidExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    const md_t plain = plain_md(in->dims);
    out->alloc(plain, env.eng);
    x_cv_.init(in->mem, plain, env.eng);  // read again by backward: kept
    if (in->needs_diff) dx_cv_.init_into(plain, in->diff_target(node.index), env.eng, env.transients);
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = ptr(x_cv_.out);
    float* y = out_->data_ptr();
    const int64_t n = count();
    for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(x[i] + 3.f, 0.f), 6.f) / 6.f;
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* x = ptr(x_cv_.out);
    const float* dy = out_->diff_ptr();
    float* dx = ptr(dx_cv_.out);
    const int64_t n = count();
    const float sixth = 1.f / 6.f;
    for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > -3.f && x[i] < 3.f ? dy[i] * sixth : 0.f;
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : in_->dims) n *= d;
    return n;
  }
  const Node& node_;
  Tensor *in_, *out_;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_act(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  if (node.act == Act::hardsigmoid) return std::make_unique<HardSigmoidExec>(node, in, out, env);
  return std::make_unique<ActExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
