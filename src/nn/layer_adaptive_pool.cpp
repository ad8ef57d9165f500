// layer_adaptive_pool.cpp — nn.AdaptiveAvgPool2d((OH, OW)) for any input size (Op::adaptive_avgpool:
// VGG's pool to 7×7, which at 224² inputs is the identity and at smaller ones averages or
// repeats): output (i, j) is the mean of rows [⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉) and columns
// [⌊j·W/OW⌋, ⌈(j+1)·W/OW⌉), PyTorch's bins (they overlap or repeat when the output is the
// larger). Plain fp32 in (reordered when the producer chose another layout or bf16) and out;
// backward spreads each output gradient evenly over its bin, summed where bins overlap.
#include <cstring>
#include <vector>

#include "nn/exec.hpp"

namespace cnnscale::nn {
namespace {

class AdaptivePoolExec : public Exec {
 public:
  AdaptivePoolExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) : node_(node), in_(in), out_(out) {
    nc_ = in->dims[0] * in->dims[1];
    ih_ = in->dims[2], iw_ = in->dims[3], oh_ = node.out.h, ow_ = node.out.w;
    out->alloc(plain_md({in->dims[0], in->dims[1], oh_, ow_}), env.eng);
    x_cv_.init(in->mem, plain_md(in->dims), env.eng, env.transients);  // read by forward only
    if (in->needs_diff) dx_cv_.init_into(plain_md(in->dims), in->diff_target(node.index), env.eng, env.transients);
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = static_cast<const float*>(x_cv_.out.get_data_handle());
    float* y = out_->data_ptr();
    const int64_t nc = nc_ / in_->dims[0] * c.n;
    for (int64_t p = 0; p < nc; ++p)
      for (int64_t i = 0; i < oh_; ++i)
        for (int64_t j = 0; j < ow_; ++j) {
          const int64_t y0 = i * ih_ / oh_, y1 = ((i + 1) * ih_ + oh_ - 1) / oh_;
          const int64_t x0 = j * iw_ / ow_, x1 = ((j + 1) * iw_ + ow_ - 1) / ow_;
          float s = 0;
          for (int64_t a = y0; a < y1; ++a)
            for (int64_t b = x0; b < x1; ++b) s += x[(p * ih_ + a) * iw_ + b];
          y[(p * oh_ + i) * ow_ + j] = s / static_cast<float>((y1 - y0) * (x1 - x0));
        }
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* dy = out_->diff_ptr();
    float* dx = static_cast<float*>(dx_cv_.out.get_data_handle());
    const int64_t nc = nc_ / in_->dims[0] * c.n;
    std::memset(dx, 0, static_cast<size_t>(nc_ * ih_ * iw_) * sizeof(float));
    for (int64_t p = 0; p < nc; ++p)
      for (int64_t i = 0; i < oh_; ++i)
        for (int64_t j = 0; j < ow_; ++j) {
          const int64_t y0 = i * ih_ / oh_, y1 = ((i + 1) * ih_ + oh_ - 1) / oh_;
          const int64_t x0 = j * iw_ / ow_, x1 = ((j + 1) * iw_ + ow_ - 1) / ow_;
          const float g = dy[(p * oh_ + i) * ow_ + j] / static_cast<float>((y1 - y0) * (x1 - x0));
          for (int64_t a = y0; a < y1; ++a)
            for (int64_t b = x0; b < x1; ++b) dx[(p * ih_ + a) * iw_ + b] += g;
        }
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  int64_t nc_ = 0, ih_ = 0, iw_ = 0, oh_ = 0, ow_ = 0;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_adaptive_pool(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<AdaptivePoolExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
