// grad_sync.hpp — DDP-style gradient averaging in buckets, overlapped with backward.
//
// The gradient buffer is split into contiguous buckets (the model lays gradients out
// last-layer-first, so they become final front to back). The first bucket is capped
// at first_bucket_bytes (PyTorch DDP's 1 MB), the rest at bucket_bytes (--bucket-mb).
// During backward, on_ready(ready_end) starts a non-blocking sum for every bucket
// that is now complete; finish() starts what is left and waits for all. With the
// model's loss_scale = 1/global_batch the sum is the global-batch mean gradient.
// A world of one rank does nothing.
//
// Progress: MPI's non-blocking collectives advance only inside MPI calls, and the
// longest stretch of backward (mnist_cnn's conv2: two oneDNN calls of ~10 ms each) makes
// none. With an MPI communicator and MPI_THREAD_MULTIPLE, a helper thread therefore
// calls MPI_Iprobe (which runs MPI's progress engine and touches no request) every
// progress_us microseconds, at most progress_polls times after each bucket launch, and
// sleeps on a condition variable otherwise. Unbounded polling until finish() cost ~2 ms
// per mnist_cnn step on a core shared with the compute; 8 polls are time-neutral in
// training and still hide a 4.8 MB bucket behind 20 ms of MPI-free compute
// (bench/overlap_bench: 1.7-9 ms exposed without the thread, 0.002 ms with it).
// CNNSCALE_PROGRESS_US (default 500; 0 = no thread: progress only from the grad-ready
// hook) and CNNSCALE_PROGRESS_POLLS (default 8). Results never depend on them.
//
// Node-shared memory: given a ShmAllreduce whose buffer IS the gradient buffer (the
// model adopted it), buckets are summed through it instead (the ranks of a node read
// each other's gradients directly; MPI only across nodes) and no thread is needed.
// make_shm_allreduce() decides; CNNSCALE_SHM_ALLREDUCE=0 turns it off.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/shm_allreduce.hpp"

namespace cnnscale {

struct Bucket {
  size_t begin = 0, end = 0;  // flat gradient offsets
};

// Splits [0, total) at parameter boundaries (param_ends: sorted ends of each
// parameter's flat range) into buckets of at most the caps (a single parameter larger
// than a cap gets a bucket of its own).
std::vector<Bucket> plan_buckets(const std::vector<size_t>& param_ends, size_t first_bucket_bytes,
                                 size_t bucket_bytes);

// A ShmAllreduce over a gradient buffer of `count` floats with these buckets as its
// segments, when the world has more than one rank, the communicator is MPI on host
// buffers, every node runs the same number (> 1) of ranks and CNNSCALE_SHM_ALLREDUCE is
// not 0; otherwise nullptr and *why says which of these failed. Collective.
std::unique_ptr<ShmAllreduce> make_shm_allreduce(Communicator& comm, size_t count, const std::vector<Bucket>& buckets,
                                                 std::string* why);

class GradSync {
 public:
  // shm: optional, and then grads must be shm->buffer().
  GradSync(Communicator& comm, float* grads, std::vector<Bucket> buckets, DType wire = DType::f32,
           ShmAllreduce* shm = nullptr);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;
  // Starts every complete, not yet started bucket with end <= ready_end.
  void on_ready(size_t ready_end);
  // Starts the remaining buckets and waits for all; returns seconds spent waiting.
  double finish();
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The allreduce payload per step (the whole gradient), also at one rank where it
  // is not sent: the report's communication model scales it by the rank count.
  size_t bytes_per_step() const;
  // Microseconds between progress calls of the helper thread (0: no thread).
  int progress_us() const { return progress_us_; }
  // "node shared memory + MPI" or "MPI": how buckets are summed.
  std::string method() const;

 private:
  Communicator& comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  DType wire_;
  ShmAllreduce* shm_;
  size_t next_ = 0;
  std::vector<std::unique_ptr<PendingReduce>> pending_;
  // Progress thread (see above).
  void progress_loop();
  void wake_progress();  // a bucket was launched: give it progress_polls_ polls
  int progress_us_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  int progress_polls_ = 8, polls_left_ = 0;
};

}  // namespace cnnscale
