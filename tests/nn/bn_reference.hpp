// bn_reference.hpp — batch norm in double over an NHWC tensor (rows × c, channel fastest),
// the reference the NHWC batch-norm kernels are checked against on a GPU
// (test_cuda_batchnorm_gpu.cpp) and on the CPU emulator (test_bn_emulated.cpp): batch
// statistics (biased variance), the running statistics' update (unbiased), the forward
// y = relu?((x − mean)·invstd·γ + β + z?) and the backward from dy masked by the kernels'
// own y (a value they rounded to 0 masks), with dz and accumulation.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace cnnscale::test {

// A tensor of the kernels' element type in double: E::to widens one element (bf16 or
// float; each test's own element traits).
template <class E, class H>
std::vector<double> to_doubles(const std::vector<H>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = E::to(v[i]);
  return d;
}

struct BnStatistics {
  std::vector<double> mean, var, invstd;  // biased variance
};

inline BnStatistics bn_statistics(const std::vector<double>& x, int64_t rows, int c, double eps) {
  BnStatistics s{std::vector<double>(c, 0.0), std::vector<double>(c, 0.0), std::vector<double>(c)};
  for (size_t e = 0; e < x.size(); ++e) s.mean[e % c] += x[e];
  for (int ch = 0; ch < c; ++ch) s.mean[ch] /= double(rows);
  for (size_t e = 0; e < x.size(); ++e) s.var[e % c] += std::pow(x[e] - s.mean[e % c], 2);
  for (int ch = 0; ch < c; ++ch) s.var[ch] /= double(rows), s.invstd[ch] = 1 / std::sqrt(s.var[ch] + eps);
  return s;
}

// The running statistics after one update with momentum from rm, rv.
inline void bn_running(const BnStatistics& s, int64_t rows, double momentum, const std::vector<float>& rm,
                       const std::vector<float>& rv, std::vector<double>* rm_ref, std::vector<double>* rv_ref) {
  const size_t c = s.mean.size();
  rm_ref->assign(c, 0), rv_ref->assign(c, 0);
  for (size_t ch = 0; ch < c; ++ch) {
    (*rm_ref)[ch] = (1 - momentum) * rm[ch] + momentum * s.mean[ch];
    (*rv_ref)[ch] = (1 - momentum) * rv[ch] + momentum * s.var[ch] * (rows > 1 ? double(rows) / (rows - 1) : 1.0);
  }
}

// z: nullptr without a residual.
inline std::vector<double> bn_forward(const std::vector<double>& x, const std::vector<double>* z,
                                      const std::vector<double>& mean, const std::vector<double>& invstd,
                                      const std::vector<float>& gamma, const std::vector<float>& beta, bool relu) {
  const size_t c = mean.size();
  std::vector<double> y(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    const size_t ch = e % c;
    const double v = (x[e] - mean[ch]) * invstd[ch] * gamma[ch] + beta[ch] + (z ? (*z)[e] : 0.0);
    y[e] = relu ? std::max(v, 0.0) : v;
  }
  return y;
}

struct BnGradients {
  std::vector<double> dx, dz, dgamma, dbeta;  // dz: the masked dy (the residual's gradient)
};

// y: the kernels' forward output (the ReLU's mask); dx0, dz0: what accumulation adds to
// (nullptr: overwrite).
inline BnGradients bn_backward(const std::vector<double>& x, const std::vector<double>& dy,
                               const std::vector<double>& y, const BnStatistics& s, const std::vector<float>& gamma,
                               bool relu, const std::vector<double>* dx0, const std::vector<double>* dz0) {
  const size_t c = s.mean.size(), n = x.size();
  const double rows = double(n / c);
  std::vector<double> g(n);
  BnGradients r{std::vector<double>(n), std::vector<double>(n), std::vector<double>(c, 0.0),
                std::vector<double>(c, 0.0)};
  for (size_t e = 0; e < n; ++e) {
    const size_t ch = e % c;
    g[e] = relu && !(y[e] > 0) ? 0.0 : dy[e];
    r.dbeta[ch] += g[e];
    r.dgamma[ch] += g[e] * (x[e] - s.mean[ch]) * s.invstd[ch];
  }
  for (size_t e = 0; e < n; ++e) {
    const size_t ch = e % c;
    const double xh = (x[e] - s.mean[ch]) * s.invstd[ch];
    r.dx[e] = gamma[ch] * s.invstd[ch] * (g[e] - r.dbeta[ch] / rows - xh * r.dgamma[ch] / rows) + (dx0 ? (*dx0)[e] : 0.0);
    r.dz[e] = g[e] + (dz0 ? (*dz0)[e] : 0.0);
  }
  return r;
}

}  // namespace cnnscale::test
