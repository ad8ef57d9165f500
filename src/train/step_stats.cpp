// step_stats.cpp — see step_stats.hpp.
#include "train/step_stats.hpp"

namespace cnnscale {

int warmup_steps_to_skip(long long total_steps) {
  if (total_steps <= 1) return 0;
  long long k = total_steps / 10;
  if (k < 1) k = 1;
  if (k > 20) k = 20;
  return static_cast<int>(k);
}

}  // namespace cnnscale
