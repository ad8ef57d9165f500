// test_nn_gradcheck.cpp — every layer's backward (oneDNN, float) against central finite
// differences of a double-precision reference forward (reference.hpp); also the float
// forward's loss against the reference. Each net puts the layer under test after a
// conv so that its backward-data is exercised through the conv's weight gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "nn/model.hpp"
#include "nn/net.hpp"
#include "nn/rng.hpp"
#include "reference.hpp"

using namespace cnnscale;

namespace {

struct Case {
  const char* spec;
  SampleShape shape;
  int classes;
  int64_t batch;
  size_t max_checked;  // trainable params checked by FD (all when 0)
};

void gradcheck(const std::string& spec, SampleShape shape, int classes, int64_t batch, size_t max_checked) {
  SCOPED_TRACE(spec);
  auto m = make_model(spec, shape, classes);
  m->init_params(7);
  m->prepare(batch, Precision::fp32);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  nn::SplitMix64 rng(99);
  std::vector<float> x(static_cast<size_t>(batch * shape.numel()));
  for (auto& v : x) v = static_cast<float>(rng.uniform(-1, 1));
  std::vector<int32_t> y(batch);
  std::vector<int64_t> ids(batch);
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(i % classes), ids[i] = 1000 + 7 * i;
  StepContext ctx;
  ctx.seed = 5;
  ctx.step = 3;
  ctx.sample_ids = ids.data();
  ctx.loss_scale = 1.f / static_cast<float>(batch);

  std::vector<double> P(m->param_data(), m->param_data() + m->param_count());
  const double loss = m->forward_backward(x.data(), y.data(), batch, ctx, {});
  std::vector<float> grad(m->grad_data(), m->grad_data() + m->param_count());
  const double ref_loss = nn::ref::forward(g, P, x.data(), y.data(), batch, ctx, true).loss_sum;
  EXPECT_NEAR(loss, ref_loss, 1e-4 * std::abs(ref_loss) + 1e-5);

  // Indices to check: every trainable element, or an even spread.
  std::vector<size_t> idx;
  for (const auto& p : g.params)
    if (p.info.trainable)
      for (size_t k = 0; k < p.info.numel; ++k) idx.push_back(p.info.offset + k);
  if (max_checked && idx.size() > max_checked) {
    std::vector<size_t> sub;
    for (size_t k = 0; k < max_checked; ++k) sub.push_back(idx[k * idx.size() / max_checked]);
    idx = sub;
  }
  const double h = 1e-6;
  double max_fd = 0, max_err = 0;
  size_t worst = 0;
  std::vector<double> fd(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    std::vector<double> Q = P;
    Q[idx[k]] = P[idx[k]] + h;
    const double lp = nn::ref::forward(g, Q, x.data(), y.data(), batch, ctx, true).loss_sum;
    Q[idx[k]] = P[idx[k]] - h;
    const double lm = nn::ref::forward(g, Q, x.data(), y.data(), batch, ctx, true).loss_sum;
    fd[k] = (lp - lm) / (2 * h) * ctx.loss_scale;
    max_fd = std::max(max_fd, std::abs(fd[k]));
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    const double err = std::abs(grad[idx[k]] - fd[k]);
    if (err > max_err) max_err = err, worst = k;
  }
  ASSERT_GT(max_fd, 1e-6) << "degenerate test: no gradient";
  EXPECT_LE(max_err, 2e-3 * max_fd) << "worst at flat index " << idx[worst] << ": analytic " << grad[idx[worst]]
                                    << " vs finite difference " << fd[worst] << " (checked " << idx.size() << ")";
  // Non-trainable buffers (bn running stats) get zero gradient.
  for (const auto& p : g.params) {
    if (p.info.trainable) continue;
    for (size_t k = 0; k < p.info.numel; ++k) {
      ASSERT_EQ(grad[p.info.offset + k], 0.f) << p.info.name;
    }
  }
}

}  // namespace

