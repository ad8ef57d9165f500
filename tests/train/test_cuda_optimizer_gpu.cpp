// test_cuda_optimizer_gpu.cpp — the CUDA optimisers against the CPU optimisers
// (themselves checked against PyTorch's formulas in test_optimizer.cpp) on the same
// parameters and gradients over several steps: parameters and state agree (to fp32
// rounding; the kernels avoid fused multiply-adds, so normally to the bit),
// non-trainable ranges are untouched, state() is a two-way host view (written host
// state is used by the next step or after commit_state(), as on resume) and
// state_view() a one-way one (a checkpoint's read leaves the device state as it is).
// SKIPs without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/rng.hpp"
#include "train/cuda_optimizer.hpp"
#include "train/optimizer.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// A weight, a non-trainable buffer (between two trainable ranges), a bias.
std::vector<ParamInfo> layout() {
  ParamInfo b{"fc.bias", {37}, 0, 37, true, false};
  ParamInfo rm{"bn.running_mean", {5}, 37, 5, false, false};
  ParamInfo w{"fc.weight", {40, 25}, 42, 1000, true, true};
  return {w, rm, b};
}
constexpr size_t kN = 1042;

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}

void run(const OptimizerOptions& o) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  auto cpu = make_optimizer(o, layout(), kN);
  auto gpu = make_cuda_optimizer(o, layout(), kN, s);
  EXPECT_EQ(gpu->kind(), cpu->kind());
  nn::SplitMix64 r(7);
  std::vector<float> p(kN), g(kN), got(kN);
  for (auto& v : p) v = static_cast<float>(r.uniform(-1, 1));
  const std::vector<float> p0 = p;
  float *dp = nullptr, *dg = nullptr;
  ASSERT_EQ(cudaMalloc(&dp, kN * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dg, kN * sizeof(float)), cudaSuccess);
  cudaMemcpy(dp, p.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
  for (int step = 0; step < 5; ++step) {
    for (auto& v : g) v = static_cast<float>(r.uniform(-0.5, 0.5));
    cudaMemcpy(dg, g.data(), kN * sizeof(float), cudaMemcpyHostToDevice);
    const double lr = 0.05 * (step + 1);
    cpu->step(p.data(), g.data(), lr);
    gpu->step(dp, dg, lr);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), dp, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_LE(max_rel(got, p), 1e-6) << o.kind << " parameters, step " << step;
    for (size_t i = 37; i < 42; ++i) ASSERT_EQ(got[i], p0[i]) << "non-trainable element " << i << " changed";
    auto sc = cpu->state();
    if (step == 1) {
      // A checkpoint being written reads state_view(): the same values, and the device
      // copy stays the state, so even garbage written into the host copy (which a
      // reader must not do) is not uploaded: the next steps still match the CPU.
      auto view = gpu->state_view();
      ASSERT_EQ(view.size(), sc.size());
      for (size_t k = 0; k < sc.size(); ++k) {
        EXPECT_EQ(view[k].first, sc[k].first);
        EXPECT_LE(max_rel(*view[k].second, *sc[k].second), 1e-6) << sc[k].first << ", state_view";
        for (auto& v : const_cast<std::vector<float>&>(*view[k].second)) v = 1e30f;
      }
      EXPECT_EQ(gpu->steps_taken(), cpu->steps_taken());
      continue;
    }
    auto sg = gpu->state();
    ASSERT_EQ(sg.size(), sc.size());
    for (size_t k = 0; k < sc.size(); ++k) {
      EXPECT_EQ(sg[k].first, sc[k].first);
      ASSERT_EQ(sg[k].second->size(), sc[k].second->size());
      EXPECT_LE(max_rel(*sg[k].second, *sc[k].second), 1e-6) << sc[k].first << ", step " << step;
    }
    if (step == 2 || step == 3) {  // a resume writes the state: both must use what was written
      for (size_t k = 0; k < sc.size(); ++k) {
        for (auto& v : *sc[k].second) v *= 0.5f;
        for (auto& v : *sg[k].second) v *= 0.5f;
      }
      if (step == 3) gpu->commit_state();  // uploaded now (as Trainer::restore_checkpoint), not at step()
    }
    EXPECT_EQ(gpu->steps_taken(), cpu->steps_taken());
  }
  cudaFree(dp), cudaFree(dg);
  gpu.reset();  // its destructor synchronises the stream: before the stream goes (found on an H200: a segfault)
  cudaStreamDestroy(s);
}

}  // namespace

TEST(CudaOptimizer, SgdPlain) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  OptimizerOptions o;
  o.momentum = 0;
  o.weight_decay = 0.01;
  run(o);
}

TEST(CudaOptimizer, SgdMomentumWeightDecay) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  OptimizerOptions o;
  o.momentum = 0.9;
  o.weight_decay = 5e-4;
  run(o);
}

TEST(CudaOptimizer, SgdNesterov) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  OptimizerOptions o;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 1e-3;
  run(o);
}

TEST(CudaOptimizer, AdamW) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  OptimizerOptions o;
  o.kind = "adamw";
  o.weight_decay = 0.01;
  run(o);
}

TEST(CudaOptimizer, BadOptionsAreTheCpuUserErrors) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible";
  OptimizerOptions o;
  o.kind = "lamb";
  EXPECT_THROW(make_cuda_optimizer(o, layout(), kN, nullptr), UserError);
  o.kind = "sgd";
  o.momentum = 0;
  o.nesterov = true;
  EXPECT_THROW(make_cuda_optimizer(o, layout(), kN, nullptr), UserError);
}
