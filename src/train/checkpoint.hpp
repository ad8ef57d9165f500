// checkpoint.hpp — checkpoints as HDF5 files that PyTorch users can open.
//
// Layout of checkpoints/step-NNNNNNNN.h5:
//   /model/<state_dict name>                 float32, PyTorch layout (O×I×kH×kW, out×in, …)
//   /optimizer/<state name>/<param name>     e.g. momentum_buffer, exp_avg, exp_avg_sq
//   root attributes: format, step, epoch, step_in_epoch, world_size, global_batch, seed,
//     model (name), model_spec, optimizer, optimizer_steps, config_digest, config (the
//     run's identity as "key=value" lines, run_dir.hpp; absent in older checkpoints),
//     tuning (Model::tuning() of the writing rank 0: the GPU model's cuDNN convolution
//     algorithms, nn/conv_algo.hpp; absent for the CPU model and in older checkpoints;
//     a resumed run reapplies it so that it runs the algorithms of the run it continues)
// Datasets are chunked with HDF5's fletcher32 checksum, so a flipped bit is detected
// on read. Rank 0 writes a temporary file beside it (util/atomic_file.hpp: a random
// name, created exclusively), fsyncs, renames, then rewrites `latest` atomically: a
// crash at any moment leaves the previous checkpoint intact and `latest` naming a
// complete file. The sample order is a pure function of (seed,
// epoch), so (epoch, step_in_epoch) is the whole sampler state; dropout is a pure
// function of (seed, step, sample), so there is no other RNG state to save.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/model.hpp"
#include "train/optimizer.hpp"
#include "util/error.hpp"

namespace cnnscale {

struct CheckpointMeta {
  int64_t step = 0;              // optimiser steps completed
  int epoch = 0;                 // sampler position of the NEXT batch
  int64_t step_in_epoch = 0;
  int world_size = 1;
  int64_t global_batch = 0;
  uint64_t seed = 0;
  std::string model;
  std::string model_spec;
  std::string optimizer;
  int64_t optimizer_steps = 0;
  std::string config_digest;
  std::string config;            // RunConfig::text(); empty when not recorded
  std::string tuning;            // Model::tuning(); empty when not recorded (written only when not empty)
  // The model's input (C×H×W after augmentation) and classes: what `cnnscale export`
  // rebuilds the model with. 0 when not recorded (checkpoints before 2026-12-06).
  int64_t input_channels = 0, input_height = 0, input_width = 0, classes = 0;
  int64_t input_depth = 0;  // a volume's D (0: images); written only when > 0
};

std::string checkpoint_file_name(int64_t step);  // "step-00000123.h5"

// A sound checkpoint of another model or optimizer than the configured ones (the model
// spec, a parameter's shape or --optimizer differs). Not damage: every older checkpoint
// of the run holds the same, so resume stops at the first one instead of trying (and
// reporting as damaged) the others.
class CheckpointMismatch : public UserError {
 public:
  using UserError::UserError;
};

// A checkpoint whose parameters, buffers or optimiser state hold a NaN or ±Inf (a run
// that diverged, or an edited file; issue 39 item 1), or a value no run writes (a negative
// batch-norm running variance; issue 48 item 8). Refused when read, never written.
// Like a mismatch it ends resume's search: falling back to an older checkpoint would
// overwrite this one's step later, and which one to continue from is the user's choice.
class CheckpointNonFinite : public UserError {
 public:
  using UserError::UserError;
};

// The first tensor of `model`'s parameters and buffers or `opt`'s state that holds a NaN
// or ±Inf, named as in a checkpoint with its counts ("/model/conv1.weight: 288 NaN and 0
// ±Inf of its 288 values"); empty when every value is finite. A device model's
// parameters and state are read through host copies.
std::string non_finite_tensor(Model& model, Optimizer& opt);

// Rank 0 only. Writes dir/step-N.h5 and dir/latest, then keeps the newest `keep` by
// step among those up to step N (never the one just written, so `latest` always names
// an existing file; files of later steps, left by a run resumed from an older
// checkpoint, are replaced as the run reaches them).
// Throws UserError (directory unwritable, disk full; CheckpointNonFinite when a tensor
// holds a NaN or ±Inf: nothing is written) leaving older checkpoints valid.
std::string write_checkpoint(const std::string& dir, Model& model, Optimizer& opt, const CheckpointMeta& meta,
                             int keep);

// Reads and validates a checkpoint into model and optimiser (names, shapes, every
// dataset's checksum, every value finite). Throws UserError naming the file and the
// first problem (CheckpointMismatch when it is the model spec, the first parameter's
// shape or the optimizer that does not match the configuration; CheckpointNonFinite when
// a tensor holds a NaN or ±Inf), leaving model and optimiser as they were.
CheckpointMeta read_checkpoint(const std::string& path, Model& model, Optimizer& opt);

// The root attributes only (cheap; the datasets are not read or checked). Throws
// UserError when the file is unreadable or lacks them.
CheckpointMeta read_checkpoint_meta(const std::string& path);

// Checkpoints of dir, newest first: `latest`'s target, then step-*.h5 by step.
std::vector<std::string> checkpoint_candidates(const std::string& dir);

// A stable digest of the options that change the trajectory (hex).
std::string digest_of(const std::string& canonical_config);

}  // namespace cnnscale
