// Optimiser updates against PyTorch's formulas evaluated by hand in double precision.
#include <gtest/gtest.h>

#include <cmath>

#include "train/optimizer.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {
std::vector<ParamInfo> two_params() {
  ParamInfo w{"fc.weight", {3}, 0, 3, true, true};
  ParamInfo rm{"bn.running_mean", {2}, 3, 2, false, false};
  return {w, rm};
}
}  // namespace

TEST(Sgd, PlainMomentumMatchesTorch) {
  OptimizerOptions o;
  o.momentum = 0.9;
  o.weight_decay = 0.01;
  auto opt = make_optimizer(o, two_params(), 5);
  std::vector<float> p{1.f, -2.f, 0.5f, 7.f, 7.f};
  const std::vector<std::vector<float>> grads{{0.1f, 0.2f, -0.3f, 9.f, 9.f}, {-0.2f, 0.1f, 0.4f, 9.f, 9.f}};
  std::vector<double> ref{1.0, -2.0, 0.5}, buf(3, 0.0);
  const double lr = 0.05;
  for (size_t s = 0; s < grads.size(); ++s) {
    opt->step(p.data(), grads[s].data(), lr);
    for (int i = 0; i < 3; ++i) {
      double d = grads[s][i] + 0.01 * ref[i];
      buf[i] = s == 0 ? d : 0.9 * buf[i] + d;
      ref[i] -= lr * buf[i];
      EXPECT_NEAR(p[i], ref[i], 1e-6) << "step " << s << " i " << i;
    }
  }
  EXPECT_EQ(p[3], 7.f);  // non-trainable buffer untouched
  EXPECT_EQ(p[4], 7.f);
  EXPECT_EQ(opt->steps_taken(), 2);
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_EQ(opt->state()[0].first, "momentum_buffer");
}

TEST(Sgd, NesterovMatchesTorch) {
  OptimizerOptions o;
  o.momentum = 0.5;
  o.nesterov = true;
  auto opt = make_optimizer(o, two_params(), 5);
  std::vector<float> p{1.f, 1.f, 1.f, 0.f, 0.f};
  std::vector<float> g{1.f, 2.f, 3.f, 0.f, 0.f};
  std::vector<double> ref{1, 1, 1}, buf(3);
  for (int s = 0; s < 3; ++s) {
    opt->step(p.data(), g.data(), 0.1);
    for (int i = 0; i < 3; ++i) {
      buf[i] = s == 0 ? g[i] : 0.5 * buf[i] + g[i];
      ref[i] -= 0.1 * (g[i] + 0.5 * buf[i]);
      EXPECT_NEAR(p[i], ref[i], 1e-6);
    }
  }
}

TEST(Sgd, NoMomentumIsPlainGradientDescent) {
  OptimizerOptions o;
  o.momentum = 0;
  auto opt = make_optimizer(o, two_params(), 5);
  std::vector<float> p{1.f, 2.f, 3.f, 0.f, 0.f}, g{1.f, 1.f, 1.f, 0.f, 0.f};
  opt->step(p.data(), g.data(), 0.5);
  EXPECT_FLOAT_EQ(p[0], 0.5f);
  EXPECT_FLOAT_EQ(p[2], 2.5f);
  EXPECT_TRUE(opt->state().empty());
}

TEST(AdamW, MatchesTorchFormula) {
  OptimizerOptions o;
  o.kind = "adamw";
  o.weight_decay = 0.1;
  auto opt = make_optimizer(o, two_params(), 5);
  std::vector<float> p{0.5f, -0.5f, 2.f, 1.f, 1.f};
  std::vector<double> ref{0.5, -0.5, 2.0}, m(3), v(3);
  const double lr = 1e-2;
  for (int s = 1; s <= 4; ++s) {
    std::vector<float> g{0.3f * s, -0.1f, 0.02f / s, 5.f, 5.f};
    opt->step(p.data(), g.data(), lr);
    for (int i = 0; i < 3; ++i) {
      ref[i] *= 1 - lr * 0.1;
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * g[i] * g[i];
      double mh = m[i] / (1 - std::pow(0.9, s)), vh = v[i] / (1 - std::pow(0.999, s));
      ref[i] -= lr * mh / (std::sqrt(vh) + 1e-8);
      EXPECT_NEAR(p[i], ref[i], 2e-6) << "step " << s << " i " << i;
    }
  }
  EXPECT_EQ(p[3], 1.f);
  EXPECT_EQ(opt->state().size(), 2u);
}

TEST(Optimizer, BadOptionsAreUserErrors) {
  OptimizerOptions o;
  o.kind = "lamb";
  EXPECT_THROW(make_optimizer(o, two_params(), 5), UserError);
  o.kind = "sgd";
  o.momentum = 0;
  o.nesterov = true;
  EXPECT_THROW(make_optimizer(o, two_params(), 5), UserError);
  o.nesterov = false;
  o.weight_decay = -1;
  EXPECT_THROW(make_optimizer(o, two_params(), 5), UserError);
}
