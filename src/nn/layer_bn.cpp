// layer_bn.cpp — batch-norm 2d on oneDNN with PyTorch semantics: training uses the
// (per-rank) batch statistics and updates running_mean / running_var (unbiased) with
// momentum 0.1, eps 1e-5; evaluation uses the running statistics.
#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;

class BnExec : public Exec {
 public:
  BnExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in) {
    using namespace dnnl;
    using nf = normalization_flags;
    out->alloc(in->md, env.eng);
    const auto& gp = env.graph->params;
    const md_t c_md({node.in.c}, dt::f32, tag::x);
    auto pmem = [&](int i, float* base) { return memory(c_md, env.eng, base + gp[node.params[i]].info.offset); };
    memory scale = pmem(0, env.params), shift = pmem(1, env.params);
    memory dscale = pmem(0, env.grads), dshift = pmem(1, env.grads);
    running_mean_ = env.params + gp[node.params[2]].info.offset;
    running_var_ = env.params + gp[node.params[3]].info.offset;
    tracked_ = env.params + gp[node.params[4]].info.offset;
    memory rmean = pmem(2, env.params), rvar = pmem(3, env.params);
    channels_ = node.in.c;
    count_ = env.n * node.in.h * node.in.w;

    batch_normalization_forward::primitive_desc fpd({prop_kind::forward_training, in->md, kEps, nf::use_scale | nf::use_shift},
                                                    env.eng);
    mean_buf_.resize(fpd.mean_desc().get_size());
    var_buf_.resize(fpd.variance_desc().get_size());
    memory mean(fpd.mean_desc(), env.eng, mean_buf_.data()), var(fpd.variance_desc(), env.eng, var_buf_.data());
    fwd_.set(batch_normalization_forward(fpd));
    fwd_.arg(DNNL_ARG_SRC, in->mem);
    fwd_.arg(DNNL_ARG_DST, out->mem);
    fwd_.arg(DNNL_ARG_SCALE, scale);
    fwd_.arg(DNNL_ARG_SHIFT, shift);
    fwd_.arg(DNNL_ARG_MEAN, mean);
    fwd_.arg(DNNL_ARG_VARIANCE, var);

    batch_normalization_forward::primitive_desc epd(
        {prop_kind::forward_inference, in->md, kEps, nf::use_global_stats | nf::use_scale | nf::use_shift}, env.eng);
    eval_.set(batch_normalization_forward(epd));
    eval_.arg(DNNL_ARG_SRC, in->mem);
    eval_.arg(DNNL_ARG_DST, out->mem);
    eval_.arg(DNNL_ARG_SCALE, scale);
    eval_.arg(DNNL_ARG_SHIFT, shift);
    eval_.arg(DNNL_ARG_MEAN, rmean);
    eval_.arg(DNNL_ARG_VARIANCE, rvar);

    batch_normalization_backward::primitive_desc bpd(
        {prop_kind::backward, in->md, in->md, kEps, nf::use_scale | nf::use_shift}, env.eng, fpd);
    bwd_.set(batch_normalization_backward(bpd));
    bwd_.arg(DNNL_ARG_SRC, in->mem);
    bwd_.arg(DNNL_ARG_MEAN, mean);
    bwd_.arg(DNNL_ARG_VARIANCE, var);
    bwd_.arg(DNNL_ARG_DIFF_DST, out->diff_mem);
    bwd_.arg(DNNL_ARG_SCALE, scale);
    bwd_.arg(DNNL_ARG_SHIFT, shift);
    bwd_.arg(DNNL_ARG_DIFF_SCALE, dscale);
    bwd_.arg(DNNL_ARG_DIFF_SHIFT, dshift);
    if (in->needs_diff) {
      bwd_.arg(DNNL_ARG_DIFF_SRC, in->diff_target(node.index));
    } else {
      dummy_.resize(in->md.get_size());
      bwd_.arg(DNNL_ARG_DIFF_SRC, memory(in->md, env.eng, dummy_.data()));
    }
  }

  void forward(const RunCtx& c) override {
    if (!c.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
    fwd_.run(*c.stream);
    // Running statistics as PyTorch: unbiased variance, momentum 0.1.
    const float* mean = mean_buf_.f();
    const float* var = var_buf_.f();
    const float unbias = count_ > 1 ? static_cast<float>(count_) / static_cast<float>(count_ - 1) : 1.f;
    for (int i = 0; i < channels_; ++i) {
      running_mean_[i] = (1.f - kMomentum) * running_mean_[i] + kMomentum * mean[i];
      running_var_[i] = (1.f - kMomentum) * running_var_[i] + kMomentum * var[i] * unbias;
    }
    *tracked_ += 1.f;
  }
  void forward_eval(const RunCtx& c) override { eval_.run(*c.stream); }
  void backward_params(const RunCtx& c) override { bwd_.run(*c.stream); }
  void backward_data(const RunCtx&) override {
    if (in_->needs_diff) in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor* in_;
  float *running_mean_ = nullptr, *running_var_ = nullptr, *tracked_ = nullptr;
  int channels_ = 0;
  int64_t count_ = 0;
  Buffer mean_buf_, var_buf_, dummy_;
  Call fwd_, eval_, bwd_;
};

}  // namespace

std::unique_ptr<Exec> make_bn(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<BnExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
