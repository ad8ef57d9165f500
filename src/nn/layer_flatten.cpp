// layer_flatten.cpp — flatten N×C×H×W to N×(C·H·W) in PyTorch (plain) order, in the
// input's type (bf16 stays bf16: the linear after it reads bf16); a reorder when the
// input is blocked; a view (no copy either way) when the input is plain and the flatten
// is its only reader, else a copy.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class FlattenExec : public PrimitiveExec {
 public:
  FlattenExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : PrimitiveExec(node, in) {
    const dt type = in->md.data_type();
    if (in->md == plain_md(in->dims, type) && in->consumers == 1 && in->mem.get_data_handle() != nullptr &&
        (!in->needs_diff || in->diff_target_ptr(node.index) != nullptr) && out->needs_diff == in->needs_diff) {
      // Same bytes in the same order: share the input's data and gradient buffers.
      out->alloc(plain_md(out->dims, type), env.eng, in->mem.get_data_handle(),
                 in->needs_diff ? in->diff_target_ptr(node.index) : nullptr);
      return;
    }
    // Net planned the view (one gradient slot for both); a copy needs its own gradient.
    if (out->diff_slot && out->diff_slot == in->diff_slot) out->diff_slot = nullptr;
    out->alloc(plain_md(out->dims, type), env.eng);
    const md_t view = plain_md(in->dims, type);  // the output buffer seen with the input's dims
    dnnl::memory y(view, env.eng, out->data_ptr());
    fwd_.set(dnnl::reorder(in->mem, y));
    fwd_.arg(DNNL_ARG_FROM, in->mem);
    fwd_.arg(DNNL_ARG_TO, y);
    if (in->needs_diff) {
      dnnl::memory dy(view, env.eng, out->diff_ptr());
      const dnnl::memory& to = in->diff_target(node.index);
      bwd_.set(dnnl::reorder(dy, to));
      bwd_.arg(DNNL_ARG_FROM, dy);
      bwd_.arg(DNNL_ARG_TO, to);
    }
  }
};

}  // namespace

std::unique_ptr<Exec> make_flatten(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<FlattenExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
