// test_nn_models.cpp — built-in models (names, shapes, counts, flat layout), PyTorch
// init rules, the grad-ready callback, gradient overwrite, short batches, evaluation
// (incl. batch-norm running statistics), dropout independence from the batch split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "nn/dropout_mask.hpp"
#include "nn/exec.hpp"
#include "nn/graph.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"
#include "nn/rng.hpp"
#include "precisions.hpp"
#include "random_batch.hpp"
#include "reference.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {

using Data = test::RandomBatch;  // sample ids 100 + i
using test::ctx_for;

double rel_diff(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) num += std::pow(double(a[i]) - b[i], 2), den += std::pow(double(b[i]), 2);
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

TEST(Models, MnistCnnNamesShapesCountAndLayout) {
  auto m = make_model("mnist_cnn", {1, 28, 28}, 10);
  EXPECT_EQ(m->name(), "mnist_cnn");
  EXPECT_EQ(m->param_count(), 1199882u);
  EXPECT_EQ(m->classes(), 10);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"conv1.weight", {32, 1, 3, 3}}, {"conv1.bias", {32}},  {"conv2.weight", {64, 32, 3, 3}},
      {"conv2.bias", {64}},            {"fc1.weight", {128, 9216}}, {"fc1.bias", {128}},
      {"fc2.weight", {10, 128}},       {"fc2.bias", {10}}};
  const auto& p = m->params();
  ASSERT_EQ(p.size(), want.size());
  size_t expect_end = m->param_count();
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(p[i].name, want[i].first);
    EXPECT_EQ(p[i].shape, want[i].second);
    EXPECT_TRUE(p[i].trainable);
    EXPECT_EQ(p[i].decay, p[i].name.find(".weight") != std::string::npos);
    // reverse registration order: conv1.weight ends the buffer, fc2.bias starts it
    EXPECT_EQ(p[i].offset + p[i].numel, expect_end) << p[i].name;
    expect_end = p[i].offset;
  }
  EXPECT_EQ(expect_end, 0u);
}

TEST(Models, MnistCnnForwardShapeAndSpecEquivalence) {
  auto a = make_model("mnist_cnn", {1, 28, 28}, 10);
  auto b = make_model(a->spec(), {1, 28, 28}, 10);  // same network as a spec
  ASSERT_EQ(a->param_count(), b->param_count());
  std::memcpy(b->param_data(), a->param_data(), a->param_count() * sizeof(float));
  EXPECT_EQ(b->params()[0].name, "0.weight");
  EXPECT_EQ(b->params().back().name, "10.bias");
  Data d(5, {1, 28, 28}, 10);
  a->prepare(5, Precision::fp32);
  b->prepare(5, Precision::fp32);
  std::vector<float> la(50, NAN), lb(50, NAN);
  a->forward_eval(d.x.data(), 5, la.data());
  b->forward_eval(d.x.data(), 5, lb.data());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(std::isfinite(la[i]));
  EXPECT_EQ(la, lb);
}

TEST(Models, Lenet5AndResnet20) {
  auto l = make_model("lenet5", {1, 28, 28}, 10);
  EXPECT_EQ(l->param_count(), 61706u);  // 156 + 2416 + 48120 + 10164 + 850
  EXPECT_EQ(l->params().front().name, "conv1.weight");
  auto r = make_model("resnet20", {3, 32, 32}, 10);
  // 269,722 (the 0.27M of option A) + option B's 1x1 shortcut convs and their bn
  size_t trainable = 0;
  bool has_rm = false, has_nbt = false;
  for (const auto& p : r->params()) {
    if (p.trainable) trainable += p.numel;
    has_rm |= p.name == "layer1.0.bn1.running_mean";
    has_nbt |= p.name == "layer3.2.bn2.num_batches_tracked";
  }
  EXPECT_EQ(trainable, 269722u + 512 + 64 + 2048 + 128);
  EXPECT_TRUE(has_rm);
  EXPECT_TRUE(has_nbt);
  EXPECT_EQ(r->params()[0].name, "conv1.weight");
  EXPECT_EQ(r->params()[1].name, "bn1.weight");
  EXPECT_EQ(r->params().back().name, "fc.bias");
  Data d(4, {3, 32, 32}, 10);
  r->prepare(4, Precision::fp32);
  auto c = ctx_for(d, 4);
  const double loss = r->forward_backward(d.x.data(), d.y.data(), 4, c, {});
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0);
}

