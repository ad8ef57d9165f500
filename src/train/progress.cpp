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

std::string progress_bar_line(const ProgressState& s, int bar_width) {
  const double frac =
      s.steps_per_epoch > 0
          ? std::clamp(static_cast<double>(s.step_in_epoch) / static_cast<double>(s.steps_per_epoch), 0.0, 1.0)
          : 0.0;
  const int w = std::max(1, bar_width);
  const int filled = static_cast<int>(frac * w);
  std::string bar(static_cast<size_t>(w), ' ');
  for (int i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
  if (filled < w && filled > 0) bar[static_cast<size_t>(filled)] = '>';
  char buf[256];
  std::snprintf(buf, sizeof(buf), "epoch %d/%d [%s] %3d%% step %lld/%lld", s.epoch, s.epochs, bar.c_str(),
                static_cast<int>(frac * 100), static_cast<long long>(s.step), static_cast<long long>(s.total_steps));
  std::string out = buf;
  if (std::isfinite(s.loss) && s.loss >= 0) {
    std::snprintf(buf, sizeof(buf), " loss %.4f", s.loss);
    out += buf;
  }
  if (s.images_per_s > 0) {
    std::snprintf(buf, sizeof(buf), " %.0f img/s", s.images_per_s);
    out += buf;
  }
  if (s.slowest_step_s > 0) {
    std::snprintf(buf, sizeof(buf), " slowest rank %.1f ms/step", s.slowest_step_s * 1e3);
    out += buf;
  }
  if (s.eta_s >= 0) out += " ETA " + format_duration(s.eta_s);
  return out;
}

}  // namespace cnnscale
