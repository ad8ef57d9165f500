// layer_weighted.cpp — conv2d and conv3d on oneDNN convolution_* primitives and ConvTranspose2d/3d on
// deconvolution_* primitives (written generic over the primitive family), fp32 or bf16 compute, oneDNN-chosen (blocked) layouts with
// reorders only where a layout or type differs.
// bf16 (issue 30): src, weights, dst, diff_dst and diff_src are bf16 — the activations
// stay bf16 from layer to layer, in the layout the producer's primitive chose — while
// diff_weights, the bias and the master weights are f32. The bf16 weight copy is made
// once per step, in forward, and read again by backward data when both primitives
// want the same layout.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

inline algorithm conv_alg() {
  const char* e = std::getenv("CNNSCALE_CONV_ALG");
  if (e && std::string(e) == "winograd") return algorithm::convolution_winograd;
  if (e && std::string(e) == "auto") return algorithm::convolution_auto;
  return algorithm::convolution_direct;
}

struct ConvTraits {
  using Fwd = dnnl::convolution_forward;
  using BwdD = dnnl::convolution_backward_data;
  using BwdW = dnnl::convolution_backward_weights;
  dnnl::memory::dims strides, pl, pr;

  explicit ConvTraits(const Node& n) {
    // Right padding as oneDNN wants it for PyTorch's floor output size (Node::pad_end
    // included: it is in the output size).
    auto right = [&](int out, int in) { return (int64_t{out} - 1) * n.stride + n.kernel - in - n.pad; };
    strides = {n.stride, n.stride};
    pl = {n.pad, n.pad};
    pr = {right(n.out.h, n.in.h), right(n.out.w, n.in.w)};
    if (n.in.volume()) {  // Conv3d: depth first
      strides.push_back(n.stride);
      pl.push_back(n.pad);
      pr.insert(pr.begin(), right(n.out.d, n.in.d));
    }
  }
  Fwd::primitive_desc fwd(const md_t& src, const md_t& w, const md_t* b, const md_t& dst, const dnnl::engine& e,
                          const dnnl::primitive_attr& attr) const {
    if (b)
      return {Fwd::desc(prop_kind::forward_training, conv_alg(), src, w, *b, dst, strides, pl, pr),
              attr, e};
    return {Fwd::desc(prop_kind::forward_training, conv_alg(), src, w, dst, strides, pl, pr), attr, e};
  }
  BwdD::primitive_desc bwd_d(const md_t& dsrc, const md_t& w, const md_t& ddst, const dnnl::engine& e,
                             const Fwd::primitive_desc& h) const {
    return {BwdD::desc(conv_alg(), dsrc, w, ddst, strides, pl, pr), e, h};
  }
  BwdW::primitive_desc bwd_w(const md_t& src, const md_t& dw, const md_t* db, const md_t& ddst, const dnnl::engine& e,
                             const Fwd::primitive_desc& h) const {
    if (db) return {BwdW::desc(conv_alg(), src, dw, *db, ddst, strides, pl, pr), e, h};
    return {BwdW::desc(conv_alg(), src, dw, ddst, strides, pl, pr), e, h};
  }
  // PyTorch's out × in/groups × k × k bytes in oneDNN's dims (grouped: G × OC/G × C/G × k × k;
  // Conv3d: out × in × k × k × k).
  static tag user_weights(const Node& n) {
    if (n.in.volume()) return tag::oidhw;
    return n.groups > 1 ? tag::goihw : tag::oihw;
  }
};

// ConvTranspose2d: oneDNN's deconvolution with weights in its OC × IC × k × k dims, which
// PyTorch stores as IC × OC × k × k: the plain layout iohw is PyTorch's bytes (ConvTranspose3d:
// iodhw). Output size (in − 1)·stride − 2·pad + k: padding pad on both sides.
struct DeconvTraits {
  using Fwd = dnnl::deconvolution_forward;
  using BwdD = dnnl::deconvolution_backward_data;
  using BwdW = dnnl::deconvolution_backward_weights;
  dnnl::memory::dims strides, pl, pr;
  static constexpr algorithm alg = algorithm::deconvolution_direct;

