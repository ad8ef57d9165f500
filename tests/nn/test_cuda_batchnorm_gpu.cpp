// test_cuda_batchnorm_gpu.cpp — our NHWC batch-norm kernels (src/nn/cuda/batchnorm_nhwc.hpp)
// against a host reference in double, in bf16 and fp32: training forward (output, saved
// mean and 1/std, running statistics with the unbiased variance), evaluation forward,
// backward (dx, dγ, dβ), each plain, with the fused ReLU and with the fused residual add
// + ReLU (the residual's gradient), overwriting and accumulating; channel counts that take
// every vector width (16-, 8-, 4-, 2-byte accesses), one row chunk and hundreds; a mean far
// from zero (the shifted sums); a NaN reaching the output; the same bits on a second run.
// The model-level check (a whole network with CNNSCALE_GPU_BN=own against the CPU model) is
// CudaBf16.LayersAndModelsCloseToCpuFp32 in test_cuda_model_gpu.cpp. SKIPs without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bn_reference.hpp"
#include "nn/cuda/batchnorm_nhwc.hpp"
#include "nn/rng.hpp"
#include "util/bf16.hpp"

using namespace cnnscale;
using nn::cuda::bf16_t;

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
bool bf16_capable() {
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess && major >= 8;
}

// A device buffer of n elements of T.
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)), cudaSuccess);
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
};

// Element type traits: host storage (bf16 as its bits) and conversions.
template <class T>
struct Elem;
template <>
struct Elem<float> {
  using H = float;
  static H from(double v) { return static_cast<float>(v); }
  static double to(H v) { return v; }
  // relative to the tensor's largest reference value: the float mean of inputs near 1000 is
  // 3e-5 from the exact one (as cuDNN's and PyTorch's saved mean), times γ·invstd ≈ 2.6
  static constexpr double tol = 1e-4;
  static constexpr const char* name = "fp32";
};
template <>
struct Elem<bf16_t> {
  using H = uint16_t;
  static H from(double v) { return float_to_bf16(static_cast<float>(v)); }
  static double to(H v) { return bf16_to_float(v); }
  static constexpr double tol = 8e-3;  // one bf16 rounding (2^-8 relative) and a little
  static constexpr const char* name = "bf16";
};

template <class T>
std::vector<typename Elem<T>::H> random_tensor(size_t count, uint64_t seed, double offset, double scale) {
  nn::SplitMix64 r(seed);
  std::vector<typename Elem<T>::H> h(count);
  for (auto& v : h) v = Elem<T>::from(offset + scale * r.uniform(-1, 1));
  return h;
}

