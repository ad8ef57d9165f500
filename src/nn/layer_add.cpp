// layer_add.cpp — residual add y = a + b (oneDNN binary); backward passes the gradient
// to both inputs (reordered to each input's layout); in place (Node::in_place) the output
// and its gradient share a's buffers, so only b gets a copy. Inputs in different layouts
// (ConvNeXt: a plain branch, a blocked shortcut): b is reordered into a's layout first, as
// oneDNN 2.6's binary runs its reference kernel on mixed layouts (ref:any: 184 ms for one
// 16×192×28×28 add, against well under 1 ms for a reorder and a jit add).
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class AddExec : public Exec {
 public:
  AddExec(const Node& node, Tensor* a, Tensor* b, Tensor* out, const ExecEnv& env) : node_(node), a_(a), b_(b) {
    using namespace dnnl;
    // In place: a + b over a (its only reader is this add), and a's gradient is the
    // output's gradient itself (one buffer, no copy).
    if (node.in_place) out->alloc(a->md, env.eng, a->data_ptr(), a->needs_diff ? a->diff_ptr() : nullptr);
    else out->alloc(a->md, env.eng);
    b_cv_.init(b->mem, a->md, env.eng, env.transients);  // no-op when the layouts agree
    binary::primitive_desc pd({algorithm::binary_add, a->md, a->md, out->md}, env.eng);
    fwd_.set(binary(pd));
    fwd_.arg(DNNL_ARG_SRC_0, a->mem);
    fwd_.arg(DNNL_ARG_SRC_1, b_cv_.out);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    auto back = [&](Tensor* t, Call& call) {
      if (!t->needs_diff) return;
      const memory& to = t->diff_target(node.index);
      call.set(reorder(out->diff_mem, to));
      call.arg(DNNL_ARG_FROM, out->diff_mem);
      call.arg(DNNL_ARG_TO, to);
    };
    if (!node.in_place) back(a, bwd_a_);
    back(b, bwd_b_);
  }
  void forward(const RunCtx& c) override {
    b_cv_.run(*c.stream);
    fwd_.run(*c.stream);
  }
  void backward_data(const RunCtx& c) override {
    if (bwd_a_.valid) {
      bwd_a_.run(*c.stream);
      a_->diff_done(node_.index);
    }
    if (bwd_b_.valid) {
      bwd_b_.run(*c.stream);
      b_->diff_done(node_.index);
    }
  }

 private:
  const Node& node_;
  Tensor *a_, *b_;
  Convert b_cv_;
  Call fwd_, bwd_a_, bwd_b_;
};

}  // namespace

std::unique_ptr<Exec> make_add(const Node& node, Tensor* a, Tensor* b, Tensor* out, const ExecEnv& env) {
  return std::make_unique<AddExec>(node, a, b, out, env);
}

}  // namespace cnnscale::nn
