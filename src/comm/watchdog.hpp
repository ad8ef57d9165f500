// watchdog.hpp — no silent hangs: a background thread per rank that notices when the
// training thread has been blocked in a collective for longer than the timeout, and
// names the rank that went silent.
//
// Every rank's thread sends a heartbeat (its current step) to rank 0 every interval
// on a private communicator; rank 0's thread sends one back to everyone. When a rank
// has waited in a collective for `timeout` seconds:
//   - rank 0 names the ranks it has not heard from for half the timeout (stopped,
//     killed, node lost), or, if all are alive, the ranks whose step lags (stuck
//     outside communication: I/O, compute, a deadlock);
//   - another rank defers to rank 0 while rank 0's heartbeats arrive, and names rank 0
//     if they stopped;
// then prints "cnnscale: error: ..." and ends the job with MPI_Abort (status 3).
// Needs MPI_THREAD_MULTIPLE; without it, Watchdog::start() returns false.
//
// unanswered(): rank 0 asks every rank's watchdog thread for a beat at once (a poke,
// answered within a poll tick of 50 ms whatever the training thread does) and names
// those that did not answer: how rank 0's end record (train/run_end.hpp) tells "rank 3
// died" from "every rank got the stop signal" in the second mpiexec leaves between
// its SIGTERM and its SIGKILL. Heartbeats still go out every interval.
//
// start_local(): ranks that met through a rendezvous store (torchrun-style variables,
// TF_CONFIG; MPI is a singleton there) have no MPI channel to the others. The thread
// then only watches this rank's own waits (the NCCL waits the control plane's Gloo
// timeout does not cover): past the timeout it prints the same head, says that no
// heartbeat can name the culprit, and ends this process (status 3); the peers' own
// watchdogs or Gloo's timeouts end theirs.
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cnnscale {

class Watchdog {
 public:
  Watchdog() = default;
  ~Watchdog();
  // Collective over world. Returns false (and does nothing) when the MPI thread level
  // is below MPI_THREAD_MULTIPLE or the world has one rank.
  bool start(MPI_Comm world, double timeout_s, const std::string& host);
  // This rank only, no messages (see above). False when timeout_s <= 0.
  bool start_local(int rank, double timeout_s, const std::string& host);
  void stop();  // collective; also done by the destructor
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }

  // Marks the training thread as blocked in a collective (RAII).
  // Scopes nest: an inner wait (a --sync-bn sum inside a device model's step) is watched
  // on its own, then the outer one is watched again, its clock restarted (the inner wait
  // was its own; restarting never fires early).
  class Scope {
   public:
    Scope(Watchdog& w, const char* what)
        : w_(w), outer_(w.what_.load()), had_outer_(w.entered_at_.load() >= 0) {
      w_.enter(what);
    }
    ~Scope() {
      if (had_outer_) w_.enter(outer_);
      else w_.leave();
    }

   private:
    Watchdog& w_;
    const char* outer_;
    bool had_outer_;
  };

  void enter(const char* what);
  void leave();

  // What the training thread waits in now ("" when it waits in no collective, or the
  // watchdog is off). Any thread.
  std::string waiting_in() const;
  // Rank 0 of a started (not local) watchdog, any thread: pokes every rank, waits
  // wait_s, and returns the ranks that did not answer, as "rank R on HOST". False (and
  // *silent untouched) where no heartbeat channel exists (another rank, start_local,
  // not started).
  bool unanswered(double wait_s, std::vector<std::string>* silent);

 private:
  void configure(double timeout_s, bool local);  // what both starts set
  void run();
  [[noreturn]] void fire(double waited);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool local_ = false;  // start_local: no heartbeats, no communicator
  double timeout_ = 300, interval_ = 1;
  std::vector<std::string> hosts_;
  std::vector<double> last_heard_;      // rank 0: per rank; others: [0] = rank 0
  std::vector<int64_t> last_step_;
  std::atomic<int64_t> step_{0};
  std::atomic<double> entered_at_{-1};  // steady-clock seconds when the current wait began, -1 = not waiting
  std::atomic<const char*> what_{""};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> poke_requested_{false};
  std::atomic<double> poke_sent_at_{-1};  // steady-clock seconds of the last poke
  std::mutex heard_mutex_;
  int64_t out_beat_[2] = {0, 0}, out_poke_[2] = {0, 0}, out_answer_[2] = {0, 0};  // Isend buffers                // last_heard_ between the thread and unanswered()
  std::thread thread_;
};

}  // namespace cnnscale
