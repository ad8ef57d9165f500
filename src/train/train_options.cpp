// train_options.cpp — see train_options.hpp.
#include "train/train_options.hpp"

#include "util/error.hpp"

namespace cnnscale {

DataOptions TrainOptions::data_options() const {
  DataOptions d = data;
  d.batch_per_rank = batch_size;
  d.seed = seed;
  return d;
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16") return Precision::bf16;
  fail("--precision ", s, " is not supported; use fp32 or bf16");
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

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
  if (o.bucket_mb <= 0 || o.first_bucket_mb <= 0) fail("--bucket-mb must be positive");
  if (o.log_every < 1) fail("--log-every must be at least 1");
  if (o.checkpoint_every < 0) fail("--checkpoint-every must not be negative");
  if (o.keep_checkpoints < 1) fail("--keep-checkpoints must be at least 1");
  if (!(o.collective_timeout > 0)) fail("--collective-timeout must be positive (seconds)");
}

}  // namespace cnnscale
