// layer_concat.cpp — torch.cat(xs, dim=1) (Op::concat: DenseNet's dense blocks, SqueezeNet's
// Fire modules, Inception branches, a U-Net's skip connections). The layout: when every input
// is fp32 in one channel-blocked layout (nChw8c on AVX2, nChw16c on AVX-512, nCdhw8c/16c for volumes: what oneDNN's
// convolutions, pools and batch norms write) and every input's channel count is a multiple of
// the block, the output is that layout too — a sample's channels are then one contiguous run
// per input in both, so the concatenation is the same per-sample copy as in plain NCHW, and
// neither the inputs nor the next layer's input (DenseNet's batch norm, then its convolution)
// are reordered (docs/performance.md: DenseNet). Otherwise each input is read in plain fp32
// NCHW (reordered when its producer chose another layout or bf16; the reorder's bytes are
// node-local: concat's backward needs no input) and the output is plain fp32 NCHW. Backward
// copies each input's slice of the output gradient out and, where the layouts differ,
// reorders it into that input's gradient layout (summed there with the input's other
// readers). No arithmetic: forward and backward are exact copies.
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class ConcatExec : public Exec {
 public:
  ConcatExec(const Node& node, const std::vector<Tensor*>& in, Tensor* out, const ExecEnv& env)
      : node_(node), in_(in), out_(out), x_cv_(in.size()), dx_cv_(in.size()) {
    n_ = out->dims[0];
    const tag block = shared_block(in);
    auto layout = [&](const std::vector<int64_t>& d) { return block == tag::undef ? plain_md(d) : md_t(d, dt::f32, block); };
    out->alloc(layout(out->dims), env.eng);
    for (size_t i = 0; i < in.size(); ++i) {
      const auto& d = in[i]->dims;
      int64_t per = 1;
      for (size_t k = 1; k < d.size(); ++k) per *= d[k];
      per_.push_back(per);  // floats per sample of input i (c_i·h·w)
      x_cv_[i].init(in[i]->mem, layout(d), env.eng, env.transients);
      if (in[i]->needs_diff)
        dx_cv_[i].init_into(layout(d), in[i]->diff_target(node.index), env.eng, env.transients);
    }
    for (int64_t p : per_) out_per_ += p;
  }

  void forward(const RunCtx& c) override {
    float* y = out_->data_ptr();
    int64_t at = 0;
    for (size_t i = 0; i < in_.size(); ++i) {
      x_cv_[i].run(*c.stream);
      const float* x = ptr(x_cv_[i].out);
      const int64_t per = per_[i];
      for (int64_t b = 0; b < n_; ++b)
        std::memcpy(y + b * out_per_ + at, x + b * per, static_cast<size_t>(per) * sizeof(float));
      at += per;
    }
  }

  void backward_data(const RunCtx& c) override {
    const float* dy = out_->diff_ptr();
    int64_t at = 0;
    for (size_t i = 0; i < in_.size(); ++i) {
      const int64_t per = per_[i];
      if (in_[i]->needs_diff) {
        float* dx = ptr(dx_cv_[i].out);
        for (int64_t b = 0; b < n_; ++b)
          std::memcpy(dx + b * per, dy + b * out_per_ + at, static_cast<size_t>(per) * sizeof(float));
        dx_cv_[i].run(*c.stream);
        in_[i]->diff_done(node_.index);
      }
      at += per;
    }
  }

 private:
  static float* ptr(const dnnl::memory& m) { return static_cast<float*>(m.get_data_handle()); }
  // nChw8c / nChw16c (volumes: nCdhw8c / nCdhw16c) when every input is fp32 in exactly that layout with a channel count
  // that the block divides (no padded channels); tag::undef otherwise (plain NCHW).
  // CNNSCALE_CONCAT_PLAIN=1 keeps plain NCHW (for A/B timing).
  static tag shared_block(const std::vector<Tensor*>& in) {
    static const bool plain = [] {
      const char* e = std::getenv("CNNSCALE_CONCAT_PLAIN");
      return e && *e && std::string(e) != "0";
    }();
    if (plain) return tag::undef;
    const size_t rank = in[0]->dims.size();  // 4, or 5 for volumes (nCdhw8c / nCdhw16c)
    for (auto [t4, t5, b] : {std::tuple{tag::nChw8c, tag::nCdhw8c, 8}, std::tuple{tag::nChw16c, tag::nCdhw16c, 16}}) {
      const tag t = rank == 5 ? t5 : t4;
      bool all = rank == 4 || rank == 5;
      for (const Tensor* x : in)
        all = all && x->dims.size() == rank && x->dims[1] % b == 0 && x->md == md_t(x->dims, dt::f32, t);
      if (all) return t;
    }
    return tag::undef;
  }
  const Node& node_;
  std::vector<Tensor*> in_;
  Tensor* out_;
  int64_t n_ = 0, out_per_ = 0;
  std::vector<int64_t> per_;
  std::vector<Convert> x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_concat(const Node& node, const std::vector<Tensor*>& in, Tensor* out,
                                  const ExecEnv& env) {
  return std::make_unique<ConcatExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