  explicit DeconvTraits(const Node& n) : strides{n.stride, n.stride}, pl{n.pad, n.pad}, pr{n.pad, n.pad} {
    if (n.in.volume()) {  // ConvTranspose3d
      strides.push_back(n.stride);
      pl.push_back(n.pad);
      pr.push_back(n.pad);
    }
  }
  Fwd::primitive_desc fwd(const md_t& src, const md_t& w, const md_t* b, const md_t& dst, const dnnl::engine& e,
                          const dnnl::primitive_attr& attr) const {
    if (b) return {Fwd::desc(prop_kind::forward_training, alg, src, w, *b, dst, strides, pl, pr), attr, e};
    return {Fwd::desc(prop_kind::forward_training, alg, src, w, dst, strides, pl, pr), attr, e};
  }
  BwdD::primitive_desc bwd_d(const md_t& dsrc, const md_t& w, const md_t& ddst, const dnnl::engine& e,
                             const Fwd::primitive_desc& h) const {
    return {BwdD::desc(alg, dsrc, w, ddst, strides, pl, pr), e, h};
  }
  BwdW::primitive_desc bwd_w(const md_t& src, const md_t& dw, const md_t* db, const md_t& ddst, const dnnl::engine& e,
                             const Fwd::primitive_desc& h) const {
    if (db) return {BwdW::desc(alg, src, dw, *db, ddst, strides, pl, pr), e, h};
    return {BwdW::desc(alg, src, dw, ddst, strides, pl, pr), e, h};
  }
  static tag user_weights(const Node& n) { return n.in.volume() ? tag::iodhw : tag::iohw; }
};

