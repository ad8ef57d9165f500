// mpi_communicator.hpp — Communicator over MPI on host buffers. Uses its own
// duplicate of the given communicator so its traffic never mixes with other MPI
// calls. bfloat16 sums use a user-defined MPI_Op (fp32 accumulate, round to nearest).
// MPI counts are int: buffers of more than INT_MAX elements (broadcasts: bytes) are
// sent in pieces of at most `max_piece` (a 785 M-parameter model's 3.1 GB broadcast is
// two calls), so any size a rank can hold works.
//
// Progress: MPI's non-blocking collectives advance only inside MPI calls, and the
// longest stretch of backward (mnist_cnn's conv2: two oneDNN calls of ~10 ms each) makes
// none. With MPI_THREAD_MULTIPLE and more than one rank, a helper thread therefore
// drives MPI's progress engine every progress_us microseconds, at most progress_polls
// times after each wake_progress() (every allreduce_sum_async calls it; so does the
// node-shared reducer after launching its slices between nodes): it tests the sums
// this communicator started (MPI_Request_get_status: progresses, frees nothing) and
// records when each completed (PendingReduce::times, run.json comm_ms), or calls
// MPI_Iprobe when it started none. CNNSCALE_PROGRESS_POLLS=0: poll each sum until it
// completes, however long. It sleeps on a condition variable otherwise and starts at
// the first wake, so a run whose buckets never touch MPI has none.
// Measured on the local 2-node Slurm cluster (one rank per node, TCP, mnist_cnn batch
// 32, 150 steps, 3 interleaved runs each; docs/performance.md "Across nodes"): polling
// until the wait cut median exposed communication from 1.7-4.4 to 0.3-1.7 ms at equal
// compute (load ~2), but polling until complete vs 8 polls, A/B at load 2.6-3.1, gave
// exposed 1.1-9.7 vs 4.2-6.7 ms and a slower median step (43.8-46.7 vs 35.5-53.7 ms):
// not a clear win on 2 shared cores, so 8 stays the default and 0 is opt-in.
// A caller about to block in an MPI wait calls rest_progress() (the wait progresses
// by itself); MpiPendingReduce::wait() does.
// CNNSCALE_PROGRESS_US (default 500; 0 = no thread: progress only from progress()) and
// CNNSCALE_PROGRESS_POLLS (default 8; 0 = until complete). Results never depend on them.
#pragma once
#include <mpi.h>

#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"

namespace cnnscale {

class MpiCommunicator final : public Communicator {
 public:
  // max_piece: elements per MPI call (at most INT_MAX; tests lower it to exercise the split).
  explicit MpiCommunicator(MPI_Comm parent, size_t max_piece = INT_MAX);
  ~MpiCommunicator() override;
  Backend backend() const override { return Backend::mpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool device_buffers() const override { return false; }
  void allreduce_sum(void* buf, size_t count, DType t) override;
  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  void progress() override;
  MPI_Comm comm() const { return comm_; }

  // Non-blocking MPI work was just started: give the progress thread its polls.
  void wake_progress();
  // The caller is about to block in an MPI wait: the thread may rest.
  void rest_progress();
  // Microseconds between the progress thread's calls (0: no thread in this process).
  int progress_us() const { return progress_us_; }

 private:
  friend class MpiPendingReduce;
  struct Flight;  // one allreduce_sum_async: its requests, start and completion times
  void progress_loop();
  // Called with mu_ held (lk); tests the flights without it; true if any is incomplete.
  bool poll_flights(std::unique_lock<std::mutex>& lk);
  MPI_Comm comm_ = MPI_COMM_NULL;
  size_t max_piece_;
  int rank_ = 0, size_ = 1;
  std::vector<std::shared_ptr<Flight>> in_flight_;  // not yet waited for; guarded by mu_
  // Progress thread (see above).
  int progress_us_ = 0, progress_polls_ = 8;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  int polls_left_ = 0;
};

// The MPI datatype and sum operation for t.
MPI_Datatype mpi_type(DType t);
MPI_Op mpi_sum_op(DType t);

}  // namespace cnnscale
