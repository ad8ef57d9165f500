// layer_relu.cpp — ReLU on oneDNN eltwise, in whatever layout its input has.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class ReluExec : public PrimitiveExec {
 public:
  ReluExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    using namespace dnnl;
    // Fused: the conv before computed relu(x) into `out` already; backward from dst.
    const algorithm alg = node.fused_relu ? algorithm::eltwise_relu_use_dst_for_bwd : algorithm::eltwise_relu;
    if (!node.fused_relu) out->alloc(in->md, env.eng);
    eltwise_forward::primitive_desc fpd({prop_kind::forward_training, alg, in->md, 0.f, 0.f}, env.eng);
    if (!node.fused_relu) {
      fwd_.set(eltwise_forward(fpd));
      fwd_.arg(DNNL_ARG_SRC, in->mem);
      fwd_.arg(DNNL_ARG_DST, out->mem);
    }
    if (in->needs_diff && !node.relu_into_pool) {  // else the maxpool after it does this
      eltwise_backward::primitive_desc bpd({alg, in->md, in->md, 0.f, 0.f}, env.eng, fpd);
      bwd_.set(eltwise_backward(bpd));
      bwd_.arg(node.fused_relu ? DNNL_ARG_DST : DNNL_ARG_SRC, node.fused_relu ? out->mem : in->mem);
      bwd_.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
      bwd_.arg(DNNL_ARG_DIFF_SRC, in->diff_target(node.index));
    }
  }
};

}  // namespace

std::unique_ptr<Exec> make_relu(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<ReluExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
