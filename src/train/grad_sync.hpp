// grad_sync.hpp — DDP-style gradient averaging in buckets, overlapped with backward.
//
// The gradient buffer is split into contiguous buckets (the model lays gradients out
// last-layer-first, so they become final front to back). The first bucket is capped
// at first_bucket_bytes (PyTorch DDP's 1 MB), the rest at bucket_bytes (--bucket-mb).
// During backward, on_ready(ready_end) hands every bucket that is now complete to the
// BucketReducer (comm/bucket_reducer.hpp: non-blocking allreduces of the communicator,
// or sums in node-shared memory); finish() hands over what is left and waits for all.
// With the model's loss_scale = 1/global_batch the sum is the global-batch mean
// gradient. A world of one rank does nothing.
//
// How the sums make progress while backward computes (MPI's progress thread) is the
// transport's business: see comm/mpi_communicator.hpp.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/bucket_reducer.hpp"
#include "comm/communicator.hpp"

namespace cnnscale {

// Splits [0, total) at parameter boundaries (param_ends: sorted ends of each
// parameter's flat range) into buckets of at most the caps (a single parameter larger
// than a cap gets a bucket of its own).
std::vector<Bucket> plan_buckets(const std::vector<size_t>& param_ends, size_t first_bucket_bytes,
                                 size_t bucket_bytes);

class GradSync {
 public:
  // Sums through `reducer`, which was built for these buckets (null: one rank, nothing
  // to sum).
  GradSync(std::vector<Bucket> buckets, std::unique_ptr<BucketReducer> reducer);
  // Non-blocking allreduces of `comm` on grads (make_allreduce_reducer) when it has
  // more than one rank.
  GradSync(Communicator& comm, float* grads, std::vector<Bucket> buckets);
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;
  // Starts every complete, not yet started bucket with end <= ready_end.
  void on_ready(size_t ready_end);
  // Starts the remaining buckets and waits for all; returns seconds spent waiting (the
  // exposed communication).
  double finish();
  // True when the sums run on the communicator's device queue (BucketReducer::
  // device_ordered: NCCL), so that end_round() need not wait. False with one rank.
  bool device_ordered() const { return reducer_ && reducer_->device_ordered(); }
  // Starts the remaining buckets and ends the round. device_ordered(): returns at once
  // (0), the sums in flight: the reader of the gradients (a device model's queue) must
  // wait for Communicator::stream() on the device (Model::wait_for) before it reads
  // them, and complete() checks them on the host later. Otherwise as finish().
  double end_round();
  // Waits for the round end_round() left in flight (no-op when none: at once when the
  // device has passed it) and makes it the one last_spans() / last_comm_seconds() tell
  // of; returns seconds waited.
  double complete();
  // After finish() (or complete()): the round's communication time, first bucket's start to the last
  // sum's completion (BucketReducer::last_comm_seconds; negative: unknown or one rank).
  // What of it is not in finish()'s wait was hidden behind backward.
  double last_comm_seconds() const { return reducer_ ? reducer_->last_comm_seconds() : -1; }
  // After finish(): each bucket's sum in that round (BucketReducer::last_spans; empty
  // with one rank).
  const std::vector<BucketSpan>& last_spans() const { return reducer_ ? reducer_->last_spans() : no_spans_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The allreduce payload per step (the whole gradient), also at one rank where it
  // is not sent: the report's communication model scales it by the rank count.
  size_t bytes_per_step() const;
  // How buckets are summed: "none (one rank)" or the reducer's method().
  std::string method() const;

 private:
  // finish() and end_round(): start what is left, then `end` (seconds it took).
  double close_round(void (BucketReducer::*end)());
  std::vector<Bucket> buckets_;
  std::unique_ptr<BucketReducer> reducer_;
  size_t next_ = 0;
  std::vector<BucketSpan> no_spans_;
};

}  // namespace cnnscale
