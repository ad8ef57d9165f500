// test_timeline.cpp — the pieces of --timeline and the progress bar that need no MPI:
// --timeline-steps parsing, the default window, what a Timeline records (only steps of
// its window; backward spans named after their layers), and the bar's text.
#include <gtest/gtest.h>

#include "common/user_error.hpp"
#include "train/progress.hpp"
#include "train/timeline.hpp"

using namespace cnnscale;
using cnnscale::test::user_error_of;

TEST(TimelineSteps, Parse) {
  const TimelineWindow w = parse_timeline_steps("21:70");
  EXPECT_EQ(w.first, 21);
  EXPECT_EQ(w.last, 70);
  EXPECT_TRUE(w.given());
  EXPECT_EQ(parse_timeline_steps("5:5").last, 5);
  for (const char* bad : {"", "5", "9:5", "0:3", "-1:3", "3:x", "3:4:5", "a:b", "3-4"})
    EXPECT_NE(user_error_of([&] { parse_timeline_steps(bad); }).find("is not a step range; give A:B"),
              std::string::npos)
        << bad;
}

TEST(TimelineSteps, DefaultWindowAfterWarmup) {
  // 1000 steps: the summary leaves out 20 warm-up steps; then 50 steps.
  EXPECT_EQ(default_timeline_window(0, 1000).first, 21);
  EXPECT_EQ(default_timeline_window(0, 1000).last, 70);
  // 80 steps: 8 warm-up steps.
  EXPECT_EQ(default_timeline_window(0, 80).first, 9);
  EXPECT_EQ(default_timeline_window(0, 80).last, 58);
  // A short run: clipped to its steps.
  EXPECT_EQ(default_timeline_window(0, 5).first, 2);
  EXPECT_EQ(default_timeline_window(0, 5).last, 5);
  EXPECT_EQ(default_timeline_window(0, 1).first, 1);
  EXPECT_EQ(default_timeline_window(0, 1).last, 1);
  // Resumed at step 500 of 1000: after this segment's own warm-up.
  EXPECT_EQ(default_timeline_window(500, 1000).first, 521);
  EXPECT_EQ(default_timeline_window(500, 1000).last, 570);
}

TEST(Timeline, RecordsOnlyItsWindowAndNamesLayers) {
  // Reverse-registration layout: fc2 at the front, conv1 at the back.
  const std::vector<std::pair<size_t, std::string>> layers = {{10, "fc2.bias"},    {50, "fc2.weight"},
                                                              {60, "fc1.bias"},    {200, "fc1.weight"},
                                                              {208, "conv1.bias"}, {300, "conv1.weight"}};
  Timeline tl("unused.json", {3, 4}, 0, "host", layers, {200 * 4, 100 * 4});
  for (int64_t step = 1; step <= 6; ++step) {
    EXPECT_EQ(tl.begin_step(step), step >= 3 && step <= 4) << step;
    const double t = static_cast<double>(step);
    tl.span(Timeline::kForward, "forward", t, t + 0.1);
    tl.backward(0, 50, t + 0.1, t + 0.2);
    tl.backward(50, 300, t + 0.2, t + 0.4);
    tl.buckets({{t + 0.15, t + 0.5}, {t + 0.4, t + 0.3}});  // the second: summed before started → dur 0
  }
  const auto& ev = tl.events();
  ASSERT_EQ(ev.size(), 2u * 5u);
  EXPECT_EQ(ev.front().step, 3);
  EXPECT_EQ(ev.back().step, 4);
  EXPECT_EQ(ev[1].name, "fc2");
  EXPECT_EQ(ev[1].tid, Timeline::kBackward);
  EXPECT_EQ(ev[2].name, "fc1 + conv1");
  EXPECT_EQ(ev[3].tid, Timeline::kBucket0);
  EXPECT_EQ(ev[3].name, "allreduce bucket 0");
  EXPECT_EQ(ev[4].tid, Timeline::kBucket0 + 1);
  EXPECT_GE(ev[4].end, ev[4].start);
  for (const auto& e : ev) EXPECT_GE(e.end, e.start);
}

TEST(Progress, Duration) {
  EXPECT_EQ(format_duration(0), "0:00:00");
  EXPECT_EQ(format_duration(3723.4), "1:02:03");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(1e9), "?");
}

TEST(Progress, BarLine) {
  ProgressState s;
  s.epoch = 2;
  s.epochs = 5;
  s.step_in_epoch = 50;
  s.steps_per_epoch = 100;
  s.step = 150;
  s.total_steps = 500;
  s.loss = 0.53125;
  s.images_per_s = 1234.4;
  s.slowest_step_s = 0.0852;
  s.eta_s = 62;
  const std::string line = progress_bar_line(s, 200);
  EXPECT_EQ(line, "epoch 2/5 [===============>              ]  50% step 150/500 ETA 0:01:02 loss 0.5312 1234 img/s "
                  "slowest rank 85.2 ms/step");
  // Narrow terminals get a narrower bar (at least 8).
  const std::string narrow = progress_bar_line(s, 60);
  EXPECT_NE(narrow.find("[====>   ]  50%"), std::string::npos) << narrow;
  // Unknown parts are left out.
  ProgressState empty;
  empty.total_steps = 10;
  EXPECT_EQ(progress_bar_line(empty, 80).find("loss"), std::string::npos);
  EXPECT_EQ(progress_bar_line(empty, 80).find("ETA"), std::string::npos);
}
