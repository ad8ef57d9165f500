// layer_pool.cpp — max-pool and average-pool (also global average pool) on oneDNN
// pooling, PyTorch semantics: no padding, floor output size, average counts the window.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class PoolExec : public Exec {
 public:
  PoolExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in) {
    using namespace dnnl;
    const algorithm alg = node.op == Op::maxpool ? algorithm::pooling_max : algorithm::pooling_avg_include_padding;
    const memory::dims strides{node.stride, node.stride}, kernel{node.kernel, node.kernel}, pl{0, 0};
    const memory::dims pr{(int64_t{node.out.h} - 1) * node.stride + node.kernel - node.in.h,
                          (int64_t{node.out.w} - 1) * node.stride + node.kernel - node.in.w};
    const md_t dst_any({env.n, node.out.c, node.out.h, node.out.w}, dt::f32, tag::any);
    pooling_forward::primitive_desc fpd({prop_kind::forward_training, alg, in->md, dst_any, strides, kernel, pl, pr},
                                        env.eng);
    out->alloc(fpd.dst_desc(), env.eng);
    fwd_.set(pooling_forward(fpd));
    fwd_.arg(DNNL_ARG_SRC, in->mem);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    const bool ws = alg == algorithm::pooling_max;
    if (ws) {
      ws_buf_.resize(fpd.workspace_desc().get_size());
      ws_ = memory(fpd.workspace_desc(), env.eng, ws_buf_.data());
      fwd_.arg(DNNL_ARG_WORKSPACE, ws_);
    }
    if (in->needs_diff) {
      pooling_backward::primitive_desc bpd({alg, in->md, out->md, strides, kernel, pl, pr}, env.eng, fpd);
      bwd_.set(pooling_backward(bpd));
      bwd_.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
      bwd_.arg(DNNL_ARG_DIFF_SRC, in->diff_target(node.index));
      if (ws) bwd_.arg(DNNL_ARG_WORKSPACE, ws_);
    }
  }
  void forward(const RunCtx& c) override { fwd_.run(*c.stream); }
  void backward_data(const RunCtx& c) override {
    if (!bwd_.valid) return;
    bwd_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor* in_;
  Buffer ws_buf_;
  dnnl::memory ws_;
  Call fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_pool(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<PoolExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
