// batch_source.hpp — the contract between the input pipeline and the training loop.
//
// A BatchSource yields, for this rank, its slice of each global batch, in order.
// The global order of an epoch is a pure function of (seed, epoch) (see sampler.hpp):
// rank r of W takes samples [r*B, (r+1)*B) of each global batch of W*B samples, so a
// 1-rank run with batch W*B sees the same global batches as a W-rank run with B.
// Images arrive normalised (float, N×C×H×W); normalisation and uint8→float happen
// in the reader thread, never on the training thread.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/sample_shape.hpp"
#include "util/task_kind.hpp"

namespace cnnscale {

struct Batch {
  int epoch = 0;                    // 0-based
  int64_t step_in_epoch = 0;        // 0-based step within the epoch
  int64_t count = 0;                // samples on this rank (the per-rank batch size)
  int64_t rank_offset = 0;          // position of this rank's first sample in the global batch
  std::vector<float> images;        // count × shape.numel(), normalised
  std::vector<int32_t> labels;      // classification: count, each in [0, classes)
  std::vector<float> targets;       // regression, multi-label: count × classes (K per sample)
  std::vector<int64_t> sample_ids;  // global sample index of each image (drives dropout RNG)
  // What the batch hook (BatchSource::set_batch_hook) returned for this batch, or -1:
  // for the GPU model, the ticket of a pinned copy made in the reader thread
  // (Model::stage). Opaque to the data pipeline.
  int64_t ticket = -1;
};

// Runs on every training batch right after it is made, in the thread that made it (the
// prefetcher's, or the caller of next() when the source prefetches nothing), once per
// batch, in (epoch, step) order; returns the batch's ticket. The data pipeline knows
// nothing of models: the training loop installs a hook that calls Model::stage, so the
// copy into pinned memory happens off the training thread.
using BatchHook = std::function<int64_t(const Batch&)>;

// Where a reader's threads spent their time, summed over the threads, in seconds: what
// `cnnscale data-bench` prints per image. The reads and the lock wait on the wall clock
// (waiting for storage is the point), the compute stages in thread CPU time (a busy
// node's preemptions do not count).
struct ReaderStageTimes {
  double read = 0;       // bytes from the files: the direct reader's pread()s, or HDF5's read after its lock
  double checksum = 0;   // the direct reader's Fletcher32 (HDF5's own check is part of its `read`)
  double lock_wait = 0;  // waiting for the HDF5 lock (HDF5's path: --cache, gzip shards)
  double decode = 0;     // JPEG decoding (prep --store jpeg), CPU
  double augment = 0;    // --augment, CPU
  double normalize = 0;  // uint8 → float, CPU
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual SampleShape shape() const = 0;
  // Classification: the number of classes; otherwise K, the targets per sample.
  virtual int classes() const = 0;
  // What a sample's target is (util/task_kind.hpp): which of Batch's labels / targets is filled.
  virtual TaskKind task() const { return TaskKind::classification; }
  virtual int64_t samples() const = 0;          // samples in the split
  virtual int64_t steps_per_epoch() const = 0;  // global batches per epoch
  // Positions the source so that the next batch is (epoch, step_in_epoch). Used at
  // start and on resume; cheap to call once.
  virtual void seek(int epoch, int64_t step_in_epoch) = 0;
  // Fills `out` with the next batch (blocking until it is ready; swaps buffers, so
  // `out`'s old storage is reused). Rolls over to the next epoch after the last step.
  virtual void next(Batch& out) = 0;
  // Seconds the caller spent blocked inside next() since the last call (then reset).
  virtual double take_wait_seconds() = 0;
  // Installs (or, empty, removes) the hook above. Any time: it waits for a hook call in
  // progress to finish, and the batches already made ahead are made again (with the new
  // hook) without changing the order, so that after it returns the old hook is never
  // called again (remove it before what it calls goes away).
  virtual void set_batch_hook(BatchHook hook) = 0;
  // The stage times since the last call (then reset); zeros where a source keeps none.
  virtual ReaderStageTimes take_stage_times() { return {}; }
};

// Evaluation over a split: every sample exactly once across ranks, no padding, no
// duplicates. Rank r takes a contiguous, nearly equal share; the last batch of a
// rank may be short; ranks may have different numbers of batches (evaluation does
// no per-batch collective).
class EvalSource {
 public:
  virtual ~EvalSource() = default;
  virtual int64_t samples() const = 0;        // whole split
  virtual int64_t local_samples() const = 0;  // this rank's share
  virtual void rewind() = 0;
  // Next batch of at most max_batch of this rank's share; false at the end.
  virtual bool next(Batch& out, int64_t max_batch) = 0;
};

}  // namespace cnnscale
