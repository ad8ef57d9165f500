// Percentiles (numpy's linear interpolation) and the warm-up rule.
#include <gtest/gtest.h>

#include "train/grad_sync.hpp"
#include "train/step_stats.hpp"

using namespace cnnscale;

TEST(StepStats, PercentilesLikeNumpy) {
  Spread s = spread_of({5, 1, 4, 2, 3, 10, 6, 8, 7, 9});
  EXPECT_DOUBLE_EQ(s.median, 5.5);
  EXPECT_DOUBLE_EQ(s.p10, 1.9);
  EXPECT_DOUBLE_EQ(s.p90, 9.1);
  EXPECT_DOUBLE_EQ(s.mean, 5.5);
  EXPECT_DOUBLE_EQ(spread_of({}).median, 0.0);
  EXPECT_DOUBLE_EQ(spread_of({3}).p90, 3.0);
}

TEST(StepStats, WarmupSkip) {
  EXPECT_EQ(warmup_steps_to_skip(1), 0);
  EXPECT_EQ(warmup_steps_to_skip(5), 1);
  EXPECT_EQ(warmup_steps_to_skip(100), 10);
  EXPECT_EQ(warmup_steps_to_skip(100000), 20);
}

TEST(Buckets, FirstBucketSmallThenCap) {
  // params (floats): 1290 | 1179648 | 18432+64 ... as ends of each flat range
  std::vector<size_t> ends{1280, 1290, 1180938, 1181066, 1199498, 1199562, 1199850, 1199882};
  auto b = plan_buckets(ends, 1 << 20, 25 << 20);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].begin, 0u);
  EXPECT_EQ(b[0].end, 1180938u);  // fc2 + fc1: first bucket closes once past 1 MiB
  EXPECT_EQ(b[1].begin, 1180938u);
  EXPECT_EQ(b[1].end, 1199882u);
  auto tiny = plan_buckets(ends, 4096, 4096);
  EXPECT_EQ(tiny.front().end, 1280u);  // one parameter per bucket when caps are tiny
  EXPECT_EQ(tiny.back().end, 1199882u);
  for (size_t i = 1; i < tiny.size(); ++i) EXPECT_EQ(tiny[i].begin, tiny[i - 1].end);
}
