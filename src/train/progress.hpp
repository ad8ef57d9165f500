// progress.hpp — the text of rank 0's live progress bar (`cnnscale train` with stderr
// on a terminal; util/log.hpp draws it) and the H:MM:SS durations of the progress lines.
#pragma once
#include <cstdint>
#include <string>

namespace cnnscale {

// "1:02:03"; "?" for a negative, non-finite or absurd (> 10^7 s) value.
std::string format_duration(double seconds);
// A rate for the progress and done lines: whole numbers from 10 up, 3 significant digits below
// (a CosmoFlow step on 128³ volumes runs at 0.4 samples/s, which "%.0f" showed as 0).
std::string format_rate(double per_s);

struct ProgressState {
  int epoch = 1, epochs = 1;                       // 1-based
  int64_t step_in_epoch = 0, steps_per_epoch = 1;  // steps done in this epoch
  int64_t step = 0, total_steps = 0;               // steps done in the run
  double loss = -1;                                // last progress line's loss; < 0 or NaN: none yet
  double images_per_s = 0;                         // from the slowest rank's step time
  double slowest_step_s = 0;                       // the slowest rank's last step time; 0: unknown
  double eta_s = -1;
};

// "epoch 2/5 [=======>            ] 37% step 123/500 ETA 0:01:02 loss 0.5312 1234 img/s slowest rank
// 85.2 ms/step": the bar covers the current epoch, 8 to 30 characters as `columns` (the
// terminal's width) leaves room; parts without a value are left out; the most useful
// parts first, as a narrow terminal cuts the line's end.
std::string progress_bar_line(const ProgressState& s, int columns = 80);

}  // namespace cnnscale