template <class Traits>
class WeightedExec : public Exec {
 public:
  WeightedExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, bool conv, Tensor* fused_out)
      : node_(node), in_(in), out_(out) {
    const auto& eng = env.eng;
    const bool bf16 = env.precision == Precision::bf16;
    if (bf16) require_bf16();
    const dt ct = bf16 ? dt::bf16 : dt::f32;  // compute type of src / weights / diff_dst
    const Traits tr(node);
    const auto& gp = env.graph->params;
    const ParamInfo& wi = gp[node.params[0]].info;
    const bool has_bias = node.params.size() > 1;
    const int64_t n = env.n, oc = node.out_channels;

    md_t src_any, dst_any, w_any;
    if (conv) {
      src_any = md_t(batch_dims(n, node.in), ct, tag::any);
      dst_any = md_t(batch_dims(n, node.out), ct, tag::any);
      // Grouped (groups > 1): oneDNN's G × OC/G × C/G × k × k weights, whose plain goihw
      // layout is PyTorch's OC × C/G × k × k bytes.
      const int64_t k = node.kernel;
      w_any = node.groups > 1      ? md_t({node.groups, oc / node.groups, node.in.c / node.groups, k, k}, ct, tag::any)
              : node.in.volume() ? md_t({oc, node.in.c, k, k, k}, ct, tag::any)
                                 : md_t({oc, node.in.c, k, k}, ct, tag::any);
    } else {
      src_any = md_t({n, node.in.c}, ct, tag::any);
      dst_any = md_t({n, oc}, dt::f32, tag::nc);  // linear outputs stay plain
      w_any = md_t({oc, node.in.c}, ct, tag::any);
    }
    const md_t b_md({oc}, dt::f32, tag::x);
    // A conv's user weights are PyTorch's bytes in the primitive's dims (a pointwise linear's
    // out × in weight, GraphBuilder::pointwise_linear, is out × in × 1 × 1).
    const md_t w_user_md = conv ? md_t(w_any.dims(), dt::f32, Traits::user_weights(node))
                                : plain_md(std::vector<int64_t>(wi.shape.begin(), wi.shape.end()));
    w_user_ = dnnl::memory(w_user_md, eng, env.params + wi.offset);
    dw_user_ = dnnl::memory(w_user_md, eng, env.grads + wi.offset);
    if (has_bias) {
      const ParamInfo& bi = gp[node.params[1]].info;
      b_user_ = dnnl::memory(b_md, eng, env.params + bi.offset);
      db_user_ = dnnl::memory(b_md, eng, env.grads + bi.offset);
    }

    dnnl::primitive_attr attr;
    if (fused_out) {  // relu as a post-op: the relu's output is written directly
      dnnl::post_ops po;
      po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      attr.set_post_ops(po);
    }
    auto fpd = tr.fwd(src_any, w_any, has_bias ? &b_md : nullptr, dst_any, eng, attr);
    // The input as its producer laid it out, when oneDNN has an optimised kernel for that
    // layout too: a reorder of the activation every step saved (the producer chose its
    // layout for its own kernel; on AVX512-BF16 all convolutions agree on nChw16c anyway,
    // on AMX a 1×1 and a 3×3 kernel may not). Not where only a reference or GEMM kernel
    // takes it.
    if (in->md != fpd.src_desc() && in->md.data_type() == ct) {
      try {
        auto same = tr.fwd(in->md, w_any, has_bias ? &b_md : nullptr, dst_any, eng, attr);
        const std::string impl = same.impl_info_str();
        if (impl.rfind("ref", 0) != 0 && impl.find("gemm") == std::string::npos) fpd = same;
      } catch (const dnnl::error&) {  // no kernel for that layout: keep the reorder
      }
    }
    if (fused_out) {
      fused_out->alloc(fpd.dst_desc(), eng);
      // Pre-relu values are never read; the relu's backward runs in place on one
      // gradient buffer (relu output's and conv output's gradients share it).
      out->alloc(fpd.dst_desc(), eng, fused_out->data_ptr(), fused_out->needs_diff ? fused_out->diff_ptr() : nullptr);
    } else {
      out->alloc(fpd.dst_desc(), eng);
    }
    // Backward data's primitive first: the forward's weight conversion is node-local
    // (a transient) unless backward data reads it too.
    std::optional<typename Traits::BwdD::primitive_desc> dpd;
    const md_t ddst_any = md_t(fpd.dst_desc().dims(), ct, tag::any);
    // The input's gradient in the input's own type (bf16 between layers under bf16).
    if (in->needs_diff) dpd = tr.bwd_d(md_t(src_any.dims(), in->md.data_type(), tag::any), w_any, ddst_any, eng, fpd);
    const bool w_shared = dpd && fpd.weights_desc() == dpd->weights_desc();
    Transients* tt = env.transients;
    src_cv_.init(in->mem, fpd.src_desc(), eng);  // read again by backward weights: kept
    w_cv_.init(w_user_, fpd.weights_desc(), eng, w_shared ? nullptr : tt);
    fwd_.set(typename Traits::Fwd(fpd));
    fwd_.arg(DNNL_ARG_SRC, src_cv_.out);
    fwd_.arg(DNNL_ARG_WEIGHTS, w_cv_.out);
    if (has_bias) fwd_.arg(DNNL_ARG_BIAS, b_user_);
    fwd_.arg(DNNL_ARG_DST, fused_out ? fused_out->mem : out->mem);

    // Backward weights. A convolution's bias gradient is our channel_sums() of diff_dst
    // (exec.hpp: closer to float64 than oneDNN's float sum), unless diff_dst comes in a
    // layout that function does not read.
    const md_t dw_any = md_t(w_any.dims(), dt::f32, tag::any);
    auto wpd = tr.bwd_w(md_t(src_any.dims(), ct, tag::any), dw_any, has_bias ? &b_md : nullptr, ddst_any, eng, fpd);
    if (conv && has_bias) {
      auto bare = tr.bwd_w(md_t(src_any.dims(), ct, tag::any), dw_any, nullptr, ddst_any, eng, fpd);
      if (channel_sums_supported(bare.diff_dst_desc())) {
        wpd = bare;
        own_bias_ = static_cast<float*>(db_user_.get_data_handle());
      }
    }
    // A depthwise convolution whose weight gradient oneDNN would compute by GEMM or its
    // reference kernel (5×5, 7×7 on AVX2): ours, on the forward's layouts (conv_depthwise.cpp).
    const std::string wimpl = wpd.impl_info_str();
    own_dw_ = conv && ct == dt::f32 && node.groups > 1 && node.groups == node.in.c && node.groups == oc &&
              (wimpl.rfind("ref", 0) == 0 || wimpl.find("gemm") != std::string::npos) &&
              depthwise_backward_weights_supported(fpd.src_desc(), fpd.dst_desc()) &&
              (!has_bias || channel_sums_supported(fpd.dst_desc())) && std::getenv("CNNSCALE_DW_ONEDNN") == nullptr;
    if (own_dw_) {
      if (has_bias) own_bias_ = static_cast<float*>(db_user_.get_data_handle());
    } else {
      ddst_w_cv_.init(out->diff_mem, wpd.diff_dst_desc(), eng, tt);
      src_w_cv_.init(src_cv_.out, wpd.src_desc(), eng, tt);
      dw_cv_.init_into(wpd.diff_weights_desc(), dw_user_, eng, tt);
      bwd_w_.set(typename Traits::BwdW(wpd));
      bwd_w_.arg(DNNL_ARG_SRC, src_w_cv_.out);
      bwd_w_.arg(DNNL_ARG_DIFF_DST, ddst_w_cv_.out);
      bwd_w_.arg(DNNL_ARG_DIFF_WEIGHTS, dw_cv_.out);
      if (has_bias && !own_bias_) bwd_w_.arg(DNNL_ARG_DIFF_BIAS, db_user_);
    }

    // Backward data (not for the network input). All of a node's backward conversions
    // are transients: backward weights' run in backward_params, these in backward_data
    // (its diff_dst conversion may be backward weights', converted there: same node).
    if (dpd) {
      const dnnl::memory& dd_from =
          !own_dw_ && ddst_w_cv_.out.get_desc() == dpd->diff_dst_desc() ? ddst_w_cv_.out : out->diff_mem;
      ddst_d_cv_.init(dd_from, dpd->diff_dst_desc(), eng, tt);
      w_d_cv_.init(w_shared ? w_cv_.out : w_user_, dpd->weights_desc(), eng, tt);
      dsrc_cv_.init_into(dpd->diff_src_desc(), in->diff_target(node.index), eng, tt);
      bwd_d_.set(typename Traits::BwdD(*dpd));
      bwd_d_.arg(DNNL_ARG_DIFF_DST, ddst_d_cv_.out);
      bwd_d_.arg(DNNL_ARG_WEIGHTS, w_d_cv_.out);
      bwd_d_.arg(DNNL_ARG_DIFF_SRC, dsrc_cv_.out);
    }
  }

  void forward(const RunCtx& c) override {
    src_cv_.run(*c.stream);
    w_cv_.run(*c.stream);
    fwd_.run(*c.stream);
  }

  void backward_params(const RunCtx& c) override {
    if (own_dw_) {
      depthwise_backward_weights(src_cv_.out, out_->diff_mem, node_.kernel, node_.stride, node_.pad,
                                 static_cast<float*>(dw_user_.get_data_handle()), dw_acc_);
      if (own_bias_) channel_sums(out_->diff_mem, own_bias_, bias_acc_);
      return;
    }
    ddst_w_cv_.run(*c.stream);
    src_w_cv_.run(*c.stream);
    bwd_w_.run(*c.stream);
    dw_cv_.run(*c.stream);
    if (own_bias_) channel_sums(ddst_w_cv_.out, own_bias_, bias_acc_);
  }

  void backward_data(const RunCtx& c) override {
    if (!bwd_d_.valid) return;
    ddst_d_cv_.run(*c.stream);
    w_d_cv_.run(*c.stream);
    bwd_d_.run(*c.stream);
    dsrc_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  dnnl::memory w_user_, dw_user_, b_user_, db_user_;
  Convert src_cv_, w_cv_, ddst_w_cv_, src_w_cv_, dw_cv_, ddst_d_cv_, w_d_cv_, dsrc_cv_;
  Call fwd_, bwd_w_, bwd_d_;
  float* own_bias_ = nullptr;  // the bias gradient, when channel_sums() computes it
  std::vector<double> bias_acc_;  // its scratch
  bool own_dw_ = false;           // depthwise_backward_weights() computes the weight gradient
  std::vector<double> dw_acc_;    // its scratch
};

