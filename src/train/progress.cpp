// progress.cpp — see progress.hpp.
#include "train/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cnnscale {

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

std::string format_rate(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v >= 10 || v <= 0 ? "%.0f" : "%.3g", v);
  return buf;
}

std::string progress_bar_line(const ProgressState& s, int columns) {
  const double frac =
      s.steps_per_epoch > 0
          ? std::clamp(static_cast<double>(s.step_in_epoch) / static_cast<double>(s.steps_per_epoch), 0.0, 1.0)
          : 0.0;
  char buf[256];
  std::string tail;
  std::snprintf(buf, sizeof(buf), " %3d%% step %lld/%lld", static_cast<int>(frac * 100), static_cast<long long>(s.step),
                static_cast<long long>(s.total_steps));
  tail += buf;
  if (s.eta_s >= 0) tail += " ETA " + format_duration(s.eta_s);
  if (std::isfinite(s.loss) && s.loss >= 0) {
    std::snprintf(buf, sizeof(buf), " loss %.4f", s.loss);
    tail += buf;
  }
  if (s.images_per_s > 0) {
    std::snprintf(buf, sizeof(buf), " %.0f img/s", s.images_per_s);
    tail += buf;
  }
  if (s.slowest_step_s > 0) {
    std::snprintf(buf, sizeof(buf), " slowest rank %.1f ms/step", s.slowest_step_s * 1e3);
    tail += buf;
  }
  std::snprintf(buf, sizeof(buf), "epoch %d/%d ", s.epoch, s.epochs);
  const std::string head = buf;
  const int room = columns - 1 - static_cast<int>(head.size() + tail.size()) - 2;
  const int w = std::clamp(room, 8, 30);
  const int filled = static_cast<int>(frac * w);
  std::string bar(static_cast<size_t>(w), ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
  if (filled < w && filled > 0) bar[static_cast<size_t>(filled)] = '>';
  return head + "[" + bar + "]" + tail;
}

}  // namespace cnnscale
