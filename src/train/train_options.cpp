// train_options.cpp — see train_options.hpp.
#include "train/train_options.hpp"

#include <cstdio>

#include "util/error.hpp"

namespace cnnscale {

DataOptions TrainOptions::data_options() const {
  DataOptions d = data;
  d.batch_per_rank = batch_size;
  d.seed = seed;
  d.label_fill = task.ignore_index;
  return d;
}

std::string TrainOptions::tensorboard_dir() const {
  if (no_tensorboard) return "";
  if (!tensorboard.empty()) return tensorboard;
  return run_dir.empty() ? std::string() : run_dir + "/tb";
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16") return Precision::bf16;
  fail("--precision ", s, " is not supported; use fp32 or bf16");
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

SampleShape parse_image_size(const std::string& s, SampleShape shape) {
  long h = 0, w = 0;
  char x = 0, extra = 0;
  const int got = std::sscanf(s.c_str(), "%ld%c%ld%c", &h, &x, &w, &extra);
  if (got == 1) w = h;
  const bool ok = (got == 1 || (got == 3 && (x == 'x' || x == 'X'))) && h >= 1 && w >= 1 && h <= 65536 && w <= 65536;
  if (!ok) fail("--image-size ", s, " is not an image size; give S (S×S pixels, e.g. 224) or HxW (e.g. 32x48)");
  shape.height = static_cast<int>(h);
  shape.width = static_cast<int>(w);
  return shape;
}

NanPolicy parse_nan_policy(const std::string& s) {
  if (s == "stop") return NanPolicy::stop;
  if (s == "skip-step") return NanPolicy::skip_step;
  fail("--on-nan ", s, " is not supported; use stop or skip-step");
}

ResumeFrom parse_resume(const std::string& s) {
  ResumeFrom r;
  if (s == "auto") r.mode = ResumeFrom::Mode::automatic;
  else if (s == "none") r.mode = ResumeFrom::Mode::none;
  else r.mode = ResumeFrom::Mode::path, r.path = s;
  return r;
}

std::string resume_text(const ResumeFrom& r) {
  switch (r.mode) {
    case ResumeFrom::Mode::automatic: return "auto";
    case ResumeFrom::Mode::none: return "none";
    case ResumeFrom::Mode::path: return r.path;
  }
  return "auto";
}

void validate(const TrainOptions& o) {
  if (o.threads < 1)
    fail("--threads ", o.threads, " is not a thread count: give at least 1 compute thread per rank "
         "(e.g. Slurm's --cpus-per-task)");
  validate_lr_options(o.lr);
  if (o.batch_size < 1) fail("--batch-size must be at least 1 (it is per rank)");
  if (o.epochs < 1 && o.max_steps <= 0) fail("--epochs must be at least 1 (or give --max-steps)");
  if (o.data.dir.empty() && !o.data.synthetic)
    fail("no input: give --data DIR (a `cnnscale prep` output) or --synthetic");
  if (!o.data.dir.empty() && o.data.synthetic) fail("--data and --synthetic exclude each other; pick one");
  if (o.data.synthetic && o.data.synthetic_shape.channels < 1) fail("--channels must be at least 1 (3 for RGB images)");
  if (o.data.synthetic && o.data.synthetic_classes < 2) fail("--classes must be at least 2");
  if (o.bucket_mb <= 0 || o.first_bucket_mb <= 0) fail("--bucket-mb must be positive");
  if (o.log_every < 1) fail("--log-every must be at least 1");
  if (o.no_tensorboard && !o.tensorboard.empty())
    fail("--tensorboard ", o.tensorboard, " and --no-tensorboard exclude each other; pick one");
  if (o.checkpoint_every < 0) fail("--checkpoint-every must not be negative");
  if (o.keep_checkpoints < 1) fail("--keep-checkpoints must be at least 1");
  if (!(o.collective_timeout > 0)) fail("--collective-timeout must be positive (seconds)");
  if (o.timeline_steps.given() && o.timeline.empty())
    fail("--timeline-steps needs --timeline FILE.json (the file the recorded steps go to)");
}

}  // namespace cnnscale
