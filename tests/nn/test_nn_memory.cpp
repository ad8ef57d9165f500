// test_nn_memory.cpp — the plan's memory contract (Net::plan_memory, net.hpp): gradients
// share an arena by backward liveness (close to the most bytes live at once, far below
// one buffer per tensor), node-local conversions share one region, in-place relu/add
// hold no data of their own; and the in-place layers give bit-identical results.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nn/exec.hpp"
#include "nn/graph.hpp"
#include "nn/model.hpp"
#include "nn/net.hpp"
#include "precisions.hpp"
#include "random_batch.hpp"

using namespace cnnscale;

namespace {

struct Case {
  const char* model;
  SampleShape shape;
  int classes;
  int64_t batch;
};

// Bytes of tensor t's activation at batch n from the graph alone (channels padded to
// 16 as the blocked layouts; the flat tensors and the input are exact).
size_t tensor_bytes(const nn::Graph& g, int t, int64_t n) {
  if (t == 0) return static_cast<size_t>(n * g.input.numel()) * sizeof(float);
  const nn::Shape& s = g.nodes[static_cast<size_t>(t - 1)].out;
  const int64_t c = s.flat ? s.c : (s.c + 15) / 16 * 16;
  return static_cast<size_t>(n * c * s.h * s.w) * sizeof(float);
}

}  // namespace

// Gradients: the arena is within 25 % of the most gradient bytes live at one backward
// step (a lower bound for any assignment), and at most a third of one buffer per
// tensor gradient (computed here from the graph) — what the plan held before the arena.
// Node-local conversions (blocked weights, weight gradients) no longer take a copy of the
// model each: the layers own less than the parameters' size. In-place relu/add outputs
// own no data.
TEST(PlanMemory, GradientsShareByLivenessAndInPlaceHoldsNoData) {
  const Case cases[] = {{"resnet18", {3, 64, 64}, 10, 4},
                        {"resnet50", {3, 32, 32}, 10, 2},
                        {"resnet20", {3, 32, 32}, 10, 4},
                        {"mnist_cnn", {1, 28, 28}, 10, 8}};
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.model);
    auto m = make_model(cs.model, cs.shape, cs.classes);
    m->prepare(cs.batch, Precision::fp32);
    auto& net = dynamic_cast<nn::Net&>(*m);
    const nn::Graph& g = net.graph();
    const nn::PlanMemory& pm = net.plan_memory(cs.batch);
    size_t one_each = 0, all_data = 0, in_place_data = 0;
    for (int t = 1; t < g.tensor_count(); ++t) {
      const size_t b = tensor_bytes(g, t, cs.batch);
      one_each += b;
      all_data += b;
      const nn::Node& p = g.nodes[static_cast<size_t>(t - 1)];
      if (p.in_place) in_place_data += b;
    }
    EXPECT_EQ(pm.fallbacks, 0);
    EXPECT_GT(pm.gradients_peak_live, 0u);
    EXPECT_GE(pm.gradients, pm.gradients_peak_live);
    EXPECT_LE(pm.gradients, pm.gradients_peak_live + pm.gradients_peak_live / 4);
    EXPECT_LE(pm.gradients_unshared, one_each + one_each / 2);  // + scratch of the tensors read twice
    if (std::string(cs.model) != "mnist_cnn") {                 // a chain of 9 layers: little to share
      EXPECT_LE(3 * pm.gradients, one_each);
      EXPECT_GT(in_place_data, 0u);
    }
    EXPECT_LE(pm.activations + in_place_data, all_data + tensor_bytes(g, 0, cs.batch));
    EXPECT_LT(pm.layer_buffers, pm.weights / 2);
  }
}

// --precision bf16: the activations and their gradients are bf16 (two bytes) from the
// first convolution on; the arena is sized by type, every gradient fits its slot, and
// the plan holds about half the fp32 plan's activation and gradient bytes.
TEST(PlanMemory, Bf16ActivationsTakeHalfTheBytes) {
  if (test::precisions_here().size() < 2) GTEST_SKIP() << "no native bf16 on this processor";
  const Case cases[] = {{"resnet50", {3, 32, 32}, 10, 2}, {"mnist_cnn", {1, 28, 28}, 10, 8}};
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.model);
    auto f = make_model(cs.model, cs.shape, cs.classes), h = make_model(cs.model, cs.shape, cs.classes);
    f->prepare(cs.batch, Precision::fp32);
    h->prepare(cs.batch, Precision::bf16);
    const nn::PlanMemory& pf = dynamic_cast<nn::Net&>(*f).plan_memory(cs.batch);
    const nn::PlanMemory& ph = dynamic_cast<nn::Net&>(*h).plan_memory(cs.batch);
    EXPECT_EQ(ph.fallbacks, 0);
    EXPECT_LE(ph.gradients, pf.gradients * 6 / 10);
    EXPECT_LE(ph.activations, pf.activations * 6 / 10);
    EXPECT_EQ(ph.weights, pf.weights);  // fp32 master weights and gradients
  }
}

