// lr_schedule.hpp — the learning rate at each step.
//
// Scaling with the global batch (Goyal et al., "Accurate, Large Minibatch SGD"):
//   linear: lr × global_batch / reference_batch;  sqrt: lr × √(global/reference);  none.
// Warm-up: over the first warmup_epochs, ramp linearly from the unscaled lr to the
// scaled lr (per step). Then decay over the remaining steps: none, step (× gamma every
// step_epochs), or cosine (to 0 at the last step).
#pragma once
#include <cstdint>
#include <string>

namespace cnnscale {

struct LrOptions {
  double lr = 0.01;
  std::string scaling = "none";  // linear | sqrt | none
  int64_t reference_batch = 64;
  double warmup_epochs = 0;
  std::string decay = "none";    // none | step | cosine
  double step_epochs = 1;        // for decay=step
  double gamma = 0.1;            // for decay=step
};

class LrSchedule {
 public:
  LrSchedule(const LrOptions& o, int64_t global_batch, int64_t steps_per_epoch, int64_t total_steps);
  double at(int64_t step) const;  // 0-based optimiser step
  double base() const { return base_; }
  double peak() const { return peak_; }

 private:
  LrOptions o_;
  double base_ = 0, peak_ = 0;
  int64_t steps_per_epoch_ = 1, total_steps_ = 1, warmup_steps_ = 0;
};

// Throws UserError on unknown names or bad values.
void validate_lr_options(const LrOptions& o);

}  // namespace cnnscale
