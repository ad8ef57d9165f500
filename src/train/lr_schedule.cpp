// lr_schedule.cpp — see lr_schedule.hpp.
#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "util/error.hpp"

namespace cnnscale {

void validate_lr_options(const LrOptions& o) {
  if (!(o.lr > 0)) fail("--lr must be positive (got ", o.lr, ")");
  if (o.scaling != "linear" && o.scaling != "sqrt" && o.scaling != "none")
    fail("--lr-scaling ", o.scaling, " is not supported; use linear, sqrt or none");
  if (o.reference_batch < 1) fail("--lr-reference-batch must be at least 1");
  if (o.warmup_epochs < 0) fail("--warmup-epochs must not be negative");
  if (o.decay != "none" && o.decay != "step" && o.decay != "cosine")
    fail("--lr-decay ", o.decay, " is not supported; use none, step or cosine");
  if (o.decay == "step" && !(o.step_epochs > 0)) fail("--lr-step-epochs must be positive");
}

LrSchedule::LrSchedule(const LrOptions& o, int64_t global_batch, int64_t steps_per_epoch, int64_t total_steps)
    : o_(o), steps_per_epoch_(std::max<int64_t>(1, steps_per_epoch)), total_steps_(std::max<int64_t>(1, total_steps)) {
  base_ = o.lr;
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(o.reference_batch);
  peak_ = o.scaling == "linear" ? o.lr * ratio : o.scaling == "sqrt" ? o.lr * std::sqrt(ratio) : o.lr;
  warmup_steps_ = static_cast<int64_t>(std::llround(o.warmup_epochs * static_cast<double>(steps_per_epoch_)));
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup_steps_) {
    const double t = static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
    return base_ + (peak_ - base_) * t;
  }
  if (o_.decay == "step") {
    const double epoch = static_cast<double>(step) / static_cast<double>(steps_per_epoch_);
    return peak_ * std::pow(o_.gamma, std::floor(epoch / o_.step_epochs));
  }
  if (o_.decay == "cosine") {
    const int64_t span = std::max<int64_t>(1, total_steps_ - warmup_steps_);
    const double t = std::min(1.0, static_cast<double>(step - warmup_steps_) / static_cast<double>(span));
    return 0.5 * peak_ * (1.0 + std::cos(M_PI * t));
  }
  return peak_;
}

}  // namespace cnnscale
