// Learning-rate scaling, Goyal warm-up, step and cosine decay.
#include <gtest/gtest.h>

#include <cmath>

#include "train/lr_schedule.hpp"
#include "util/error.hpp"

using namespace cnnscale;

TEST(LrSchedule, LinearScalingWithWarmup) {
  LrOptions o;
  o.lr = 0.1;
  o.scaling = "linear";
  o.reference_batch = 256;
  o.warmup_epochs = 2;
  LrSchedule s(o, 1024, 10, 100);  // 4x the reference batch, 10 steps/epoch
  EXPECT_DOUBLE_EQ(s.base(), 0.1);
  EXPECT_DOUBLE_EQ(s.peak(), 0.4);
  EXPECT_NEAR(s.at(0), 0.1 + 0.3 / 20, 1e-12);  // first of 20 warm-up steps
  EXPECT_NEAR(s.at(9), 0.1 + 0.3 * 10 / 20, 1e-12);
  EXPECT_NEAR(s.at(19), 0.4, 1e-12);            // warm-up ends at the peak
  EXPECT_NEAR(s.at(50), 0.4, 1e-12);
  for (int i = 1; i < 20; ++i) EXPECT_GT(s.at(i), s.at(i - 1));
}

TEST(LrSchedule, SqrtAndNone) {
  LrOptions o;
  o.lr = 0.2;
  o.scaling = "sqrt";
  o.reference_batch = 64;
  EXPECT_NEAR(LrSchedule(o, 256, 1, 1).peak(), 0.4, 1e-12);
  o.scaling = "none";
  EXPECT_NEAR(LrSchedule(o, 256, 1, 1).peak(), 0.2, 1e-12);
}

TEST(LrSchedule, StepDecay) {
  LrOptions o;
  o.lr = 1.0;
  o.decay = "step";
  o.step_epochs = 2;
  o.gamma = 0.5;
  LrSchedule s(o, 64, 10, 100);
  EXPECT_DOUBLE_EQ(s.at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.at(19), 1.0);
  EXPECT_DOUBLE_EQ(s.at(20), 0.5);
  EXPECT_DOUBLE_EQ(s.at(45), 0.25);
}

TEST(LrSchedule, CosineAfterWarmupReachesZero) {
  LrOptions o;
  o.lr = 0.8;
  o.decay = "cosine";
  o.warmup_epochs = 1;
  LrSchedule s(o, 64, 10, 110);
  EXPECT_NEAR(s.at(10), 0.8, 1e-12);
  EXPECT_NEAR(s.at(60), 0.4, 1e-12);
  EXPECT_NEAR(s.at(110), 0.0, 1e-12);
}

TEST(LrSchedule, BadOptions) {
  LrOptions o;
  o.scaling = "cubic";
  EXPECT_THROW(validate_lr_options(o), UserError);
  o = LrOptions{};
  o.lr = 0;
  EXPECT_THROW(validate_lr_options(o), UserError);
  o = LrOptions{};
  o.decay = "exp";
  EXPECT_THROW(validate_lr_options(o), UserError);
}