// torchvision's ResNets: trainable parameter counts at 1000 classes as torchvision's
// (its model docs: 11,689,512 / 21,797,672 / 25,557,032 / 44,549,160 / 60,192,808;
// tests/nn/resnet_torchvision.sh computes them from torchvision itself), names and
// where the downsample branches are, graphs only (no buffers allocated).
TEST(Models, TorchvisionResnetCountsAndNames) {
  const std::pair<const char*, size_t> counts[] = {{"resnet18", 11689512u},
                                                   {"resnet34", 21797672u},
                                                   {"resnet50", 25557032u},
                                                   {"resnet101", 44549160u},
                                                   {"resnet152", 60192808u}};
  for (const auto& [name, count] : counts) {
    const auto mg = nn::build_model_graph(name, {3, 224, 224}, 1000);
    size_t trainable = 0;
    std::set<std::string> names;
    for (const auto& p : mg.graph.params) {
      trainable += p.info.trainable ? p.info.numel : 0;
      names.insert(p.info.name);
    }
    EXPECT_EQ(trainable, count) << name;
    EXPECT_EQ(mg.graph.params.front().info.name, "conv1.weight");
    EXPECT_EQ(mg.graph.params.back().info.name, "fc.bias");
    EXPECT_EQ(mg.graph.params.front().info.shape, (std::vector<int64_t>{64, 3, 7, 7}));
    const bool bottleneck = std::string(name) != "resnet18" && std::string(name) != "resnet34";
    EXPECT_EQ(names.count("layer1.0.downsample.0.weight"), bottleneck ? 1u : 0u) << name;  // 64 → 256 channels
    EXPECT_EQ(names.count("layer2.0.downsample.1.running_var"), 1u) << name;
    EXPECT_EQ(names.count("layer2.1.downsample.0.weight"), 0u) << name;
    EXPECT_EQ(names.count("layer1.0.conv3.weight"), bottleneck ? 1u : 0u) << name;
    // The stem: 7×7/2 pad 3 conv, padded 3×3/2 max-pool (never the fused relu kernel).
    const nn::Node& pool = mg.graph.nodes[3];
    EXPECT_EQ(pool.op, nn::Op::maxpool);
    EXPECT_EQ(pool.pad, 1);
    EXPECT_EQ(pool.out.h, 56);
    EXPECT_FALSE(pool.relu_into_pool);
  }
  EXPECT_EQ(nn::build_model_graph("resnet50", {3, 32, 32}, 10).graph.params.size(),
            nn::build_model_graph("resnet50", {3, 224, 224}, 10).graph.params.size());
  // The Bottleneck's stride is on its 3×3 conv (v1.5).
  for (const auto& nd : nn::build_model_graph("resnet50", {3, 64, 64}, 10).graph.nodes)
    if (nd.op == nn::Op::conv && nd.kernel == 1 && nd.stride != 1) {
      EXPECT_EQ(nd.out_channels % 256, 0) << "only downsample 1×1 convs are strided";
    }
  for (const SampleShape s : {SampleShape{3, 31, 64}, SampleShape{3, 64, 16}}) {
    try {
      nn::build_model_graph("resnet18", s, 10);
      ADD_FAILURE() << "resnet18 accepted " << s.height << "x" << s.width;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("at least 32x32"), std::string::npos) << e.what();
    }
  }
  ModelOptions zero;
  zero.zero_init_residual = true;
  EXPECT_THROW(make_model("mnist_cnn", {1, 28, 28}, 10, -1, zero), UserError);
}

// The GPU model's bf16 activation store (nn::gpu_bf16_tensors, docs/gpu.md "bf16 on the
// GPU"): which tensors are bf16 NHWC. Every graph must come out consistent (the layers
// that keep their input's type see one type; dropout, linear and the loss read fp32),
// and the ResNets must be bf16 from the first convolution to the classifier.
namespace {

using Half = std::vector<char>;
Half store_types(const std::string& spec, const SampleShape& in, int classes = 3) {
  const nn::Graph g = nn::build_model_graph(spec, in, classes).graph;
  const Half h = nn::gpu_bf16_tensors(g);
  EXPECT_EQ(h.size(), static_cast<size_t>(g.tensor_count())) << spec;
  EXPECT_EQ(h[0], 0) << spec << ": the input images are fp32";
  EXPECT_EQ(h[static_cast<size_t>(g.output)], 0) << spec << ": the logits are fp32";
  for (const nn::Node& n : g.nodes) {
    const char in_t = h[static_cast<size_t>(n.inputs[0])], out_t = h[static_cast<size_t>(n.index + 1)];
    switch (n.op) {
      case nn::Op::bn:
      case nn::Op::relu:
      case nn::Op::act:
      case nn::Op::stochastic_depth:
      case nn::Op::maxpool:
      case nn::Op::avgpool: EXPECT_EQ(in_t, out_t) << spec << " node " << n.index; break;
      case nn::Op::add:
        EXPECT_EQ(in_t, out_t) << spec << " node " << n.index;
        EXPECT_EQ(h[static_cast<size_t>(n.inputs[1])], out_t) << spec << " node " << n.index;
        break;
      case nn::Op::dropout:
      case nn::Op::linear:
        EXPECT_EQ(in_t, 0) << spec << " node " << n.index << " reads fp32 only";
        EXPECT_EQ(out_t, 0) << spec << " node " << n.index;
        break;
      case nn::Op::flatten: EXPECT_EQ(out_t, 0) << spec << " node " << n.index; break;
      case nn::Op::mul:
      case nn::Op::layernorm:
      case nn::Op::channel_slice:
      case nn::Op::channel_shuffle:
      case nn::Op::adaptive_avgpool:
      case nn::Op::layer_scale: EXPECT_EQ(out_t, 0) << spec << " node " << n.index; break;
      case nn::Op::concat:
        EXPECT_EQ(out_t, 0) << spec << " node " << n.index;
        for (int t : n.inputs) EXPECT_EQ(h[static_cast<size_t>(t)], 0) << spec << " node " << n.index << " reads fp32";
        break;
      case nn::Op::conv:
      case nn::Op::deconv:
      case nn::Op::upsample: break;
    }
  }
  return h;
}

}  // namespace

