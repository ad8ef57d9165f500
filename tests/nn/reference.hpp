// reference.hpp — a tiny double-precision reference forward of a Graph (plain NCHW
// loops, no oneDNN), used by the tests to check the oneDNN layers: loss in training
// mode (batch-norm batch statistics, the same dropout masks) and logits in eval mode.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "nn/dropout_mask.hpp"
#include "nn/graph.hpp"

namespace cnnscale::nn::ref {

struct BnStats {
  std::vector<double> mean, var;  // biased variance
  int64_t count = 0;
};

struct Result {
  double loss_sum = 0;               // sum of per-sample CE
  std::vector<double> logits;        // n × classes
  std::map<int, BnStats> bn;         // node index → batch statistics (training)
};

inline Result forward(const Graph& g, const std::vector<double>& P, const float* images, const int32_t* labels,
                      int64_t n, const StepContext& ctx, bool training) {
  std::vector<std::vector<double>> T(g.tensor_count());
  const int64_t in_numel = g.input.numel();
  T[0].assign(images, images + n * in_numel);
  auto shape_of = [&](int t) -> Shape {
    if (t == 0) {
      Shape s{g.input.channels, g.input.height, g.input.width, false};
      s.d = g.input.depth;
      return s;
    }
    return g.nodes[t - 1].out;
  };
  Result r;
  for (const Node& nd : g.nodes) {
    const Shape is = shape_of(nd.inputs[0]), os = nd.out;
    const std::vector<double>& x = T[nd.inputs[0]];
    std::vector<double> y(static_cast<size_t>(n * os.numel()), 0.0);
    auto off = [&](int k) { return g.params[nd.params[k]].info.offset; };
    switch (nd.op) {
      case Op::conv: {
        const int K = nd.kernel;
        // groups: output channel o sees input channels [g·ci, (g+1)·ci) of its group g
        // through weight row o (out × ci × k × k, ci = in/groups), as PyTorch's Conv2d.
        // A volume: Conv3d, weight out × ci × k × k × k, depth as one more outer axis (the end
        // padding of padding='same', Node::pad_end, is the part of a window past the input).
        const int ci = is.c / nd.groups, co = os.c / nd.groups;
        const int ID = is.volume() ? is.d : 1, OD = os.volume() ? os.d : 1, KD = is.volume() ? K : 1;
        for (int64_t b = 0; b < n; ++b)
          for (int o = 0; o < os.c; ++o)
            for (int oz = 0; oz < OD; ++oz)
              for (int oy = 0; oy < os.h; ++oy)
                for (int ox = 0; ox < os.w; ++ox) {
                  double s = nd.bias ? P[off(1) + o] : 0.0;
                  for (int j = 0; j < ci; ++j)
                    for (int kz = 0; kz < KD; ++kz)
                      for (int ky = 0; ky < K; ++ky)
                        for (int kx = 0; kx < K; ++kx) {
                          const int i = (o / co) * ci + j;
                          const int iz = is.volume() ? oz * nd.stride - nd.pad + kz : 0;
                          const int iy = oy * nd.stride - nd.pad + ky, ix = ox * nd.stride - nd.pad + kx;
                          if (iz < 0 || iz >= ID || iy < 0 || iy >= is.h || ix < 0 || ix >= is.w) continue;
                          s += P[off(0) + (((size_t(o) * ci + j) * KD + kz) * K + ky) * K + kx] *
                               x[(((size_t(b) * is.c + i) * ID + iz) * is.h + iy) * is.w + ix];
                        }
                  y[(((size_t(b) * os.c + o) * OD + oz) * os.h + oy) * os.w + ox] = s;
                }
        break;
      }
      case Op::deconv: {  // PyTorch's ConvTranspose2d/3d, written as its scatter: weight in × out × k × k (× k)
        const int K = nd.kernel, KD = is.volume() ? K : 1, ID = is.volume() ? is.d : 1, OD = os.volume() ? os.d : 1;
        const size_t plane = size_t(OD) * os.h * os.w;
        for (int64_t b = 0; b < n; ++b) {
          for (int o = 0; o < os.c; ++o)
            for (size_t p = 0; p < plane; ++p) y[(size_t(b) * os.c + o) * plane + p] = nd.bias ? P[off(1) + o] : 0.0;
          for (int i = 0; i < is.c; ++i)
            for (int iz = 0; iz < ID; ++iz)
              for (int iy = 0; iy < is.h; ++iy)
                for (int ix = 0; ix < is.w; ++ix)
                  for (int o = 0; o < os.c; ++o)
                    for (int kz = 0; kz < KD; ++kz)
                      for (int ky = 0; ky < K; ++ky)
                        for (int kx = 0; kx < K; ++kx) {
                          const int oz = is.volume() ? iz * nd.stride - nd.pad + kz : 0;
                          const int oy = iy * nd.stride - nd.pad + ky, ox = ix * nd.stride - nd.pad + kx;
                          if (oz < 0 || oz >= OD || oy < 0 || oy >= os.h || ox < 0 || ox >= os.w) continue;
                          y[(((size_t(b) * os.c + o) * OD + oz) * os.h + oy) * os.w + ox] +=
                              P[off(0) + (((size_t(i) * os.c + o) * KD + kz) * K + ky) * K + kx] *
                              x[(((size_t(b) * is.c + i) * ID + iz) * is.h + iy) * is.w + ix];
                        }
        }
        break;
      }
      case Op::upsample: {  // F.interpolate's definitions, written out in double
        const auto src = [&](int o, int in, int out) {
          const int s = nd.stride;
          if (nd.resample == Resample::nearest) return double(o / s);
          if (nd.resample == Resample::bilinear) return std::max(0.0, (o + 0.5) / s - 0.5);
          return out > 1 ? o * double(in - 1) / (out - 1) : 0.0;
        };
        for (int64_t b = 0; b < n; ++b)
          for (int c = 0; c < os.c; ++c)
            for (int oy = 0; oy < os.h; ++oy)
              for (int ox = 0; ox < os.w; ++ox) {
                const double sy = src(oy, is.h, os.h), sx = src(ox, is.w, os.w);
                const int y0 = std::min(int(sy), is.h - 1), x0 = std::min(int(sx), is.w - 1);
                const int y1 = std::min(y0 + 1, is.h - 1), x1 = std::min(x0 + 1, is.w - 1);
                const double wy = sy - y0, wx = sx - x0;
                const auto at = [&](int iy, int ix) { return x[((size_t(b) * is.c + c) * is.h + iy) * is.w + ix]; };
                y[((size_t(b) * os.c + c) * os.h + oy) * os.w + ox] =
                    (1 - wy) * ((1 - wx) * at(y0, x0) + wx * at(y0, x1)) + wy * ((1 - wx) * at(y1, x0) + wx * at(y1, x1));
              }
        break;
      }
      case Op::linear:
        for (int64_t b = 0; b < n; ++b)
          for (int o = 0; o < os.c; ++o) {
            double s = P[off(1) + o];
            for (int i = 0; i < is.c; ++i) s += P[off(0) + size_t(o) * is.c + i] * x[size_t(b) * is.c + i];
            y[size_t(b) * os.c + o] = s;
          }
        break;
      case Op::relu:
        for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] > 0 ? x[i] : 0.0;
        break;
      case Op::mul: {
        const auto& s = T[static_cast<size_t>(nd.inputs[1])];
        const size_t hw = size_t(is.h) * is.w;
        for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] * s[i / hw];
        break;
      }
      case Op::act:  // PyTorch's definitions, written out
        for (size_t i = 0; i < y.size(); ++i) {
          const double v = x[i];
          switch (nd.act) {
            case Act::relu6: y[i] = std::min(std::max(v, 0.0), 6.0); break;
            case Act::sigmoid: y[i] = 1 / (1 + std::exp(-v)); break;
            case Act::silu: y[i] = v / (1 + std::exp(-v)); break;
            case Act::hardswish: y[i] = v * std::min(std::max(v + 3, 0.0), 6.0) / 6; break;
            case Act::gelu: y[i] = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); break;
            case Act::hardsigmoid: y[i] = std::min(std::max(v + 3, 0.0), 6.0) / 6; break;
            case Act::leaky_relu: y[i] = v > 0 ? v : nd.slope * v; break;
            case Act::tanh: y[i] = std::tanh(v); break;
            case Act::scale: y[i] = double(nd.slope) * v; break;
          }
        }
        break;
      case Op::maxpool:
      case Op::avgpool: {
        // A volume: MaxPool3d / AvgPool3d, a KH-deep window too.
        const int ID = is.volume() ? is.d : 1, OD = os.volume() ? os.d : 1, KD = is.volume() ? nd.kernel : 1;
        for (int64_t b = 0; b < n; ++b)
          for (int c = 0; c < os.c; ++c)
            for (int oz = 0; oz < OD; ++oz)
              for (int oy = 0; oy < os.h; ++oy)
                for (int ox = 0; ox < os.w; ++ox) {
                  // PyTorch: max-pool padding is -inf, average-pool padding counts as 0.
                  const int KH = nd.kernel, KW = nd.kernel_w ? nd.kernel_w : nd.kernel;
                  double m = -INFINITY, s = 0;
                  for (int kz = 0; kz < KD; ++kz)
                    for (int ky = 0; ky < KH; ++ky)
                      for (int kx = 0; kx < KW; ++kx) {
                        const int iz = is.volume() ? oz * nd.stride - nd.pad + kz : 0;
                        const int iy = oy * nd.stride - nd.pad + ky, ix = ox * nd.stride - nd.pad + kx;
                        if (iz < 0 || iz >= ID || iy < 0 || iy >= is.h || ix < 0 || ix >= is.w) continue;
                        const double v = x[(((size_t(b) * is.c + c) * ID + iz) * is.h + iy) * is.w + ix];
                        m = std::max(m, v);
                        s += v;
                      }
                  y[(((size_t(b) * os.c + c) * OD + oz) * os.h + oy) * os.w + ox] =
                      nd.op == Op::maxpool ? m : s / (KD * KH * KW);
                }
        break;
      }
      case Op::dropout: {
        const bool on = training && ctx.training && nd.p > 0;
        const uint64_t thr = dropout_threshold(nd.p);
        const int64_t per = os.numel();
        for (int64_t b = 0; b < n; ++b) {
          const uint64_t key =
              dropout_sample_key(ctx.seed, ctx.step, nd.index, ctx.sample_ids ? ctx.sample_ids[b] : b);
          for (int64_t j = 0; j < per; ++j) {
            const double v = x[b * per + j];
            y[b * per + j] = !on ? v : dropout_keep(key, j, thr) ? v / (1.0 - nd.p) : 0.0;
          }
        }
        break;
      }
      case Op::stochastic_depth: {  // torchvision.ops.StochasticDepth(p, "row")
        const bool on = training && ctx.training && nd.p > 0;
        const uint64_t thr = dropout_threshold(nd.p);
        const int64_t per = os.numel();
        for (int64_t b = 0; b < n; ++b) {
          const uint64_t key =
              dropout_sample_key(ctx.seed, ctx.step, nd.index, ctx.sample_ids ? ctx.sample_ids[b] : b);
          const double s = !on ? 1.0 : dropout_keep(key, 0, thr) ? 1.0 / (1.0 - nd.p) : 0.0;
          for (int64_t j = 0; j < per; ++j) y[b * per + j] = x[b * per + j] * s;
        }
        break;
      }
      case Op::layernorm: {  // over the channels of each position
        const int64_t hw = int64_t{is.h} * is.w;
        for (int64_t b = 0; b < n; ++b)
          for (int64_t k = 0; k < hw; ++k) {
            double m = 0, v = 0;
            for (int c = 0; c < is.c; ++c) m += x[(b * is.c + c) * hw + k];
            m /= is.c;
            for (int c = 0; c < is.c; ++c) v += std::pow(x[(b * is.c + c) * hw + k] - m, 2);
            const double inv = 1.0 / std::sqrt(v / is.c + nd.eps);
            for (int c = 0; c < is.c; ++c) {
              const size_t i = (b * is.c + c) * hw + k;
              y[i] = (x[i] - m) * inv * P[off(0) + c] + P[off(1) + c];
            }
          }
        break;
      }
      case Op::channel_slice:
      case Op::channel_shuffle: {  // output channel j of input channel src(j)
        const size_t hw = size_t(is.h) * is.w;
        const int per = is.c / std::max(nd.groups, 1);
        for (int64_t b = 0; b < n; ++b)
          for (int j = 0; j < os.c; ++j) {
            const int src = nd.op == Op::channel_slice ? nd.slice_begin + j : (j % nd.groups) * per + j / nd.groups;
            for (size_t k = 0; k < hw; ++k) y[(b * os.c + j) * hw + k] = x[(b * is.c + src) * hw + k];
          }
        break;
      }
      case Op::adaptive_avgpool:  // PyTorch's bins
        for (int64_t b = 0; b < n; ++b)
          for (int c = 0; c < os.c; ++c)
            for (int i = 0; i < os.h; ++i)
              for (int j = 0; j < os.w; ++j) {
                const int y0 = i * is.h / os.h, y1 = ((i + 1) * is.h + os.h - 1) / os.h;
                const int x0 = j * is.w / os.w, x1 = ((j + 1) * is.w + os.w - 1) / os.w;
                double s = 0;
                for (int a = y0; a < y1; ++a)
                  for (int q = x0; q < x1; ++q) s += x[((size_t(b) * is.c + c) * is.h + a) * is.w + q];
                y[((size_t(b) * os.c + c) * os.h + i) * os.w + j] = s / ((y1 - y0) * (x1 - x0));
              }
        break;
      case Op::layer_scale: {
        const size_t hw = size_t(is.h) * is.w;
        for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] * P[off(0) + (i / hw) % is.c];
        break;
      }
      case Op::flatten:
        y = x;
        break;
      case Op::bn: {
        const int64_t hw = int64_t{is.volume() ? is.d : 1} * is.h * is.w, m = n * hw;  // BatchNorm3d: D·H·W
        BnStats st;
        st.count = m;
        for (int c = 0; c < is.c; ++c) {
          double mean, var;
          if (training) {
            double s = 0, s2 = 0;
            for (int64_t b = 0; b < n; ++b)
              for (int64_t k = 0; k < hw; ++k) s += x[(b * is.c + c) * hw + k];
            mean = s / m;
            for (int64_t b = 0; b < n; ++b)
              for (int64_t k = 0; k < hw; ++k) s2 += std::pow(x[(b * is.c + c) * hw + k] - mean, 2);
            var = s2 / m;
          } else {
            mean = P[off(2) + c];
            var = P[off(3) + c];
          }
          st.mean.push_back(mean);
          st.var.push_back(var);
          const double inv = 1.0 / std::sqrt(var + nd.eps);
          for (int64_t b = 0; b < n; ++b)
            for (int64_t k = 0; k < hw; ++k) {
              const size_t i = (b * is.c + c) * hw + k;
              y[i] = (x[i] - mean) * inv * P[off(0) + c] + P[off(1) + c];
            }
        }
        if (training) r.bn[nd.index] = st;
        break;
      }
      case Op::concat: {
        size_t at = 0;
        const size_t out_per = static_cast<size_t>(os.numel());
        for (int t : nd.inputs) {
          const size_t per = static_cast<size_t>(shape_of(t).numel());
          for (int64_t b = 0; b < n; ++b)
            std::copy_n(T[t].begin() + b * per, per, y.begin() + b * out_per + at);
          at += per;
        }
        break;
      }
      case Op::add: {
        const auto& x2 = T[nd.inputs[1]];
        for (size_t i = 0; i < y.size(); ++i) y[i] = x[i] + x2[i];
        break;
      }
    }
    T[nd.index + 1] = std::move(y);
  }
  const auto& z = T[g.output];
  const int C = g.classes;
  r.logits = z;
  if (labels)
    for (int64_t b = 0; b < n; ++b) {
      double m = -INFINITY, s = 0;
      for (int j = 0; j < C; ++j) m = std::max(m, z[b * C + j]);
      for (int j = 0; j < C; ++j) s += std::exp(z[b * C + j] - m);
      r.loss_sum += m + std::log(s) - z[b * C + labels[b]];
    }
  return r;
}

}  // namespace cnnscale::nn::ref
