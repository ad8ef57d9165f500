// trainer.hpp — Trainer: one data-parallel training run on every rank of a world that
// the caller has started (start_world, comm/world.hpp: the CLI, or a test). It gets the
// process context, the data plane (gradients and parameter broadcasts: MPI or NCCL)
// and the control plane (small agreements between ranks, under the watchdog), and
// never touches MPI itself.
//
//   Trainer t(options, world);
//   t.setup();                   // run directory (lock), data, model (rank 0's parameters
//                                // everywhere), gradient buckets, optimizer, schedule;
//                                // starts the watchdog
//   t.resume();                  // the run directory's identity; from a checkpoint, when
//                                // --resume asks and one exists
//   while (!t.done())
//     if (t.step().stopped) ...  // a stop signal: checkpointed, exit kExitCheckpointedOnSignal
//   t.summarize();               // timings over ranks, the summary line, run.json
//
// run() does exactly that and returns the exit status. Every method is collective.
// step() is, per step:
//   data (wait for the prefetched slice of the global batch)
//   compute (forward + backward; bucket sums start from the grad-ready hook)
//   the step agreement (one small allreduce: a stop signal, a non-finite loss on any rank),
//     right after forward_backward, so that it overlaps a device model's backward; its time
//     is counted in optimizer
//   comm_exposed (wait for the buckets still in flight; with --sync-bn also the waits in
//     the batch-norm statistics sums during forward and backward, which are taken out of
//     compute and also reported alone as bn_sync)
//   optimizer (update the flat parameters; then, without --sync-bn, rank 0's batch-norm
//     running statistics to every rank in one broadcast)
// then, when due: the progress line (one allreduce of the loss), test-split evaluation
// at epoch ends, a checkpoint.
// A device model (GPU, NCCL) runs the same step without a host wait between one step's
// loss and the next's: the gradient round ends without waiting (GradSync::end_round), the
// model's queue waits for NCCL's on the device (Model::wait_for), the optimizer is only
// enqueued, and the round is checked on the host after the next step's loss wait
// (GradSync::complete). Its compute / comm_exposed / optimizer are device times
// (Model::mark), read a step later. Steps that read host state (progress line, epoch end,
// evaluation, checkpoint, --check-replicas, stop, the last step) drain() first
// (docs/gpu.md "API for the trainer").
#pragma once
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/control_comm.hpp"
#include "comm/world.hpp"
#include "data/batch_source.hpp"
#include "launch/bootstrap.hpp"
#include "nn/model.hpp"
#include "train/grad_sync.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"
#include "train/run_dir.hpp"
#include "train/run_end.hpp"
#include "train/run_files.hpp"
#include "train/step_stats.hpp"
#include "train/timeline.hpp"
#include "train/train_options.hpp"

namespace cnnscale {

class TensorBoardWriter;  // train/tensorboard.hpp

// What one step() did.
struct StepResult {
  int64_t step = 0;      // its number (1-based): the steps completed after it
  double loss = 0;       // this rank's mean training loss over its samples of the step
  bool skipped = false;  // the loss was not finite on some rank: no update (--on-nan skip-step)
  bool stopped = false;  // a rank got a stop signal: checkpointed (with --run-dir); the run ends here
};

class Trainer {
 public:
  // comm and control must outlive the Trainer. Throws UserError for invalid options.
  Trainer(TrainOptions opt, const ProcessContext& ctx, Communicator& comm, ControlComm& control);
  Trainer(TrainOptions opt, World& world);
  // Destroyed while an exception unwinds (an error on this rank, maybe on no other):
  // aborts the data plane first (Communicator::abort: NCCL's ncclCommAbort), so that
  // neither the sums still in flight nor the communicator's teardown wait for ranks that
  // are still training; the error then reaches main(), which prints it and ends the job
  // in seconds (MPI_Abort) instead of at the peers' --collective-timeout.
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void setup();
  // Checks that the run directory holds a run of this configuration (run_dir.hpp), then
  // restores model, optimizer and position from a checkpoint when --resume asks for one
  // and (with auto) one exists; true when it did. After setup(), before the first step.
  // When the run is already complete, done() is true from here on and run() returns 0
  // leaving the run directory as it is.
  bool resume();
  StepResult step();
  bool done() const { return nothing_to_train_ || next_step_ >= total_steps_; }
  // After the last step: the replica-check and summary lines, run.json (with --run-dir).
  // ended: "finished", or how the run stopped early at a boundary every rank agreed on
  // ("signal SIGTERM at step N": timings over the steps run, train/run_end.hpp).
  void summarize(const std::string& ended = "finished");
  // setup, resume, steps, summarize. Returns 0, or kExitCheckpointedOnSignal.
  int run();