TEST(GpuBf16Store, TypesFlowFromConvolutionsToTheClassifier) {
  for (const auto& [name, shape] : {std::pair<std::string, SampleShape>{"resnet20", {3, 32, 32}},
                                    {"resnet18", {3, 32, 48}},
                                    {"resnet50", {3, 64, 64}}}) {
    const nn::Graph g = nn::build_model_graph(name, shape, 10).graph;
    const Half h = store_types(name, shape, 10);
    int half = 0;
    for (const nn::Node& n : g.nodes) {
      const bool classifier = n.op == nn::Op::flatten || n.op == nn::Op::linear;
      EXPECT_EQ(h[static_cast<size_t>(n.index + 1)], classifier ? 0 : 1) << name << " node " << n.index;
      half += h[static_cast<size_t>(n.index + 1)];
    }
    EXPECT_EQ(half, static_cast<int>(g.nodes.size()) - 2) << name;  // all but flatten and fc
  }
  // mnist_cnn: dropout(0.25) reads the max-pool, so pool, relu and conv2 stay fp32 back to
  // conv2 (which then widens its output); conv1 → relu → conv2 is bf16.
  EXPECT_EQ(store_types("mnist_cnn", {1, 28, 28}, 10), (Half{0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  // A residual add of the fp32 input images: the add and the convolution feeding it are fp32.
  EXPECT_EQ(store_types("res(conv(3,3,1,1)) relu flatten linear(3)", {3, 6, 6}), (Half{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(store_types("conv(4,3,1,1) res(conv(4,3,1,1) bn) relu maxpool(2) avgpool(3) flatten linear(3)", {2, 6, 6}),
            (Half{0, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
  // Dropout on a feature map: its input and everything that keeps type up to the convolution.
  EXPECT_EQ(store_types("conv(4,3) relu conv(4,3) bn relu dropout(0.5) flatten linear(3)", {1, 8, 8}),
            (Half{0, 1, 1, 0, 0, 0, 0, 0, 0}));
  // No convolution: nothing is bf16.
  EXPECT_EQ(store_types("flatten linear(16) relu dropout(0.25) linear(4)", {1, 5, 5}, 4), (Half(6, 0)));
}

// A non-square input (gap over 2×3 at the end, padded max-pool on 19×25) trains.
TEST(Models, TorchvisionResnetNonSquareStep) {
  auto r = make_model("resnet18", {3, 38, 50}, 4);
  r->init_params(3);
  Data d(2, {3, 38, 50}, 4);
  r->prepare(2, Precision::fp32);
  auto c = ctx_for(d, 2);
  const double loss = r->forward_backward(d.x.data(), d.y.data(), 2, c, {});
  EXPECT_TRUE(std::isfinite(loss));
  double g2 = 0;
  for (size_t k = 0; k < r->param_count(); ++k) g2 += double(r->grad_data()[k]) * r->grad_data()[k];
  EXPECT_GT(g2, 0);
}

TEST(Init, PyTorchBoundsDeterministicSeeded) {
  auto m = make_model("mnist_cnn", {1, 28, 28}, 10);
  m->init_params(42);
  std::vector<float> a(m->param_data(), m->param_data() + m->param_count());
  m->init_params(42);
  std::vector<float> b(m->param_data(), m->param_data() + m->param_count());
  EXPECT_EQ(a, b);
  m->init_params(43);
  std::vector<float> c(m->param_data(), m->param_data() + m->param_count());
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == c[i];
  EXPECT_LT(same, a.size() / 1000);
  const std::map<std::string, double> fan_in = {{"conv1", 9}, {"conv2", 288}, {"fc1", 9216}, {"fc2", 128}};
  for (const auto& p : m->params()) {
    const double bound = 1.0 / std::sqrt(fan_in.at(p.name.substr(0, p.name.find('.'))));
    double mx = 0, sum = 0, sum2 = 0;
    for (size_t k = 0; k < p.numel; ++k) {
      const double v = a[p.offset + k];
      mx = std::max(mx, std::abs(v));
      sum += v;
      sum2 += v * v;
    }
    EXPECT_LE(mx, bound * (1 + 1e-7)) << p.name;
    EXPECT_GT(mx, bound * 0.7) << p.name;  // fills the range (32 samples at least)
    if (p.numel >= 1000) {
      const double mean = sum / p.numel, var = sum2 / p.numel - mean * mean;
      EXPECT_NEAR(mean, 0, 4 * bound / std::sqrt(3.0 * p.numel)) << p.name;
      EXPECT_NEAR(var, bound * bound / 3, 0.05 * bound * bound / 3) << p.name;
    }
  }
  auto r = make_model("resnet20", {3, 32, 32}, 10);
  r->init_params(1);
  for (const auto& p : r->params()) {
    const float* v = r->param_data() + p.offset;
    if (p.name.ends_with("bn1.weight") || p.name.ends_with("running_var")) {
      EXPECT_EQ(v[0], 1.f) << p.name;
    }
    if (p.name.ends_with("bn1.bias") || p.name.ends_with("running_mean") || p.name.ends_with("num_batches_tracked")) {
      EXPECT_EQ(v[0], 0.f) << p.name;
    }
  }
}

TEST(Backward, GradReadyPrefixGrowsAndIsFinal) {
  auto m = make_model("resnet20", {3, 16, 16}, 10);
  m->prepare(3, Precision::fp32);
  Data d(3, {3, 16, 16}, 10);
  auto c = ctx_for(d, 3);
  std::vector<size_t> ends;
  std::vector<std::vector<float>> snap;
  m->forward_backward(d.x.data(), d.y.data(), 3, c, [&](size_t end) {
    ends.push_back(end);
    snap.emplace_back(m->grad_data(), m->grad_data() + end);
  });
  ASSERT_GE(ends.size(), 20u);
  EXPECT_EQ(ends.back(), m->param_count());
  for (size_t i = 1; i < ends.size(); ++i) EXPECT_GT(ends[i], ends[i - 1]);
  for (const auto& s : snap)  // what was reported final did not change afterwards
    ASSERT_EQ(0, std::memcmp(s.data(), m->grad_data(), s.size() * sizeof(float)));
  // overwritten, not accumulated
  std::vector<float> g1(m->grad_data(), m->grad_data() + m->param_count());
  m->forward_backward(d.x.data(), d.y.data(), 3, c, {});
  EXPECT_LT(rel_diff(m->grad_data(), g1.data(), g1.size()), 1e-5);
}

TEST(Backward, ShortBatchAndEvalMatchesTrainingLoss) {
  // mnist_cnn with dropout off (training=false): eval logits give the same loss.
  auto m = make_model("mnist_cnn", {1, 28, 28}, 10);
  m->prepare(8, Precision::fp32);
  Data d(11, {1, 28, 28}, 10);
  std::vector<float> logits(110);
  m->forward_eval(d.x.data(), 11, logits.data());  // 8 + a padded short chunk of 3
  StepContext c = ctx_for(d, 3);
  c.training = false;
  const double loss3 = m->forward_backward(d.x.data() + 8 * 784, d.y.data() + 8, 3, c, {});  // short batch
  double ref = 0;
  for (int i = 8; i < 11; ++i) {
    double mx = -INFINITY, s = 0;
    for (int j = 0; j < 10; ++j) mx = std::max<double>(mx, logits[i * 10 + j]);
    for (int j = 0; j < 10; ++j) s += std::exp(logits[i * 10 + j] - mx);
    ref += mx + std::log(s) - logits[i * 10 + d.y[i]];
  }
  EXPECT_NEAR(loss3, ref, 1e-5 * ref);
  // per-sample eval gives the same logits as the batched one
  std::vector<float> one(10);
  for (int i : {0, 7, 10}) {
    m->forward_eval(d.x.data() + i * 784, 1, one.data());
    EXPECT_LT(rel_diff(one.data(), logits.data() + i * 10, 10), 1e-5) << i;
  }
}

TEST(BatchNorm, RunningStatisticsAndEvalMatchReference) {
  auto m = make_model("conv(4,3,1,1) bn relu gap flatten linear(3)", {2, 5, 5}, 3);
  m->init_params(5);
  m->prepare(6, Precision::fp32);
  const auto& g = dynamic_cast<nn::Net&>(*m).graph();
  Data d(6, {2, 5, 5}, 3);
  auto c = ctx_for(d, 6);
  std::vector<double> P(m->param_data(), m->param_data() + m->param_count());
  auto r = nn::ref::forward(g, P, d.x.data(), d.y.data(), 6, c, true);
  m->forward_backward(d.x.data(), d.y.data(), 6, c, {});
  const auto& st = r.bn.at(1);
  const auto& bn = g.nodes[1];
  const float* rm = m->param_data() + g.params[bn.params[2]].info.offset;
  const float* rv = m->param_data() + g.params[bn.params[3]].info.offset;
  const float* nbt = m->param_data() + g.params[bn.params[4]].info.offset;
  for (int ch = 0; ch < 4; ++ch) {
    EXPECT_NEAR(rm[ch], 0.1 * st.mean[ch], 1e-5);
    EXPECT_NEAR(rv[ch], 0.9 + 0.1 * st.var[ch] * st.count / (st.count - 1.0), 1e-5);
  }
  EXPECT_EQ(*nbt, 1.f);
  // eval uses the running statistics
  std::vector<double> P2(m->param_data(), m->param_data() + m->param_count());
  auto e = nn::ref::forward(g, P2, d.x.data(), nullptr, 6, c, false);
  std::vector<float> logits(18);
  m->forward_eval(d.x.data(), 6, logits.data());
  for (int i = 0; i < 18; ++i) EXPECT_NEAR(logits[i], e.logits[i], 1e-4 * (1 + std::abs(e.logits[i])));
}

TEST(Dropout, IndependentOfBatchSplit) {
  auto m = make_model("mnist_cnn", {1, 28, 28}, 10);
  m->init_params(9);
  m->prepare(2, Precision::fp32);
  Data d(2, {1, 28, 28}, 10);
  auto c = ctx_for(d, 2, 17);
  const double both = m->forward_backward(d.x.data(), d.y.data(), 2, c, {});
  std::vector<float> g_both(m->grad_data(), m->grad_data() + m->param_count());
  std::vector<float> g_sum(m->param_count(), 0.f);
  double split = 0;
  for (int i = 0; i < 2; ++i) {  // each sample alone (as on two ranks), same global ids
    StepContext ci = c;
    ci.sample_ids = d.ids.data() + i;
    split += m->forward_backward(d.x.data() + i * 784, d.y.data() + i, 1, ci, {});
    for (size_t k = 0; k < g_sum.size(); ++k) g_sum[k] += m->grad_data()[k];
  }
  EXPECT_NEAR(both, split, 1e-6 * both);
  EXPECT_LT(rel_diff(g_sum.data(), g_both.data(), g_sum.size()), 1e-5);
  // and dropout is really active: another step draws other masks
  auto c2 = ctx_for(d, 2, 18);
  EXPECT_NE(m->forward_backward(d.x.data(), d.y.data(), 2, c2, {}), both);
}

TEST(Dropout, MaskRateAndIndependence) {
  for (double p : {0.25, 0.5}) {
    const uint64_t thr = nn::dropout_threshold(p);
    int64_t dropped = 0, both = 0;
    const int64_t N = 200000;
    const uint64_t k1 = nn::dropout_sample_key(1, 2, 3, 4), k2 = nn::dropout_sample_key(1, 2, 3, 5);
    for (int64_t j = 0; j < N; ++j) {
      const bool d1 = !nn::dropout_keep(k1, j, thr), d2 = !nn::dropout_keep(k2, j, thr);
      dropped += d1;
      both += d1 && d2;
    }
    EXPECT_NEAR(double(dropped) / N, p, 0.01);
    EXPECT_NEAR(double(both) / N, p * p, 0.01);
  }
}

// The fused kernels (maxpool + relu backward after a fused conv-relu, flatten as a view,
// vectorised dropout) give bitwise the same loss, gradients and logits as the unfused
// path (CNNSCALE_NO_POOL_FUSION=1 keeps relu and maxpool apart), fp32 and bf16, for
// windows that cover the input exactly (mnist_cnn) and not (odd sizes, k = 3).
TEST(Fusion, MaxPoolReluBitwiseEqualToUnfused) {
  struct Case {
    const char* spec;
    SampleShape shape;
  };
  const Case cases[] = {
      {"mnist_cnn", {1, 28, 28}},
      {"conv(16,3) relu maxpool(2) dropout(0.25) flatten linear(5)", {2, 9, 9}},
      {"conv(32,3) relu maxpool(3) flatten linear(5)", {1, 11, 11}},
      {"conv(5,3) relu maxpool(2) flatten linear(5)", {1, 8, 8}},
  };
  for (const auto& cs : cases) {
    for (Precision prec : test::precisions_here()) {
      SCOPED_TRACE(std::string(cs.spec) + (prec == Precision::bf16 ? " bf16" : " fp32"));
      const int classes = std::string(cs.spec) == "mnist_cnn" ? 10 : 5;
      const int64_t n = 6;
      Data d(n, cs.shape, classes);
      std::vector<float> grads[2], logits[2];
      double loss[2];
      for (int unfused = 0; unfused < 2; ++unfused) {
        setenv("CNNSCALE_NO_POOL_FUSION", unfused ? "1" : "0", 1);
        auto m = make_model(cs.spec, cs.shape, classes);
        m->init_params(5);
        m->prepare(n, prec);
        StepContext ctx;
        ctx.seed = 9;
        ctx.step = 2;
        ctx.sample_ids = d.ids.data();
        ctx.loss_scale = 1.f / n;
        loss[unfused] = m->forward_backward(d.x.data(), d.y.data(), n, ctx, {});
        grads[unfused].assign(m->grad_data(), m->grad_data() + m->param_count());
        logits[unfused].resize(static_cast<size_t>(n * classes));
        m->forward_eval(d.x.data(), n, logits[unfused].data());
      }
      unsetenv("CNNSCALE_NO_POOL_FUSION");
      EXPECT_EQ(loss[0], loss[1]);
      ASSERT_EQ(grads[0].size(), grads[1].size());
      EXPECT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * sizeof(float)));
    }
  }
}

// The (vectorised) dropout drops exactly the elements dropout_keep() says, including
// the scalar tail (35 elements: 32 vectorised + 3): with batch 1, fc's weight gradient
// dW[o][j] = dz[o] · dropped_x[j] is zero exactly where element j was dropped.
TEST(Dropout, KernelMatchesDropoutKeep) {
  const SampleShape shape{1, 5, 7};
  for (double p : {0.25, 0.5}) {
    auto m = make_model("flatten dropout(" + std::to_string(p) + ") linear(3)", shape, 3);
    m->init_params(1);
    m->prepare(1, Precision::fp32);
    Data d(1, shape, 3);
    StepContext ctx;
    ctx.seed = 11;
    ctx.step = 4;
    ctx.sample_ids = d.ids.data();
    m->forward_backward(d.x.data(), d.y.data(), 1, ctx, {});
    const ParamInfo* w = nullptr;
    for (const auto& pi : m->params())
      if (pi.name.find("weight") != std::string::npos) w = &pi;
    ASSERT_NE(w, nullptr);
    const uint64_t key = nn::dropout_sample_key(11, 4, /*layer=*/1, d.ids[0]);
    const uint64_t thr = nn::dropout_threshold(p);
    int dropped = 0;
    for (int j = 0; j < 35; ++j) {
      const bool keep = nn::dropout_keep(key, j, thr);
      dropped += !keep;
      for (int o = 0; o < 3; ++o) EXPECT_EQ(keep, m->grad_data()[w->offset + size_t(o) * 35 + size_t(j)] != 0.f) << j;
    }
    EXPECT_GT(dropped, 0);
  }
}

// The depthwise weight gradient of conv_depthwise.cpp (5×5, 7×7 strided, 3×3 strided) equals
// oneDNN's (CNNSCALE_DW_ONEDNN=1: its GEMM path) to float rounding, and the bias gradient too;
// checked both in the layout oneDNN picks here and through a 16-channel model.
TEST(DepthwiseBackwardWeights, MatchesOneDnn) {
  for (const char* spec : {"conv(16,3,1,1) conv(16,5,1,2,16) relu conv(16,7,2,3,16) conv(16,3,2,1,16) flatten linear(3)",
                           "conv(12,1) conv(12,5,2,2,12) flatten linear(3)"}) {
    SCOPED_TRACE(spec);
    const SampleShape shape{3, 15, 13};
    Data d(4, shape, 3);
    std::vector<float> g[2];
    for (int onednn = 0; onednn < 2; ++onednn) {
      if (onednn) setenv("CNNSCALE_DW_ONEDNN", "1", 1);
      auto m = make_model(spec, shape, 3);
      unsetenv("CNNSCALE_DW_ONEDNN");
      m->init_params(5);
      m->prepare(4, Precision::fp32);
      m->forward_backward(d.x.data(), d.y.data(), 4, test::ctx_for(d, 4), {});
      g[onednn].assign(m->grad_data(), m->grad_data() + m->param_count());
    }
    ASSERT_EQ(g[0].size(), g[1].size());
    double gmax = 0;
    for (float v : g[1]) gmax = std::max(gmax, double(std::abs(v)));
    ASSERT_GT(gmax, 0);
    for (size_t i = 0; i < g[0].size(); ++i) EXPECT_NEAR(g[0][i], g[1][i], 2e-5 * gmax) << i;
  }
}

// Stochastic depth (torchvision.ops.StochasticDepth(p, "row")): each sample of the batch is
// either zeroed or scaled by exactly 1/(1 − p) as a whole, as dropout_keep(key, 0) decides
// from (seed, step, node, global sample id); the same samples come out alike when the batch
// is run in two halves (two ranks' shares); evaluation is the identity.
TEST(StochasticDepth, WholeSamplesByGlobalIdAnySplit) {
  const SampleShape shape{2, 3, 3};
  const int64_t n = 16, per = shape.numel();
  const double p = 0.5;
  Data d(n, shape, 2);
  auto run = [&](int64_t begin, int64_t count, bool training) {
    auto m = make_model("conv(2,1) stochastic_depth(0.5) flatten linear(2)", shape, 2);
    m->init_params(3);
    m->prepare(count, Precision::fp32);
    auto& net = dynamic_cast<nn::Net&>(*m);
    net.set_capture(true);
    StepContext ctx = test::ctx_for(d, n, 6);
    ctx.sample_ids = d.ids.data() + begin;
    ctx.training = training;
    m->forward_backward(d.x.data() + begin * per, d.y.data() + begin, count, ctx, {});
    return std::make_pair(net.captured(0), net.captured(1));  // the conv's output, stochastic depth's
  };
  const auto [conv, sd] = run(0, n, true);
  ASSERT_EQ(sd.size(), static_cast<size_t>(n * per));
  const uint64_t thr = nn::dropout_threshold(p);
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = nn::dropout_keep(nn::dropout_sample_key(11, 6, /*node=*/1, d.ids[size_t(i)]), 0, thr);
    kept += keep;
    for (int64_t j = 0; j < per; ++j) {
      const size_t k = size_t(i * per + j);
      ASSERT_EQ(sd[k], keep ? conv[k] * 2.f : 0.f) << "sample " << i << " element " << j;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n);
  const auto [c0, a] = run(0, n / 2, true);
  const auto [c1, b] = run(n / 2, n / 2, true);
  std::vector<float> halves(a);
  halves.insert(halves.end(), b.begin(), b.end());
  EXPECT_EQ(halves, sd);
  const auto [ce, e] = run(0, n, false);
  EXPECT_EQ(e, ce);
}

// The GPU model's batch-norm fusion plan (nn::plan_gpu_fusion, CNNSCALE_GPU_BN=own) on the
// bf16 store of every ResNet: the fusions a ResNet's structure allows (stem and inner
// batch norms absorb their ReLU, each block's last its residual add and ReLU, the
// downsampling ones stay unfused); the run order is a forward order of the rewritten
// graph (every tensor a running node reads — its input, a fused batch norm's residual z —
// written before it and not dead; nothing written twice; absorbed nodes never run; every
// other node once; the logits written last); dead tensors are exactly the fused batch
// norms' own outputs and the absorbed adds'; and the grad-ready points are right and
// tight (a flat offset below ready_after[i] belongs to a node whose backward has run
// once order[i]'s has; the lowest offset of those still to run is the point). Without
// fusion, node order. Planned on the CPU so that CI checks what the GPU runs.
namespace {

struct FusionCounts {
  int relu = 0, add = 0, unfused = 0;
};

FusionCounts check_fusion_plan(const std::string& spec, const SampleShape& in) {
  SCOPED_TRACE(spec);
  const nn::Graph g = nn::build_model_graph(spec, in, 10).graph;
  const size_t N = g.nodes.size(), T = static_cast<size_t>(g.tensor_count());
  const std::vector<char> half = nn::gpu_bf16_tensors(g);
  const nn::FusionPlan p = nn::plan_gpu_fusion(g, half, true);
  FusionCounts c;
  EXPECT_EQ(p.bn.size(), N);
  EXPECT_EQ(p.absorbed.size(), N);
  std::vector<char> dead_want(T, 0);
  size_t absorbed_want = 0;
  for (const nn::Node& nd : g.nodes) {
    if (nd.op != nn::Op::bn) {
      EXPECT_EQ(p.bn[static_cast<size_t>(nd.index)].out, -1) << "node " << nd.index << " is not a batch norm";
      continue;
    }
    const nn::BnFusion& f = p.bn[static_cast<size_t>(nd.index)];
    if (f.out < 0) {
      ++c.unfused;
      continue;
    }
    EXPECT_TRUE(f.relu);
    EXPECT_TRUE(half[static_cast<size_t>(f.out)]) << "a fused batch norm writes a store tensor";
    dead_want[static_cast<size_t>(nd.index + 1)] = 1;
    if (f.z < 0) {
      ++c.relu;
      ++absorbed_want;
      EXPECT_EQ(g.nodes[static_cast<size_t>(f.out - 1)].op, nn::Op::relu);
      EXPECT_EQ(g.nodes[static_cast<size_t>(f.out - 1)].inputs[0], nd.index + 1);
    } else {
      ++c.add;
      absorbed_want += 2;
      const nn::Node& relu = g.nodes[static_cast<size_t>(f.out - 1)];
      EXPECT_EQ(relu.op, nn::Op::relu);
      const nn::Node& add = g.nodes[static_cast<size_t>(relu.inputs[0] - 1)];
      EXPECT_EQ(add.op, nn::Op::add);
      EXPECT_TRUE((add.inputs[0] == nd.index + 1 && add.inputs[1] == f.z) ||
                  (add.inputs[1] == nd.index + 1 && add.inputs[0] == f.z));
      EXPECT_NE(f.z, nd.inputs[0]);
      dead_want[static_cast<size_t>(add.index + 1)] = 1;
    }
  }
  size_t absorbed = 0;
  for (char a : p.absorbed) absorbed += a != 0;
  EXPECT_EQ(absorbed, absorbed_want);
  EXPECT_EQ(p.dead.empty() ? std::vector<char>(T, 0) : p.dead, dead_want) << "dead tensors";

  // Forward: every read written before and alive; each node once; absorbed ones never.
  std::vector<char> written(T, 0), ran(N, 0);
  written[0] = 1;
  std::vector<size_t> pos(N, SIZE_MAX);
  for (size_t i = 0; i < p.order.size(); ++i) {
    const size_t k = static_cast<size_t>(p.order[i]);
    const nn::Node& nd = g.nodes[k];
    EXPECT_FALSE(p.absorbed[k]) << "absorbed node " << k << " runs";
    EXPECT_FALSE(ran[k]) << "node " << k << " runs twice";
    ran[k] = 1;
    pos[k] = i;
    std::vector<int> reads = nd.inputs;
    if (p.bn[k].z >= 0) reads.push_back(p.bn[k].z);
    for (int t : reads) {
      EXPECT_TRUE(written[static_cast<size_t>(t)]) << "node " << k << " reads tensor " << t << " before it is written";
      EXPECT_FALSE(dead_want[static_cast<size_t>(t)]) << "node " << k << " reads dead tensor " << t;
    }
    const int out = p.bn[k].out >= 0 ? p.bn[k].out : static_cast<int>(k) + 1;
    EXPECT_FALSE(written[static_cast<size_t>(out)]) << "tensor " << out << " written twice";
    EXPECT_FALSE(dead_want[static_cast<size_t>(out)]);
    written[static_cast<size_t>(out)] = 1;
  }
  for (size_t k = 0; k < N; ++k) EXPECT_EQ(ran[k] != 0, p.absorbed[k] == 0) << "node " << k;
  EXPECT_TRUE(written[static_cast<size_t>(g.output)]) << "the logits";

  // Grad-ready points: right and tight, 0..param_count.
  EXPECT_EQ(p.ready_after.size(), p.order.size());
  if (p.ready_after.size() != p.order.size()) return c;
  EXPECT_EQ(p.ready_after.front(), g.param_count);
  for (size_t i = 0; i < p.order.size(); ++i) {
    size_t lowest_to_run = g.param_count;
    for (size_t k = 0; k < N; ++k) {
      if (g.nodes[k].params.empty() || !ran[k]) continue;
      if (pos[k] < i) lowest_to_run = std::min(lowest_to_run, g.nodes[k].flat_begin);
      if (g.nodes[k].flat_begin < p.ready_after[i]) {
        EXPECT_GE(pos[k], i) << "node " << k << "'s gradients reported final before its backward (position " << i << ")";
      }
    }
    EXPECT_EQ(p.ready_after[i], lowest_to_run) << "position " << i;
  }
  for (size_t k = 0; k < N; ++k) {
    if (p.absorbed[k]) {
      EXPECT_TRUE(g.nodes[k].params.empty()) << "an absorbed node with parameters";
    }
  }

  // Without fusion: node order, nothing fused or dead.
  const nn::FusionPlan q = nn::plan_gpu_fusion(g, half, false);
  EXPECT_TRUE(q.bn.empty() && q.absorbed.empty() && q.dead.empty());
  EXPECT_EQ(q.order.size(), N);
  for (size_t k = 0; k < N && k < q.order.size(); ++k) EXPECT_EQ(q.order[k], static_cast<int>(k));
  const nn::FusionPlan none = nn::plan_gpu_fusion(g, {}, true);
  EXPECT_TRUE(none.bn.empty() && none.dead.empty()) << "no store, no fusion";
  return c;
}

}  // namespace

TEST(GpuBnFusion, ResNetsFuseAsTheirStructureAllows) {
  // ResNet-50: the stem and 2 per bottleneck absorb their ReLU (1 + 32), each of the 16
  // bottlenecks' last its add + ReLU, the 4 downsampling batch norms stay: 53 in all.
  FusionCounts c = check_fusion_plan("resnet50", {3, 224, 224});
  EXPECT_EQ(c.relu, 33);
  EXPECT_EQ(c.add, 16);
  EXPECT_EQ(c.unfused, 4);
  // ResNet-18: stem + 8 basic blocks' first; 8 blocks' second with the add; 3 downsampling.
  c = check_fusion_plan("resnet18", {3, 64, 64});
  EXPECT_EQ(c.relu, 9);
  EXPECT_EQ(c.add, 8);
  EXPECT_EQ(c.unfused, 3);
  // resnet20 (1×1 convolution + batch norm shortcuts where the shape changes, as
  // torchvision's blocks): the stem and 9 blocks' first; 9 blocks' second with the add; 2
  // downsampling.
  c = check_fusion_plan("resnet20", {3, 32, 32});
  EXPECT_EQ(c.relu, 10);
  EXPECT_EQ(c.add, 9);
  EXPECT_EQ(c.unfused, 2);
  c = check_fusion_plan("conv(4,3) bn relu maxpool(2) conv(4,3) bn flatten linear(10)", {1, 12, 12});
  EXPECT_EQ(c.relu, 1);
  EXPECT_EQ(c.unfused, 1) << "a batch norm read by flatten stays";
}
