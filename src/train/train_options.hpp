// train_options.hpp — everything `cnnscale train` can be told (command line or INI),
// already parsed: choices are enums, the input is the data module's own DataOptions.
// The CLI parses the text (parse_* below) and calls validate() before it starts the
// world, so a mistake is reported before any rank waits for another.
#pragma once
#include <cstdint>
#include <string>

#include "comm/communicator.hpp"
#include "data/open_source.hpp"
#include "nn/model.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"
#include "train/timeline.hpp"

namespace cnnscale {

// --on-nan: what a non-finite training loss on any rank does.
enum class NanPolicy {
  stop,       // stop with an error; the last checkpoint is left untouched
  skip_step,  // skip that step's update and go on
};

// --resume auto|none|PATH.
struct ResumeFrom {
  enum class Mode { automatic, none, path } mode = Mode::automatic;
  std::string path;  // for Mode::path
};

struct TrainOptions {
  // input: --data, --synthetic, --synthetic-samples, --drop-last, --prefetch, --cache,
  // --augment (batch_per_rank and seed are the run's: see data_options())
  DataOptions data;
  // model and numerics
  std::string model = "mnist_cnn";
  ModelOptions model_options;    // --zero-init-residual, --tf32, --cudnn-benchmark
  // --loss, --class-weights, --ignore-index (nn/task.hpp). loss_given false: the data
  // set's task picks the loss (default_loss), task.loss is ignored.
  TaskOptions task;
  bool loss_given = false;
  Precision precision = Precision::fp32;
  int threads = 1;               // compute threads per rank
  // schedule
  int epochs = 1;
  int64_t max_steps = 0;         // 0 = no limit
  int64_t batch_size = 64;       // per rank
  uint64_t seed = 42;
  LrOptions lr;
  OptimizerOptions optimizer;
  bool evaluate = true;          // test-split accuracy at each epoch end (not synthetic)
  // parallelism
  Backend backend = Backend::automatic;
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  int64_t check_replicas = 0;    // every N steps verify all ranks hold identical parameters (0: off)
  // --sync-bn: batch-norm statistics over the global batch (torch.nn.SyncBatchNorm);
  // off: each rank's own batch, running statistics broadcast from rank 0 (DDP's default)
  bool sync_bn = false;
  // output
  std::string run_dir;           // empty: no files
  int64_t log_every = 100;
  std::string timeline;          // --timeline FILE.json (train/timeline.hpp); empty: none
  TimelineWindow timeline_steps; // --timeline-steps A:B; not given: default_timeline_window
  // TensorBoard event files (train/tensorboard.hpp): --tensorboard DIR, default
  // RUN_DIR/tb with --run-dir; --no-tensorboard: none. See tensorboard_dir().
  std::string tensorboard;
  bool no_tensorboard = false;
  // checkpoint / fault handling
  int64_t checkpoint_every = 0;  // steps; 0 = only at epoch ends and on signals
  ResumeFrom resume;
  bool force_new = false;        // with --resume none: move an old run in run_dir aside (run_dir.hpp)
  int keep_checkpoints = 3;
  double collective_timeout = 300;
  NanPolicy on_nan = NanPolicy::stop;

  // `data` with this run's per-rank batch and seed.
  DataOptions data_options() const;
  // Where rank 0 writes TensorBoard events: --tensorboard, else RUN_DIR/tb, else "" (none).
  std::string tensorboard_dir() const;
};

// Text → choice; each throws UserError naming the option and the accepted values.
Precision parse_precision(const std::string& s);  // fp32 | bf16
NanPolicy parse_nan_policy(const std::string& s);  // stop | skip-step
ResumeFrom parse_resume(const std::string& s);     // auto | none | anything else is a path
const char* precision_name(Precision p);
// --image-size S or HxW (e.g. 224, 32x48): `shape` with that height and width.
SampleShape parse_image_size(const std::string& s, SampleShape shape);
std::string resume_text(const ResumeFrom& r);      // as the user wrote it: auto, none or the path

// Checks what needs no other rank (ranges, combinations); throws UserError naming the
// option.
void validate(const TrainOptions& o);

}  // namespace cnnscale