TEST(GradCheck, ConvStridePaddingReluLinear) {
  gradcheck("conv(3,3,1,1) relu conv(4,3,2,0) flatten linear(3)", {2, 7, 7}, 3, 3, 0);
}
TEST(GradCheck, MaxPool) { gradcheck("conv(4,3) maxpool(2) flatten linear(3)", {1, 8, 8}, 3, 3, 0); }
TEST(GradCheck, MaxPoolStride) { gradcheck("conv(3,2) maxpool(3,2) flatten linear(3)", {1, 8, 8}, 3, 2, 0); }
TEST(GradCheck, AvgPoolAndGap) {
  gradcheck("conv(4,3,1,1) avgpool(2) relu conv(5,1) gap flatten linear(3)", {2, 6, 6}, 3, 3, 0);
}
// Padded pools (PyTorch: max-pool padding -inf, average-pool padding counted as 0),
// also after a fused conv-relu (which must not take the unpadded fused kernel), and gap
// over a non-square map.
TEST(GradCheck, PaddedMaxPool) { gradcheck("conv(3,2) maxpool(3,2,1) flatten linear(3)", {1, 9, 9}, 3, 2, 0); }
TEST(GradCheck, PaddedMaxPoolAfterRelu) {
  gradcheck("conv(16,3) relu maxpool(2,2,1) flatten linear(3)", {1, 7, 8}, 3, 2, 0);
}
TEST(GradCheck, PaddedAvgPoolAndNonSquareGap) {
  gradcheck("conv(4,3,1,1) avgpool(3,2,1) relu conv(5,1) gap flatten linear(3)", {2, 5, 8}, 3, 3, 0);
}
TEST(GradCheck, GroupedAndDepthwiseConv) {
  gradcheck("conv(4,3,1,1,2) relu conv(4,3,2,1,4) conv(6,1) flatten linear(3)", {2, 7, 6}, 3, 3, 0);
}
// Depthwise 5×5 and strided 7×7 (EfficientNet's, ConvNeXt's): their weight gradient is
// cnnscale's own where oneDNN has no direct kernel (conv_depthwise.cpp), odd sizes so that
// the strided kernel's windows run past both edges.
TEST(GradCheck, DepthwiseLargeKernels) {
  gradcheck("conv(8,3,1,1) conv(8,5,1,2,8) relu conv(8,7,2,3,8) conv(3,1) flatten linear(3)", {2, 9, 7}, 3, 3, 0);
}
TEST(GradCheck, Activations) {
  // Inputs around the kinks of relu6 (0, 6) and hard-swish (−3, 3): scaled by the
  // conv weights of init_params, they land away from them at this seed.
  gradcheck("conv(4,3,1,1) silu conv(4,3,1,1) relu6 conv(4,1) hardswish conv(4,1) gelu conv(3,1) sigmoid flatten "
            "linear(3)",
            {2, 5, 5}, 3, 3, 0);
}
// Leaky ReLU (CosmoFlow's, slope 0.3) on maps and on flat features (PyTorch's default 0.01).
TEST(GradCheck, LeakyRelu) {
  gradcheck("conv(4,3,1,1) leaky_relu(0.3) conv(4,2) leaky_relu(0.3) flatten linear(6) leaky_relu linear(3)", {2, 5, 5},
            3, 3, 0);
}
// Transposed convolutions (U-Net's up path): kernel 2 stride 2, kernel 3 stride 2 padding 1,
// kernel 3 stride 1, with and after other layers.
TEST(GradCheck, TransposedConvolution) {
  gradcheck("conv(4,3,1,1) deconv(3,2,2) relu deconv(4,3,2,1) conv(3,3,2) deconv(2,3) flatten linear(3)", {2, 5, 4}, 3, 3,
            0);
}
// Up-sampling, nearest and bilinear (align_corners False and True), by 2 and 3, on odd sizes.
TEST(GradCheck, Upsample) {
  gradcheck("conv(3,3,1,1) upsample(2) conv(3,3,1,1) bilinear(2) relu conv(3,3,2) bilinear(3,1) flatten linear(3)",
            {2, 5, 3}, 3, 3, 0);
}
// Hard-sigmoid (MobileNetV3's squeeze-and-excitation gate) and stochastic depth in a
// residual branch (EfficientNet's MBConv): batch 6 at this step and seed drops some samples'
// branches and keeps the others' (samples 3, 4 of the first; 2, 3, 5 of the second).
TEST(GradCheck, HardSigmoidAndStochasticDepth) {
  gradcheck("conv(4,3,1,1) res(conv(4,3,1,1) hardsigmoid conv(4,1) stochastic_depth(0.5)) relu "
            "res(conv(4,1) hardswish stochastic_depth(0.4)) flatten linear(3)",
            {2, 5, 5}, 3, 6, 0);
}
// ConvNeXt's pieces: LayerNorm over the channels (after a depthwise conv) and a layer scale
// on a residual branch.
TEST(GradCheck, LayerNormAndLayerScale) {
  gradcheck("conv(6,3,1,1) layernorm res(conv(6,3,1,1,6) layernorm conv(8,1) gelu conv(6,1) layerscale(0.5)) relu "
            "flatten linear(3)",
            {2, 5, 4}, 3, 3, 0);
}
// ShuffleNetV2's unit (the input's halves, one through a branch, concatenated and shuffled)
// and VGG's adaptive pool, to a larger output (bins overlap and repeat) and to a smaller one.
TEST(GradCheck, ChannelSliceShuffleAdaptivePool) {
  gradcheck("conv(8,3,1,1) cat(slice(0,4) | slice(4,8) conv(4,1) relu conv(4,3,1,1,4)) shuffle(2) adaptivepool(7,4) "
            "conv(4,3,2) adaptivepool(2,2) flatten linear(3)",
            {2, 5, 6}, 3, 3, 0);
}
TEST(GradCheck, SqueezeExcitation) {
  gradcheck("conv(8,3,1,1) relu se(2) conv(4,3,2,1) silu se(3) flatten linear(3)", {2, 6, 5}, 3, 3, 0);
}
// cat: a tensor read by two branches and by the cat itself (three gradients summed), then
// a ceil-mode max-pool whose last column window is clipped (6 wide: floor 2, ceil 3).
TEST(GradCheck, ConcatAndCeilModeMaxPool) {
  gradcheck("conv(4,3,1,1) relu cat(conv(3,1) | conv(2,3,1,1) relu | ) maxpool(3,2,0,1) flatten linear(3)", {2, 7, 6},
            3, 3, 0);
}
TEST(GradCheck, DenseBlock) {
  gradcheck("conv(4,3,1,1) cat(| bn relu conv(3,3,1,1)) cat(| bn relu conv(3,1)) bn relu avgpool(2) flatten linear(3)",
            {1, 6, 6}, 3, 4, 0);
}
TEST(GradCheck, BatchNorm) { gradcheck("conv(4,3,1,1) bn relu flatten linear(3)", {2, 5, 5}, 3, 4, 0); }
TEST(GradCheck, ResidualAddAndDropout) {
  gradcheck("conv(4,3,1,1) res(conv(4,3,1,1) bn relu conv(4,3,1,1)) relu flatten dropout(0.5) linear(3)", {1, 6, 6},
            3, 3, 0);
}
TEST(GradCheck, DropoutOnBlockedConvOutput) {
  gradcheck("conv(16,3) relu dropout(0.25) maxpool(2) flatten linear(8) relu dropout(0.5) linear(3)", {1, 8, 8}, 3, 4,
            0);
}
TEST(GradCheck, MnistCnnSubset) { gradcheck("mnist_cnn", {1, 28, 28}, 10, 2, 40); }
TEST(GradCheck, Lenet5Subset) { gradcheck("lenet5", {1, 28, 28}, 10, 2, 80); }
TEST(GradCheck, Resnet20Subset) { gradcheck("resnet20", {3, 8, 8}, 10, 2, 60); }

