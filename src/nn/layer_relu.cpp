// layer_relu.cpp — ReLU on oneDNN eltwise, in whatever layout its input has.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class ReluExec : public PrimitiveExec {
 public:
  ReluExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    using namespace dnnl;
    if (node.bn_relu) return;  // the batch-norm before it computes both passes (Node::bn_relu)
    // Fused: the conv before computed relu(x) into `out` already; backward from dst.
    // In place: relu(x) over x (data and gradient share the input's buffers); backward
    // from dst (x is gone), which gives the same gradient: dst > 0 exactly where src > 0.
    const bool from_dst = node.fused_relu || node.in_place;
    const algorithm alg = from_dst ? algorithm::eltwise_relu_use_dst_for_bwd : algorithm::eltwise_relu;
    if (node.in_place) out->alloc(in->md, env.eng, in->data_ptr(), in->needs_diff ? in->diff_ptr() : nullptr);
    else if (!node.fused_relu) out->alloc(in->md, env.eng);
    eltwise_forward::primitive_desc fpd({prop_kind::forward_training, alg, in->md, 0.f, 0.f}, env.eng);
    if (!node.fused_relu) {
      fwd_.set(eltwise_forward(fpd));
      fwd_.arg(DNNL_ARG_SRC, in->mem);
      fwd_.arg(DNNL_ARG_DST, out->mem);
    }
    if (in->needs_diff && !node.relu_into_pool) {  // else the maxpool after it does this
      eltwise_backward::primitive_desc bpd({alg, in->md, in->md, 0.f, 0.f}, env.eng, fpd);
      bwd_.set(eltwise_backward(bpd));
      bwd_.arg(from_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, from_dst ? out->mem : in->mem);
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