  // For tests and tools.
  Model& model() { return *model_; }
  int64_t steps_done() const { return next_step_; }
  int64_t total_steps() const { return total_steps_; }
  // Collective: true when every rank's parameters hash the same.
  bool replicas_identical();

 private:
  struct EvalResult {
    double accuracy = 0, loss = 0;  // accuracy: classification and multi-label only
    Metrics metrics;                // the task's numbers (Task::eval_metrics), loss last
    int64_t samples = 0;
  };
  bool restore_checkpoint();  // resume()'s checkpoint part
  void prepare_model();       // setup()'s model->prepare, rank 0's convolution algorithms on every rank
  void begin();  // before the first step: metrics file, banner, data position, clocks
  void open_tensorboard();  // begin()'s TensorBoard part (collective: rank 0 writes)
  std::string options_markdown() const;  // the run's options, for TensorBoard's text plugin
  void log_progress(int64_t step, double lr, const StepTimes& t);
  EvalResult evaluate();
  void evaluate_epoch(int64_t step);
  void save_checkpoint(int64_t steps_done);
  void broadcast_buffers();  // batch-norm running statistics follow rank 0 (not with --sync-bn)
  // The host waits until the device has done all the step's work: a device-ordered
  // gradient round is completed (its sums checked, under the watchdog), the
  // communicator's and the model's queues drained. No-op for a host model and transport.
  void drain();
  // A device model's timing columns of the step whose marks are unread (Model::mark):
  // patched into its StepTimes (times_, or *current when it is not pushed yet) once the
  // device has passed them; otherwise nothing (host models: their host clocks stand).
  void read_marks(StepTimes* current);
  struct UnreadMarks {
    size_t index = 0;  // into times_
    int set = -1;      // Model::mark set; -1: none unread
  };
  UnreadMarks marks_unread_;
  struct Timings;  // the summary's timings over ranks
  nlohmann::json run_shape() const;  // run.json's fields that need no timings
  nlohmann::json run_record(const Timings& t, int64_t steps_run) const;  // run_shape() + the timings
  void open_run_end();  // begin()'s end record (rank 0 with --run-dir)

  // What the run was given.
  const TrainOptions opt_;
  const ProcessContext& ctx_;
  Communicator& comm_;
  ControlComm& control_;
  const int rank_, world_;
  const int64_t global_batch_;

  // Built by setup().
  std::unique_ptr<RunDir> run_dir_;   // holds the run directory's lock while the Trainer lives
  RunConfig config_;                  // the run's identity (digest_ is its digest)
  std::unique_ptr<BatchSource> train_;
  std::unique_ptr<EvalSource> eval_;  // null: no evaluation
  std::unique_ptr<Model> model_;
  // What the model's outputs are trained to be: the data's task, --loss and its options
  // (nn/task.hpp); also the model's (ModelOptions::task).
  std::shared_ptr<const Task> task_;
  bool has_buffers_ = false;          // non-trainable ranges (batch-norm statistics)
  // The non-trainable flat ranges [begin, end), adjacent ones merged (one per batch-norm
  // layer: its running_mean, running_var, num_batches_tracked are neighbours in the
  // reverse-registration layout).
  std::vector<std::pair<size_t, size_t>> buffer_ranges_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradSync> sync_;
  std::string no_shm_;                // why gradients are not summed in node-shared memory
  int64_t steps_per_epoch_ = 1, total_steps_ = 0;
  int epochs_planned_ = 1;
  std::string ckpt_dir_, digest_;