// Volumes (issue 50): Conv3d (padded, strided), BatchNorm3d, MaxPool3d/AvgPool3d, leaky ReLU,
// tanh and a constant scale against the double reference's 3-D loops.
static SampleShape volume(int c, int d, int h, int w) { return SampleShape{c, h, w, d}; }
TEST(GradCheck, Volume3dLayers) {
  gradcheck("conv(4,3,1,1) bn relu maxpool(2) conv(3,2) leaky_relu(0.3) avgpool(2,1) flatten linear(4) tanh scale(1.2) "
            "linear(3)",
            volume(2, 6, 7, 8), 3, 3, 0);
}
TEST(GradCheck, Volume3dStridePaddingAndMaxPoolPadding) {
  gradcheck("conv(3,3,2,1) relu maxpool(3,2,1) conv(4,1) bn flatten linear(3)", volume(1, 7, 6, 8), 3, 4, 0);
}
// A 3-D U-Net's pieces: ConvTranspose3d (stride 2 and a padded stride-1 one) and a skip
// concatenation of volumes.
TEST(GradCheck, Volume3dDeconvAndConcat) {
  gradcheck("conv(4,3,1,1) maxpool(2) deconv(3,2,2) cat(conv(2,1) relu|) deconv(2,3,1,1) bn flatten linear(3)",
            volume(2, 4, 6, 4), 3, 3, 0);
}
// Channel counts of 8: the concatenation's inputs (a max-pool's and a 1×1×1 conv's outputs)
// come in oneDNN's blocked nCdhw8c layout, which it keeps (layer_concat.cpp); on AVX2 the
// 3-D deconvolution is oneDNN's GEMM kernel in plain ncdhw.
TEST(GradCheck, Volume3dBlockedConcat) {
  gradcheck("conv(8,3,1,1) relu maxpool(2) cat(conv(8,1) relu|) deconv(8,2,2) conv(4,1) flatten linear(3)",
            volume(2, 4, 4, 4), 3, 2, 80);
}
// CosmoFlow's Conv3d(k=2, padding='same'): one zero row at the end of every dim.
TEST(GradCheck, CosmoflowSubset) { gradcheck("cosmoflow(2,2)", volume(2, 32, 32, 32), 3, 2, 60); }
