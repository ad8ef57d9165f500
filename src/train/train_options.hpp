// train_options.hpp — everything `cnnscale train` can be told (command line or INI).
#pragma once
#include <cstdint>
#include <string>

#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"

namespace cnnscale {

struct TrainOptions {
  // input
  std::string data_dir;          // a `cnnscale prep` output; empty with synthetic
  bool synthetic = false;
  int64_t synthetic_samples = 60000;
  bool drop_last = true;
  int prefetch = 2;
  std::string cache = "none";    // none | memory
  // model and numerics
  std::string model = "mnist_cnn";
  std::string precision = "fp32";  // fp32 | bf16
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
  std::string backend = "auto";
  bool allow_gpu_sharing = false;
  double bucket_mb = 25.0;
  double first_bucket_mb = 1.0;
  int64_t check_replicas = 0;    // every N steps verify all ranks hold identical parameters (0: off)
  // output
  std::string run_dir;           // empty: no files
  int64_t log_every = 100;
  // checkpoint / fault handling
  int64_t checkpoint_every = 0;  // steps; 0 = only at epoch ends and on signals
  std::string resume = "auto";   // auto | none | PATH
  bool force_new = false;        // with resume none: move an old run in run_dir aside (run_dir.hpp)
  int keep_checkpoints = 3;
  double collective_timeout = 300;
  std::string on_nan = "stop";   // stop | skip-step
};

}  // namespace cnnscale
