// layer_upsample.cpp — up-sampling by an integer factor (Op::upsample) as PyTorch's
// F.interpolate(scale_factor=s): mode 'nearest' (source index floor(o / s)), 'bilinear' with
// align_corners=False (source (o + 0.5)/s − 0.5, below 0 taken as 0) and with
// align_corners=True (source o·(in − 1)/(out − 1)), the two neighbours' weights computed in
// double. Our own loops on plain fp32 (oneDNN 2.6's resampling has no align_corners=True, and
// this layer's cost is a pass over its output): per axis a table of (first index, second
// index, weight of the second), forward a gather, backward the same weights scattered back.
#include <cmath>

#include "nn/exec.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {
namespace {

struct Taps {
  std::vector<int> i0, i1;
  std::vector<float> w1;  // weight of i1 (i0 gets 1 − w1)
};

Taps taps(int in, int out, int scale, Resample mode) {
  Taps t;
  for (int o = 0; o < out; ++o) {
    double src = 0;
    switch (mode) {
      case Resample::nearest: src = o / scale; break;  // integer division: floor(o / s)
      case Resample::bilinear: src = std::max(0.0, (o + 0.5) / scale - 0.5); break;
      case Resample::bilinear_align_corners: src = out > 1 ? o * double(in - 1) / double(out - 1) : 0.0; break;
    }
    const int i0 = std::min(static_cast<int>(std::floor(src)), in - 1);
    t.i0.push_back(i0);
    t.i1.push_back(std::min(i0 + 1, in - 1));
    t.w1.push_back(mode == Resample::nearest ? 0.f : static_cast<float>(src - i0));
  }
  return t;
}

class UpsampleExec : public Exec {
 public:
  UpsampleExec(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env)
      : node_(node), in_(in), out_(out), rows_(taps(node.in.h, node.out.h, node.stride, node.resample)),
        cols_(taps(node.in.w, node.out.w, node.stride, node.resample)) {
    const md_t plain = plain_md(in->dims);
    out->alloc(plain_md({env.n, node.out.c, node.out.h, node.out.w}), env.eng);
    x_cv_.init(in->mem, plain, env.eng, env.transients);  // read by forward only
    if (in->needs_diff) dx_cv_.init_into(plain, in->diff_target(node.index), env.eng, env.transients);
    planes_ = env.n * node.in.c;
  }

  void forward(const RunCtx& c) override {
    x_cv_.run(*c.stream);
    const float* x = static_cast<const float*>(x_cv_.out.get_data_handle());
    float* y = out_->data_ptr();
    const int IH = node_.in.h, IW = node_.in.w, OH = node_.out.h, OW = node_.out.w;
    for (int64_t p = 0; p < planes_; ++p) {
      const float* xp = x + p * IH * IW;
      float* yp = y + p * OH * OW;
      for (int oy = 0; oy < OH; ++oy) {
        const float* r0 = xp + rows_.i0[oy] * IW;
        const float* r1 = xp + rows_.i1[oy] * IW;
        const float wy = rows_.w1[oy];
        for (int ox = 0; ox < OW; ++ox) {
          const int a = cols_.i0[ox], b = cols_.i1[ox];
          const float wx = cols_.w1[ox];
          const float top = (1.f - wx) * r0[a] + wx * r0[b], bottom = (1.f - wx) * r1[a] + wx * r1[b];
          yp[oy * OW + ox] = (1.f - wy) * top + wy * bottom;
        }
      }
    }
  }

  void backward_data(const RunCtx& c) override {
    if (!in_->needs_diff) return;
    const float* dy = out_->diff_ptr();
    float* dx = static_cast<float*>(dx_cv_.out.get_data_handle());
    const int IH = node_.in.h, IW = node_.in.w, OH = node_.out.h, OW = node_.out.w;
    std::fill(dx, dx + planes_ * IH * IW, 0.f);
    for (int64_t p = 0; p < planes_; ++p) {
      float* dxp = dx + p * IH * IW;
      const float* dyp = dy + p * OH * OW;
      for (int oy = 0; oy < OH; ++oy) {
        float* r0 = dxp + rows_.i0[oy] * IW;
        float* r1 = dxp + rows_.i1[oy] * IW;
        const float wy = rows_.w1[oy];
        for (int ox = 0; ox < OW; ++ox) {
          const int a = cols_.i0[ox], b = cols_.i1[ox];
          const float wx = cols_.w1[ox], g = dyp[oy * OW + ox];
          const float top = (1.f - wy) * g, bottom = wy * g;
          r0[a] += (1.f - wx) * top;
          r0[b] += wx * top;
          r1[a] += (1.f - wx) * bottom;
          r1[b] += wx * bottom;
        }
      }
    }
    dx_cv_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 private:
  const Node& node_;
  Tensor *in_, *out_;
  Taps rows_, cols_;
  int64_t planes_ = 0;
  Convert x_cv_, dx_cv_;
};

}  // namespace

std::unique_ptr<Exec> make_upsample(const Node& node, Tensor* in, Tensor* out, const ExecEnv& env) {
  return std::make_unique<UpsampleExec>(node, in, out, env);
}

}  // namespace cnnscale::nn