  // Position: set by resume(), advanced by step().
  int64_t first_step_ = 0, next_step_ = 0;
  int start_epoch_ = 0;
  int64_t start_in_epoch_ = 0;
  std::string resumed_from_;          // checkpoint path, empty when not resumed
  bool nothing_to_train_ = false;     // the run directory's run is already complete

  // The loop's state.
  bool begun_ = false;
  MetricsLog metrics_;
  RunEnd run_end_;  // how the run ended, even early (rank 0 with --run-dir; after metrics_: it writes there)
  std::unique_ptr<TensorBoardWriter> tb_;  // rank 0 with a TensorBoard directory, else null
  Batch batch_, eval_batch_;
  std::vector<float> logits_, host_scratch_;
  std::vector<double> eval_sums_;  // evaluate(): the task's sums
  double bn_sync_s_ = 0;              // this step's wait in --sync-bn statistics sums
  StepContext sctx_;
  std::vector<StepTimes> times_;
  double loss_since_log_ = 0;
  double data_since_log_ = 0, step_since_log_ = 0;  // this rank's input waits and step times since the last line
  double samples_since_log_ = 0;  // Σ of the steps' loss denominators (Task::denominator): samples, or weights
  double count_since_log_ = 0;    // samples this rank trained since the last line (the line's samples/s)
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json accuracy_curve_ = nlohmann::json::array();
  EvalResult last_eval_;
  bool evaluated_ = false;
  int64_t skipped_steps_ = 0, replica_checks_ = 0;
  std::unique_ptr<Timeline> timeline_;  // --timeline: null when off or written
  std::string timeline_written_;        // the file's absolute path once written (run.json "timeline")
  void write_timeline();                // collective
  double slowest_step_s_ = 0;           // the slowest rank's previous step time (StepFlags)
  bool bar_drawn_ = false;              // rank 0's progress bar on a terminal (util/log.hpp)
  std::chrono::steady_clock::time_point bar_clock_;
  void draw_progress_bar(bool force);
  std::chrono::steady_clock::time_point start_, log_clock_;

  // std::uncaught_exceptions() when built: more at destruction means unwinding.
  const int uncaught_at_birth_;
  // CNNSCALE_INJECT_ERROR=RANK:STEP (a test hook, docs/gpu.md "Errors"): rank RANK throws a
  // UserError during backward of step STEP (1-based), after its first gradient buckets
  // have started and before the rest have, as a bad label or a failed read on one rank
  // would. -1: off (any other rank, or unset).
  int64_t inject_error_step_ = -1;
  // CNNSCALE_INJECT_DELAY_MS=MS or RANK:MS (a test hook, tests/train/overlap_stress*.sh):
  // the rank (every rank for MS alone) sleeps MS ms in each gradient-ready callback after
  // handing the ready range to the buckets, so backward runs late while sums are in
  // flight. Results must not change (docs/gpu.md "Tests"). 0: off.
  long inject_delay_ms_ = 0;
  // CNNSCALE_INJECT_NAN_UPDATE=[RANK:]STEP:PARAM (a test hook, tests/train/nan_weights*.sh):
  // every rank (or rank RANK alone) writes a NaN into the first element of parameter PARAM's summed gradient after
  // step STEP's agreement, so that step's update writes a NaN parameter, as a diverging
  // update would (a device model: into the parameter after the update, through a host
  // copy; its optimiser does not check). -1: off.
  int64_t inject_nan_update_step_ = -1;
  std::string inject_nan_update_param_;
  // The last update wrote a NaN or Inf (Optimizer::wrote_finite): told to every rank by
  // the next step agreement, or at once where the step's results are read (check_update).
  bool update_non_finite_ = false;
  void check_update(int64_t steps_done, bool agreed);
  // --on-nan skip-step on a host model: the batch-norm statistics before this step's forward.
  std::vector<float> saved_buffers_;
  void skip_leaves_finite_state(int64_t step_1based);
};

}  // namespace cnnscale
