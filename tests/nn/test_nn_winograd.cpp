// test_nn_winograd.cpp — the Winograd F(2×2, 3×3) convolutions (nn/conv_winograd.cpp) against
// oneDNN's direct ones (CNNSCALE_CONV_ALG=direct) in a whole training step: the loss, every
// parameter's gradient (weights, biases, through backward-data into earlier layers) and the
// evaluation logits, for padding 0, 1 and 2, odd sizes (half-outside tiles), an image whose
// tiles span several blocks, and the same bits on a second run. oneDNN's ISA is capped at
// AVX2 before its first primitive, so the Winograd path is taken on any AVX2 CPU (an
// AVX-512 one included); on a CPU without AVX2 and FMA the path must not be taken, and the
// two runs are then bitwise equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "nn/model.hpp"
#include "nn/net.hpp"
#include "random_batch.hpp"

using namespace cnnscale;

namespace {

const bool kIsaCapped = [] {
  try {
    dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}();

bool winograd_cpu() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

struct Step {
  double loss = 0;
  std::vector<float> grad, logits;
};

Step run(const char* spec, const SampleShape& shape, int64_t n, bool direct) {
  if (direct) setenv("CNNSCALE_CONV_ALG", "direct", 1);
  auto m = make_model(spec, shape, 3);
  m->init_params(5);
  m->prepare(n, Precision::fp32);
  unsetenv("CNNSCALE_CONV_ALG");
  test::RandomBatch d(n, shape, 3);
  Step s;
  s.loss = m->forward_backward(d.x.data(), d.y.data(), n, test::ctx_for(d, n), {});
  s.grad.assign(m->grad_data(), m->grad_data() + m->param_count());
  s.logits.resize(size_t(n * 3));
  m->forward_eval(d.x.data(), n, s.logits.data());
  return s;
}

void expect_close(const char* spec, const SampleShape& shape, int64_t n, bool winograd = true) {
  SCOPED_TRACE(spec);
  ASSERT_TRUE(kIsaCapped);
  const Step w = run(spec, shape, n, false), d = run(spec, shape, n, true);
  ASSERT_EQ(w.grad.size(), d.grad.size());
  double gmax = 0, worst = 0, lmax = 0, lworst = 0;
  bool same = true;
  for (size_t i = 0; i < d.grad.size(); ++i) {
    gmax = std::max(gmax, double(std::abs(d.grad[i])));
    worst = std::max(worst, double(std::abs(w.grad[i] - d.grad[i])));
    same = same && w.grad[i] == d.grad[i];
  }
  for (size_t i = 0; i < d.logits.size(); ++i) {
    lmax = std::max(lmax, double(std::abs(d.logits[i])));
    lworst = std::max(lworst, double(std::abs(w.logits[i] - d.logits[i])));
  }
  ASSERT_GT(gmax, 0);
  std::printf("winograd vs direct: gradients max|diff|/max|grad| %.2e, logits %.2e\n", worst / gmax,
              lworst / std::max(lmax, 1e-30));
  EXPECT_NEAR(w.loss, d.loss, 1e-5 * std::abs(d.loss));
  EXPECT_LE(worst, 5e-6 * gmax) << "worst gradient difference " << worst << " of max " << gmax;
  EXPECT_LE(lworst, 5e-6 * lmax) << "worst logit difference " << lworst << " of max " << lmax;
  if (winograd && winograd_cpu())
    EXPECT_FALSE(same) << "bitwise oneDNN's direct gradients: the Winograd path was not taken";
  else EXPECT_TRUE(same) << "the direct path must run here";
  const Step again = run(spec, shape, n, false);
  EXPECT_EQ(again.grad, w.grad) << "not the same bits on a second run";
  EXPECT_EQ(again.loss, w.loss);
}

}  // namespace

// Padding 1 (ResNet's), 0 (backward-data pads by 2) and 2, with biases, a batch norm and
// ReLU between, odd image sizes.
TEST(WinogradConv, MatchesDirectPaddings) {
  expect_close("conv(64,3,1,1) bn relu conv(72,3,1,1) bn relu conv(64,3,1,0) relu conv(64,3,1,2) flatten linear(3)",
               {64, 15, 13}, 4);
  expect_close("conv(64,3,1,1) flatten linear(3)", {64, 1, 1}, 2);  // one half-used tile per sample
}

// 64 channels at 71×67, batch 4: 4896 output tiles in blocks of 240 (the last one short).
TEST(WinogradConv, MatchesDirectAcrossTileBlocks) {
  expect_close("conv(64,3,1,1) bn relu conv(64,3,1,1) flatten linear(3)", {64, 71, 67}, 4);
}

// Not taken: fewer than 64 channels on either side (mnist_cnn's 32 → 64), a stride, 5×5, two
// groups: oneDNN's direct kernels, bitwise.
TEST(WinogradConv, NotTakenOutsideItsRule) {
  expect_close("conv(64,3,1,1) flatten linear(3)", {32, 9, 9}, 2, false);
  expect_close("conv(32,3,1,1) flatten linear(3)", {64, 9, 9}, 2, false);
  expect_close("conv(64,3,2,1) conv(64,5,1,2) conv(64,3,1,1,2) flatten linear(3)", {64, 9, 9}, 2, false);
}

// A sample's convolution outputs do not depend on the batch it is in (what lets 1 rank × B
// and W ranks × B/W train the same model; tests/train/sync_bn.sh): the last convolution's
// output for 4 samples in one batch, in two batches of 2 and in four of 1, bitwise; 1,748
// tiles in blocks of 192, so the samples sit at other rows of other blocks.
TEST(WinogradConv, SameBitsWhateverTheBatch) {
  ASSERT_TRUE(kIsaCapped);
  const char* spec = "conv(64,3,1,1) leaky_relu conv(72,3,1,1) leaky_relu conv(64,3,1,1) flatten linear(3)";
  const SampleShape shape{64, 45, 37};
  const int64_t per = 64 * 45 * 37;
  test::RandomBatch d(4, shape, 3);
  auto conv_out = [&](int64_t batch) {
    auto m = make_model(spec, shape, 3);
    m->init_params(5);
    m->prepare(batch, Precision::fp32);
    auto& net = dynamic_cast<nn::Net&>(*m);
    net.set_capture(true);
    std::vector<float> y;
    for (int64_t off = 0; off < 4; off += batch) {
      StepContext ctx = test::ctx_for(d, 4);
      ctx.sample_ids = d.ids.data() + off;
      m->forward_backward(d.x.data() + off * per, d.y.data() + off, batch, ctx, {});
      const auto c = net.captured(4);  // the third convolution's output, plain NCHW
      y.insert(y.end(), c.begin(), c.end());
    }
    return y;
  };
  const auto whole = conv_out(4);
  ASSERT_EQ(whole.size(), size_t(4 * per));
  EXPECT_TRUE(whole == conv_out(2)) << "batches of 2 differ from one of 4";
  EXPECT_TRUE(whole == conv_out(1)) << "batches of 1 differ from one of 4";
}
