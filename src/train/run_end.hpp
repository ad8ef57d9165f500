// run_end.hpp — a run that ends before its last step says how (issue 28 item 3): rank 0
// writes "ended" into run.json and appends {"event": "end"} to metrics.jsonl, so that
// `cnnscale watch` and `cnnscale report` tell a stopped or killed run from a running one
// and from one that never started (they used to find no run.json and wait, or say "no
// run.json: the run may have failed or still be running").
//
// How each end is recorded (rank 0, with --run-dir; docs/checkpoints.md "How a run ended"):
//  - finished: the summary, "ended": "finished";
//  - a stop signal at a step boundary (every rank agreed; checkpointed): the summary with
//    timings over the steps run, "ended": "signal SIGTERM at step N";
//  - an error after training began (an exception reaching Trainer::run on rank 0: a peer's
//    closed connection under Gloo, --on-nan stop, a failed write) and the fatal paths that
//    end the process (util/error.hpp's last words: a failed CUDA/NCCL/MPI call, the
//    --collective-timeout watchdog naming a silent rank): "failed after step N: <message>";
//  - a stop signal while the training thread is stuck in a wait, as when a rank died and
//    its launcher ends the job (mpiexec sends the others SIGTERM 1 s after the death and
//    SIGKILL 1 s later, measured with Open MPI 4.1): a thread here waits kBoundaryGrace for
//    the step boundary, then asks the watchdog which ranks still answer
//    (Watchdog::unanswered) and writes "rank 3 on HOST died or hung: …" or "signal SIGTERM
//    after step N: …"; the boundary's record replaces it if the step ends after all;
//  - SIGKILL of rank 0 (or of the whole job): nothing can be written; run.lock (free again)
//    and metrics.jsonl's last step tell watch and report (report/watch.hpp).
// A record without timings (the last three) carries what rank 0 knows alone: the run's
// shape, identity and position (base()), "steps" = the steps completed, "finished": false.
// run.json is replaced only while it holds no finished run's summary: a finished run that
// was continued (--max-steps raised) and then stopped keeps that summary, and its
// metrics.jsonl end line says how the continuation ended. Files are written whole
// (util/atomic_file.hpp); writes from the two threads are serialised here.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "train/run_files.hpp"

namespace cnnscale {

// True for a run.json that records a finished run (an "ended" of "finished", or none:
// files written before "ended" existed were written only by finished runs).
bool run_json_finished(const nlohmann::json& run_json);

class RunEnd {
 public:
  static constexpr double kBoundaryGrace = 0.15;  // s after a stop signal before the stuck-wait record
  static constexpr double kPokeWait = 0.3;       // s the ranks' watchdogs have to answer (50 ms ticks)

  RunEnd() = default;  // inert until open()
  ~RunEnd();           // stops the signal thread
  RunEnd(const RunEnd&) = delete;
  RunEnd& operator=(const RunEnd&) = delete;

  // Rank 0 with a run directory. previous_finished: run.json held a finished summary at
  // start. merge: a record into the whole run's summary (RunDir::summarize). base: the
  // fields a record without timings carries (shape, identity, position at start).
  void open(const std::string& dir, bool previous_finished, MetricsLog* metrics,
            std::function<nlohmann::json(nlohmann::json)> merge, nlohmann::json base);
  bool enabled() const { return !dir_.empty(); }

  // The position after each step (cheap; the main thread).
  void set_progress(int64_t steps_done, double last_loss, double wall_s);

  // Starts the thread that records a stop signal arriving while the training thread is
  // stuck. waiting_in: what it waits in; unanswered: Watchdog::unanswered (ControlComm).
  void watch_signals(std::function<std::string()> waiting_in,
                     std::function<bool(double, std::vector<std::string>*)> unanswered);

  // Records the end. summary: the trainer's full record (run_record), or null for one
  // without timings (built from base()). final: the run's last word; a later non-final
  // write does nothing. Thread-safe; never throws (a failed write is a warning).
  void write(const std::string& ended, nlohmann::json summary, bool final);
  // The steps completed, as last set.
  int64_t steps_done() const { return steps_done_.load(); }

 private:
  void watch_loop();
  void stuck_record(int sig);

  std::string dir_;
  bool previous_finished_ = false;
  MetricsLog* metrics_ = nullptr;
  std::function<nlohmann::json(nlohmann::json)> merge_;
  std::function<std::string()> waiting_in_;
  std::function<bool(double, std::vector<std::string>*)> unanswered_;
  std::mutex mutex_;  // base_, loss_, wall_, the writes
  nlohmann::json base_;
  double loss_ = 0, wall_ = 0;
  std::atomic<int64_t> steps_done_{0};
  std::atomic<bool> final_{false}, stopping_{false};
  std::thread thread_;
};

}  // namespace cnnscale
