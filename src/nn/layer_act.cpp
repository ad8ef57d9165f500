// layer_act.cpp — the element-wise activations other than ReLU (Op::act: ReLU6, sigmoid,
// SiLU, hard-swish, GELU) on oneDNN eltwise, in whatever layout and type their input has,
// forward from the input and backward from the input (never in place: every one of them
// needs x for its gradient). The oneDNN algorithm of each, chosen for PyTorch's gradient:
//   relu6      eltwise_clip_v2(0, 6): gradient where 0 < x < 6, as hardtanh_backward
//              (eltwise_clip's would pass it at x = 6 too);
//   sigmoid    eltwise_logistic;
//   silu       eltwise_swish(alpha 1): x·σ(x);
//   hardswish  eltwise_hardswish: x·relu6(x + 3)/6;
//   gelu       eltwise_gelu_erf: x·Φ(x) (PyTorch's default, approximate='none').
#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct EltwiseOf {
  dnnl::algorithm alg;
  float alpha, beta;
};

EltwiseOf eltwise_of(Act a) {
  using dnnl::algorithm;
  switch (a) {
    case Act::relu6: return {algorithm::eltwise_clip_v2, 0.f, 6.f};
    case Act::sigmoid: return {algorithm::eltwise_logistic, 0.f, 0.f};
    case Act::silu: return {algorithm::eltwise_swish, 1.f, 0.f};
    case Act::hardswish: return {algorithm::eltwise_hardswish, 0.f, 0.f};
    case Act::gelu: return {algorithm::eltwise_gelu_erf, 0.f, 0.f};
  }
  internal_error("eltwise_of: unknown activation");
}

class ActExec : public PrimitiveExec {
 public:
  ActExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    using namespace dnnl;
    const EltwiseOf e = eltwise_of(node.act);
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

}  // namespace

std::unique_ptr<Exec> make_act(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<ActExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
