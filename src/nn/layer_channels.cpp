// layer_channels.cpp — channel rearrangements of ShuffleNetV2 (torchvision.models.shufflenetv2):
// Op::channel_slice, x[:, begin:end] (the halves of `x.chunk(2, dim=1)`), and
// Op::channel_shuffle, torchvision's channel_shuffle(x, groups) — view(N, g, C/g, H, W),
// transpose(1, 2), view(N, C, H, W): output channel i·g + k is input channel k·(C/g) + i.
// Both are exact copies in plain fp32 NCHW (the input reordered when its producer chose another
// layout or bf16); backward copies the gradient back (a slice's other channels get 0: the
// input's other readers add theirs, Tensor::diff_done).
#include <cstring>
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class ChannelsExec : public Exec {
 public:
  ChannelsExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    n_ = in->dims[0];
    c_ = in->dims[1];
    hw_ = in->dims[2] * in->dims[3];
    std::vector<int64_t> od = in->dims;
    od[1] = node.out.c;
    out->alloc(plain_md(od), env.eng);
    // map_[j]: the input channel of output channel j
    if (node.op == Op::channel_slice) {
      for (int j = node.slice_begin; j < node.slice_end; ++j) map_.push_back(j);
    } else {
      const int g = node.groups, per = static_cast<int>(c_) / g;
      map_.resize(static_cast<size_t>(c_));
      for (int i = 0; i < per; ++i)
        for (int k = 0; k < g; ++k) map_[static_cast<size_t>(i * g + k)] = k * per + i;
    }
    x_cv_.init(in->mem, plain_md(in->dims), env.eng, env.transients);  // read by forward only
    if (in->needs_diff) dx_cv_.init_into(plain_md(in->dims), in->diff_target(node.index), env.eng, env.transients);
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = static_cast<const float*>(x_cv_.out.get_data_handle());
    float* y = out_->data_ptr();
    const int64_t oc = static_cast<int64_t>(map_.size());
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t j = 0; j < oc; ++j)
        std::memcpy(y + (n * oc + j) * hw_, x + (n * c_ + map_[static_cast<size_t>(j)]) * hw_, hw_ * sizeof(float));
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* dy = out_->diff_ptr();
    float* dx = static_cast<float*>(dx_cv_.out.get_data_handle());
    const int64_t oc = static_cast<int64_t>(map_.size());
    if (oc != c_) std::memset(dx, 0, static_cast<size_t>(n_ * c_ * hw_) * sizeof(float));
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t j = 0; j < oc; ++j)
        std::memcpy(dx + (n * c_ + map_[static_cast<size_t>(j)]) * hw_, dy + (n * oc + j) * hw_, hw_ * sizeof(float));
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  std::vector<int> map_;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_channels(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<ChannelsExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