namespace {

// Two steps and an evaluation of a model built with the switch ENV on (off = false) or
// off, for the A/B tests below: the loss sum, gradients, parameters (running statistics
// too), logits, and how many nodes `flagged` counts in the graph.
struct AbRun {
  double loss = 0;
  std::vector<float> grads, params, logits;
  int flagged = 0;
};
AbRun ab_run(const Case& cs, Precision prec, const char* env, bool off, bool sync, bool (*flagged)(const nn::Node&)) {
  test::RandomBatch d(cs.batch, cs.shape, cs.classes);
  setenv(env, off ? "1" : "0", 1);
  auto m = make_model(cs.model, cs.shape, cs.classes);
  unsetenv(env);
  AbRun r;
  for (const auto& n : dynamic_cast<nn::Net&>(*m).graph().nodes) r.flagged += flagged(n);
  m->init_params(5);
  m->prepare(cs.batch, prec);
  for (int step = 0; step < 2; ++step) {
    StepContext ctx = test::ctx_for(d, cs.batch, step);
    if (sync) ctx.sum_across_ranks = [](double*, size_t) {};
    r.loss += m->forward_backward(d.x.data(), d.y.data(), cs.batch, ctx, {});
  }
  r.grads.assign(m->grad_data(), m->grad_data() + m->param_count());
  r.params.assign(m->param_data(), m->param_data() + m->param_count());
  r.logits.resize(static_cast<size_t>(cs.batch * cs.classes));
  m->forward_eval(d.x.data(), cs.batch, r.logits.data());
  return r;
}
void expect_bitwise_equal(const AbRun& on, const AbRun& off) {
  EXPECT_GT(on.flagged, 0);
  EXPECT_EQ(off.flagged, 0);
  EXPECT_EQ(on.loss, off.loss);
  ASSERT_EQ(on.grads.size(), off.grads.size());
  EXPECT_EQ(0, std::memcmp(on.grads.data(), off.grads.data(), on.grads.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(on.params.data(), off.params.data(), on.params.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(on.logits.data(), off.logits.data(), on.logits.size() * sizeof(float)));
}

}  // namespace

// bn → relu fused (Node::bn_relu: oneDNN's fuse_norm_relu, the relu's mask as workspace)
// against the two layers (CNNSCALE_NO_BN_RELU_FUSION=1): loss, every gradient, the
// batch-norm buffers and the evaluation logits bit-identical, fp32 and bf16, with
// --sync-bn's path too (one rank).
TEST(PlanMemory, BnReluFusionBitwiseEqualToTwoLayers) {
  const Case cases[] = {{"resnet18", {3, 32, 32}, 7, 3}, {"resnet20", {3, 16, 16}, 5, 4}};
  auto fused = [](const nn::Node& n) { return n.bn_relu; };
  for (const auto& cs : cases)
    for (Precision prec : test::precisions_here())
      for (bool sync : {false, true}) {
        SCOPED_TRACE(std::string(cs.model) + (prec == Precision::bf16 ? " bf16" : " fp32") + (sync ? " sync" : ""));
        expect_bitwise_equal(ab_run(cs, prec, "CNNSCALE_NO_BN_RELU_FUSION", false, sync, fused),
                             ab_run(cs, prec, "CNNSCALE_NO_BN_RELU_FUSION", true, sync, fused));
      }
}

// In-place relu/add (backward from the relu's output, the add's gradient shared with
// its input) against the out-of-place layers (CNNSCALE_NO_IN_PLACE=1): loss, every
// gradient, the batch-norm buffers and the evaluation logits bit-identical.
TEST(PlanMemory, InPlaceBitwiseEqualToOutOfPlace) {
  const Case cases[] = {
      {"resnet18", {3, 32, 32}, 7, 3}, {"resnet20", {3, 16, 16}, 5, 4}, {"lenet5", {1, 28, 28}, 10, 5}};
  auto in_place = [](const nn::Node& n) { return n.in_place; };
  for (const auto& cs : cases)
    for (Precision prec : test::precisions_here()) {
      SCOPED_TRACE(std::string(cs.model) + (prec == Precision::bf16 ? " bf16" : " fp32"));
      expect_bitwise_equal(ab_run(cs, prec, "CNNSCALE_NO_IN_PLACE", false, false, in_place),
                           ab_run(cs, prec, "CNNSCALE_NO_IN_PLACE", true, false, in_place));
    }
}
