// trainer.hpp — `cnnscale train`: bootstrap, data, model, data-parallel loop,
// evaluation, progress, metrics.jsonl and run.json.
#pragma once
#include "train/train_options.hpp"

namespace cnnscale {

// Runs the whole training job on every rank (collective). Returns the exit status.
int run_training(const TrainOptions& opt);

}  // namespace cnnscale
