// layer_flatten.cpp — flatten N×C×H×W to N×(C·H·W) in PyTorch (plain) order; a reorder
// when the input is blocked, a copy otherwise.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class FlattenExec : public Exec {
 public:
  FlattenExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in) {
    out->alloc(plain_md(out->dims), env.eng);
    const md_t view = plain_md(in->dims);  // the output buffer seen with the input's dims
    dnnl::memory y(view, env.eng, out->data.data());
    fwd_.set(dnnl::reorder(in->mem, y));
    fwd_.arg(DNNL_ARG_FROM, in->mem);
    fwd_.arg(DNNL_ARG_TO, y);
    if (in->needs_diff) {
      dnnl::memory dy(view, env.eng, out->diff.data());
      const dnnl::memory& to = in->diff_target(node.index);
      bwd_.set(dnnl::reorder(dy, to));
      bwd_.arg(DNNL_ARG_FROM, dy);
      bwd_.arg(DNNL_ARG_TO, to);
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
  Call fwd_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_flatten(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<FlattenExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