template <class Traits>
std::unique_ptr<Exec> make_weighted(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, bool conv,
                                    Tensor* fused_out) {
  try {
    return std::make_unique<WeightedExec<Traits>>(node, in, out, env, conv, fused_out);
  } catch (const dnnl::error& e) {
    if (env.precision == Precision::bf16)
      fail("--precision bf16: oneDNN has no bf16 ", conv ? "convolution" : "inner product",
           " for this processor (", e.what(), "); use --precision fp32");
    throw;
  }
}

}  // namespace

std::unique_ptr<Exec> make_conv(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env, Tensor* fused_out) {
  // A 3×3 stride-1 fp32 convolution where oneDNN's direct kernel is jit:avx2: ours by
  // Winograd F(2×2, 3×3) (conv_winograd.cpp), unless CNNSCALE_CONV_ALG names oneDNN's.
  if (!fused_out && std::getenv("CNNSCALE_CONV_ALG") == nullptr && env.precision == Precision::fp32 &&
      node.kernel == 3 && node.stride == 1 && node.groups == 1 && !node.in.volume() && node.pad_end == 0) {
    const ConvTraits tr(node);
    const int64_t n = env.n, oc = node.out_channels;
    const auto fpd = tr.fwd(md_t({n, node.in.c, node.in.h, node.in.w}, dt::f32, tag::any),
                            md_t({oc, node.in.c, 3, 3}, dt::f32, tag::any), nullptr,
                            md_t({n, oc, node.out.h, node.out.w}, dt::f32, tag::any), env.eng, dnnl::primitive_attr());
    if (winograd_conv_applies(node, env, fpd.impl_info_str())) return make_winograd_conv(node, in, out, env);
  }
  return make_weighted<ConvTraits>(node, in, out, env, true, fused_out);
}

std::unique_ptr<Exec> make_deconv(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return make_weighted<DeconvTraits>(node, in, out, env, true, nullptr);
}

}  // namespace cnnscale::nn
