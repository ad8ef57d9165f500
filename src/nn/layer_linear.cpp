// layer_linear.cpp — linear (fully connected) on oneDNN matmul with the plain PyTorch
// layouts (weight out×in used transposed in place), so no per-step weight reorders:
//   forward  y  = x · Wᵀ + b       backward-data  dx = dy · W
//   backward-weights  dW = dyᵀ · x  (dyᵀ is a strided view), db = Σ_n dy
// bf16: x, W, dy converted to bf16 (x arrives bf16 from a bf16 flatten: no conversion);
// outputs (the logits, and hidden layers' outputs) and weight gradients stay f32; dx is
// written in the input's type.
#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

class LinearExec : public Exec {
 public:
  LinearExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    using namespace dnnl;
    const auto& eng = env.eng;
    const bool bf16 = env.precision == Precision::bf16;
    if (bf16) require_bf16();
    const dt ct = bf16 ? dt::bf16 : dt::f32;
    const int64_t n = env.n, I = node.in.c, O = node.out_channels;
    const auto& gp = env.graph->params;
    const ParamInfo& wi = gp[node.params[0]].info;
    const ParamInfo& bi = gp[node.params[1]].info;
    out->alloc(md_t({n, O}, dt::f32, tag::ab), eng);
    out_c_ = O;
    db_ = env.grads + bi.offset;

    // W (O×I, f32) → compute type, once per forward.
    memory w_user(md_t({O, I}, dt::f32, tag::ab), eng, env.params + wi.offset);
    w_cv_.init(w_user, md_t({O, I}, ct, tag::ab), eng);
    void* wp = w_cv_.out.get_data_handle();
    src_cv_.init(in->mem, md_t({n, I}, ct, tag::ab), eng);

    const md_t wT({I, O}, ct, tag::ba);  // Wᵀ viewed over the O×I buffer
    const md_t bias({1, O}, dt::f32, tag::ab);
    matmul::primitive_desc fpd({md_t({n, I}, ct, tag::ab), wT, bias, out->md}, eng);
    fwd_.set(matmul(fpd));
    fwd_.arg(DNNL_ARG_SRC, src_cv_.out);
    fwd_.arg(DNNL_ARG_WEIGHTS, memory(wT, eng, wp));
    fwd_.arg(DNNL_ARG_BIAS, memory(bias, eng, env.params + bi.offset));
    fwd_.arg(DNNL_ARG_DST, out->mem);

    ddst_cv_.init(out->diff_mem, md_t({n, O}, ct, tag::ab), eng);
    void* dyp = ddst_cv_.out.get_data_handle();
    // dW (O×I) = dyᵀ (O×n, a strided view of dy) · x (n×I)
    const md_t dyT({O, n}, ct, tag::ba);
    const md_t dw({O, I}, dt::f32, tag::ab);
    matmul::primitive_desc wpd({dyT, md_t({n, I}, ct, tag::ab), dw}, eng);
    bwd_w_.set(matmul(wpd));
    bwd_w_.arg(DNNL_ARG_SRC, memory(dyT, eng, dyp));
    bwd_w_.arg(DNNL_ARG_WEIGHTS, src_cv_.out);
    bwd_w_.arg(DNNL_ARG_DST, memory(dw, eng, env.grads + wi.offset));

    if (in->needs_diff) {
      // dx (n×I) = dy (n×O) · W (O×I)
      const md_t dx({n, I}, in->md.data_type(), tag::ab);
      dsrc_cv_.init_into(dx, in->diff_target(node.index), eng);
      matmul::primitive_desc dpd({md_t({n, O}, ct, tag::ab), md_t({O, I}, ct, tag::ab), dx}, eng);
      bwd_d_.set(matmul(dpd));
      bwd_d_.arg(DNNL_ARG_SRC, memory(md_t({n, O}, ct, tag::ab), eng, dyp));
      bwd_d_.arg(DNNL_ARG_WEIGHTS, memory(md_t({O, I}, ct, tag::ab), eng, wp));
      bwd_d_.arg(DNNL_ARG_DST, dsrc_cv_.out);
    }
  }

  void forward(const RunCtx& c) override {
    w_cv_.run(*c.stream);
    src_cv_.run(*c.stream);
    fwd_.run(*c.stream);
  }

  void backward_params(const RunCtx& c) override {
    ddst_cv_.run(*c.stream);
    bwd_w_.run(*c.stream);
    const float* dy = out_->diff_ptr();
    for (int o = 0; o < out_c_; ++o) db_[o] = 0.f;
    for (int64_t i = 0; i < c.n; ++i)
      for (int o = 0; o < out_c_; ++o) db_[o] += dy[i * out_c_ + o];
  }

  void backward_data(const RunCtx& c) override {
    if (!bwd_d_.valid) return;
    bwd_d_.run(*c.stream);
    dsrc_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  int out_c_ = 0;
  float* db_ = nullptr;
  Convert w_cv_, src_cv_, ddst_cv_, dsrc_cv_;
  Call fwd_, bwd_w_, bwd_d_;
};

}  // namespace

std::unique_ptr<Exec> make_linear(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  try {
    return std::make_unique<LinearExec>(node, in, out, env);
  } catch (const dnnl::error& e) {
    if (env.precision == Precision::bf16)
      fail("--precision bf16: oneDNN has no bf16 matmul for this processor (", e.what(), "); use --precision fp32");
    throw;
  }
}

}  // namespace cnnscale::nn