template <class T>
void upload(T* d, const std::vector<typename Elem<T>::H>& h) {
  ASSERT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
}
template <class H, class T>
std::vector<H> download(const T* d, size_t count) {
  std::vector<H> h(count);
  EXPECT_EQ(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// max |got − want| / max(1e-30, max |want|): a tensor's error relative to its scale.
template <class H>
double rel_err(const std::vector<H>& got, const std::vector<double>& want, double (*to)(H)) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(to(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}
double to_f(float v) { return v; }

struct Case {
  int64_t rows;
  int c;
  double offset;  // the inputs' mean (far from 0: the shifted sums)
};

// One case: forward_train, backward, forward_eval against the reference; twice, bitwise.
// misalign: every activation one element past a 256-byte boundary, so the kernels take
// one-element accesses whatever the channel count.
template <class T>
void check_case(const Case& k, bool relu, bool res, bool accumulate, bool misalign = false) {
  using E = Elem<T>;
  using H = typename E::H;
  SCOPED_TRACE(std::string(E::name) + " rows=" + std::to_string(k.rows) + " c=" + std::to_string(k.c) +
               " offset=" + std::to_string(k.offset) + (relu ? " relu" : "") + (res ? " +z" : "") +
               (accumulate ? " accumulate" : "") + (misalign ? " misaligned" : ""));
  const int64_t R = k.rows;
  const int C = k.c;
  const size_t N = static_cast<size_t>(R) * C;
  const double eps = 1e-5, momentum = 0.1;
  const auto x = random_tensor<T>(N, 1 + R + C, k.offset, 2.0);
  const auto z = random_tensor<T>(N, 2 + R, 0.0, 1.0);
  const auto dy = random_tensor<T>(N, 3 + C, 0.0, 1.0);
  const auto dx0 = random_tensor<T>(N, 4, 0.0, 1.0);  // what accumulate adds to
  const auto dz0 = random_tensor<T>(N, 5, 0.0, 1.0);
  std::vector<float> gamma(C), beta(C), rm(C), rv(C);
  nn::SplitMix64 r(7);
  for (int c = 0; c < C; ++c)
    gamma[c] = float(r.uniform(0.5, 1.5)), beta[c] = float(r.uniform(-0.5, 0.5)), rm[c] = float(r.uniform(-1, 1)),
    rv[c] = float(r.uniform(0.5, 2));

  const size_t off = misalign ? 1 : 0;
  Dev<T> dx_b(N + 1), dz_b(N + 1), dy_b(N + 1), y_b(N + 1), x_b(N + 1), z_b(N + 1);
  struct {
    T* p;
  } dx_{dx_b.p + off}, dz_{dz_b.p + off}, dy_{dy_b.p + off}, y_{y_b.p + off}, x_{x_b.p + off}, z_{z_b.p + off};
  Dev<float> g_(C), b_(C), rm_(C), rv_(C), sm_(C), si_(C), dg_(C), db_(C);
  Dev<char> ws(nn::cuda::bn::workspace_bytes(R, C, sizeof(T) == 2));
  upload<T>(x_.p, x), upload<T>(z_.p, z), upload<T>(dy_.p, dy);
  ASSERT_EQ(cudaMemcpy(g_.p, gamma.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b_.p, beta.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);

  // The reference, in double, from the values the kernels see.
  const auto doubles = [](const std::vector<H>& v) { return test::to_doubles<E>(v); };
  const std::vector<double> xd = doubles(x), zd = doubles(z), dyd = doubles(dy), dx0d = doubles(dx0),
                            dz0d = doubles(dz0);
  const test::BnStatistics ref = test::bn_statistics(xd, R, C, eps);
  const std::vector<double>& mean = ref.mean;
  const std::vector<double>& invstd = ref.invstd;
  const std::vector<double> y_ref = test::bn_forward(xd, res ? &zd : nullptr, mean, invstd, gamma, beta, relu);

  std::vector<H> first_y, first_dx, first_dz;
  std::vector<float> first_dg;
  for (int run = 0; run < 2; ++run) {
    ASSERT_EQ(cudaMemcpy(rm_.p, rm.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(rv_.p, rv.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
    upload<T>(dx_.p, dx0), upload<T>(dz_.p, dz0);
    const nn::cuda::bn::Stats st{g_.p, b_.p, rm_.p, rv_.p};
    nn::cuda::bn::forward_train<T>(x_.p, res ? z_.p : nullptr, y_.p, R, C, st, momentum, eps, sm_.p, si_.p, relu,
                                   ws.p, nullptr);
    nn::cuda::bn::backward<T>(x_.p, relu ? y_.p : nullptr, dy_.p, dx_.p, accumulate, res ? dz_.p : nullptr, accumulate,
                              R, C, g_.p, sm_.p, si_.p, dg_.p, db_.p, relu, ws.p, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto y = download<H>(y_.p, N), dx = download<H>(dx_.p, N), dz = download<H>(dz_.p, N);
    const auto dg = download<float>(dg_.p, C), db = download<float>(db_.p, C);
    if (run == 1) {
      EXPECT_EQ(std::memcmp(y.data(), first_y.data(), N * sizeof(H)), 0) << "forward not bitwise reproducible";
      EXPECT_EQ(std::memcmp(dx.data(), first_dx.data(), N * sizeof(H)), 0) << "dx not bitwise reproducible";
      EXPECT_EQ(std::memcmp(dz.data(), first_dz.data(), N * sizeof(H)), 0) << "dz not bitwise reproducible";
      EXPECT_EQ(std::memcmp(dg.data(), first_dg.data(), C * sizeof(float)), 0) << "dγ not bitwise reproducible";
      break;
    }
    first_y = y, first_dx = dx, first_dz = dz, first_dg = dg;
    EXPECT_LT(rel_err<H>(y, y_ref, E::to), E::tol) << "y";
    const auto sm = download<float>(sm_.p, C), si = download<float>(si_.p, C);
    const auto rm2 = download<float>(rm_.p, C), rv2 = download<float>(rv_.p, C);
    std::vector<double> rm_ref, rv_ref;
    test::bn_running(ref, R, momentum, rm, rv, &rm_ref, &rv_ref);
    EXPECT_LT(rel_err<float>(sm, mean, to_f), 2e-5) << "saved mean";
    EXPECT_LT(rel_err<float>(si, invstd, to_f), 2e-5) << "saved 1/std";
    EXPECT_LT(rel_err<float>(rm2, rm_ref, to_f), 2e-5) << "running mean";
    EXPECT_LT(rel_err<float>(rv2, rv_ref, to_f), 2e-5) << "running variance (unbiased)";

    // Backward reference: g masked by the kernels' own y (a value rounded to 0 masks).
    const test::BnGradients gr = test::bn_backward(xd, dyd, doubles(y), ref, gamma, relu, accumulate ? &dx0d : nullptr,
                                                   accumulate ? &dz0d : nullptr);
    const std::vector<double>&dx_ref = gr.dx, &dz_ref = gr.dz;
    EXPECT_LT(rel_err<float>(db, gr.dbeta, to_f), 1e-5) << "dβ";
    EXPECT_LT(rel_err<float>(dg, gr.dgamma, to_f), 1e-4) << "dγ";
    EXPECT_LT(rel_err<H>(dx, dx_ref, E::to), E::tol * 2) << "dx";
    if (res) EXPECT_LT(rel_err<H>(dz, dz_ref, E::to), E::tol) << "dz";
    else EXPECT_EQ(std::memcmp(dz.data(), dz0.data(), N * sizeof(H)), 0) << "dz written without a residual";
  }

  // Evaluation: the running statistics (as they are on the device now: updated once).
  const auto rmd = download<float>(rm_.p, C), rvd = download<float>(rv_.p, C);
  std::vector<double> em(C), eis(C);
  for (int c = 0; c < C; ++c) em[c] = rmd[c], eis[c] = 1 / std::sqrt(double(rvd[c]) + eps);
  const std::vector<double> ye_ref = test::bn_forward(xd, res ? &zd : nullptr, em, eis, gamma, beta, relu);
  const nn::cuda::bn::Stats st{g_.p, b_.p, rm_.p, rv_.p};
  nn::cuda::bn::forward_eval<T>(x_.p, res ? z_.p : nullptr, y_.p, R, C, st, eps, relu, ws.p, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_LT(rel_err<H>(download<H>(y_.p, N), ye_ref, E::to), E::tol) << "evaluation y";
  EXPECT_EQ(download<float>(rm_.p, C), rmd) << "evaluation changed the running mean";
}

// c = 64: 16-byte accesses in both types; 12: 8-byte bf16 / 16-byte fp32; 6: 4 / 8 bytes;
// 5: one element per access. Rows from 1 chunk to hundreds (200000 rows: 512 chunks).
const Case kCases[] = {{1000, 64, 0.0}, {777, 12, 0.5}, {301, 6, -1.0}, {3, 5, 0.0}, {200000, 64, 0.0},
                       {2000, 2048, 0.0}, {5000, 32, 1000.0}};

// CNNSCALE_BN_TEST_CASES=small (tests/nn/sanitizer_gpu.sh, where every access is
// instrumented and the host reference of the large cases would take most of its budget):
// only the cases of at most 200000 elements, which still take every access width, the
// fusions, accumulation, the misaligned path and several row chunks (5000 × 32).
bool small_cases_only() {
  const char* v = std::getenv("CNNSCALE_BN_TEST_CASES");
  return v && std::string(v) == "small";
}

template <class T>
void check_all() {
  const bool small = small_cases_only();
  for (const Case& k : kCases)
    if (!small || k.rows * k.c <= 200000)
      for (int f = 0; f < 3; ++f)
        for (bool acc : {false, true}) check_case<T>(k, f >= 1, f == 2, acc);
  check_case<T>({1000, 64, 0.0}, true, true, true, true);  // the one-element access path
}

}  // namespace

TEST(CudaBatchNormNhwc, Bf16AgainstDoubleReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  if (!bf16_capable()) GTEST_SKIP() << "GPU 0 has no bf16 (compute capability < 8.0)";
  check_all<bf16_t>();
}

TEST(CudaBatchNormNhwc, Fp32AgainstDoubleReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  check_all<float>();
}

// A NaN in one channel's input makes that channel's output NaN (through the fused ReLU
// too: PyTorch's ReLU keeps NaN) and its backward's dx and dγ NaN, and leaves the other
// channels finite.
TEST(CudaBatchNormNhwc, NanReachesTheOutputOfItsChannelOnly) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  const int64_t R = 100;
  const int C = 8;
  auto x = random_tensor<float>(R * C, 9, 0, 1);
  x[37 * C + 3] = NAN;
  Dev<float> x_(R * C), y_(R * C), g_(C), b_(C), rm_(C), rv_(C), sm_(C), si_(C);
  Dev<char> ws(nn::cuda::bn::workspace_bytes(R, C, false));
  upload<float>(x_.p, x);
  const std::vector<float> ones(C, 1.f), zeros(C, 0.f);
  for (float* p : {g_.p, rv_.p}) ASSERT_EQ(cudaMemcpy(p, ones.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
  for (float* p : {b_.p, rm_.p}) ASSERT_EQ(cudaMemcpy(p, zeros.data(), C * 4, cudaMemcpyHostToDevice), cudaSuccess);
  nn::cuda::bn::forward_train<float>(x_.p, nullptr, y_.p, R, C, {g_.p, b_.p, rm_.p, rv_.p}, 0.1, 1e-5, sm_.p, si_.p,
                                     true, ws.p, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto y = download<float>(y_.p, R * C);
  for (int64_t i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      if (c == 3) EXPECT_TRUE(std::isnan(y[i * C + c])) << "row " << i;
      else EXPECT_TRUE(std::isfinite(y[i * C + c])) << "row " << i << " channel " << c;
    }
  // Backward: that channel's dx and dγ NaN (its mean is), the others finite.
  Dev<float> dy_(R * C), dx_(R * C), dg_(C), db_(C);
  upload<float>(dy_.p, random_tensor<float>(R * C, 10, 0, 1));
  nn::cuda::bn::backward<float>(x_.p, y_.p, dy_.p, dx_.p, false, nullptr, false, R, C, g_.p, sm_.p, si_.p, dg_.p,
                                db_.p, true, ws.p, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto dx = download<float>(dx_.p, R * C), dg = download<float>(dg_.p, C);
  EXPECT_TRUE(std::isnan(dg[3]));
  for (int c = 0; c < C; ++c)
    if (c != 3) {
      EXPECT_TRUE(std::isfinite(dg[c])) << "dγ of channel " << c;
    }
  for (int64_t i = 0; i < R; ++i)
    for (int c = 0; c < C; ++c) {
      if (c == 3) EXPECT_TRUE(std::isnan(dx[i * C + c])) << "dx row " << i;
      else EXPECT_TRUE(std::isfinite(dx[i * C + c])) << "dx row " << i << " channel " << c;
    }
}
