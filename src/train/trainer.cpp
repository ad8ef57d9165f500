// trainer.cpp — see trainer.hpp.
#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include "comm/bucket_reducer.hpp"
#include "data/open_source.hpp"
#include "train/checkpoint.hpp"
#include "train/progress.hpp"
#include "train/tensorboard.hpp"
#include "util/atomic_file.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/memory.hpp"
#include "util/stop_signal.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// 64-bit FNV-1a over the parameter bytes.
uint64_t hash_params(const float* p, size_t n) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

// What rank 0 found in a checkpoint, broadcast to every rank (trivially copyable).
struct ResumePosition {
  int64_t found = 0;
  int64_t step = 0, epoch = 0, step_in_epoch = 0, world_size = 0, global_batch = 0, optimizer_steps = 0;
};

// The flags every rank contributes after each step (the maximum over ranks counts).
struct StepFlags {
  int stop_signal = 0;  // a stop signal arrived (SIGUSR1/SIGTERM)
  int non_finite = 0;   // the loss is not finite
  int bad_update = 0;   // the previous step's update wrote a NaN or Inf (Optimizer::wrote_finite)
  // This rank's previous step time in microseconds: the maximum is the slowest rank's,
  // for the progress line and bar at no extra message (12 bytes instead of 8).
  int prev_step_us = 0;
};

// The device-clock marks of a step (Model::mark), in the order the model's queue passes
// them: compute is start..backward, exposed communication backward..summed (the queue
// waiting for the gradient sums), optimizer summed..end (update and buffer broadcast).
enum StepMark { kMarkStart, kMarkBackward, kMarkSummed, kMarkEnd };
static_assert(kMarkEnd < Model::kMarkPoints, "Model::kMarkPoints too small for a step's marks");

// Sums for the progress line.
struct LossSums {
  double loss = 0, samples = 0;   // Σ loss terms and Σ their denominators (the mean's)
  double data_s = 0, step_s = 0;  // the interval's waits for input and step times, summed over ranks
  double count = 0;               // samples trained (throughput: a denominator counts pixels or weights)
};

// The loop waited for input more than this share of its step time: the run is input-bound
// and the progress lines, the summary and run.json say so (issue 27 item 6; `cnnscale
// report` uses the same 5 %, report/analysis.hpp input_bound_note).
constexpr double kInputBoundShare = 0.05;

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", v);
  return b;
}

// A batch's targets as the task takes them: class labels (classification, and label maps:
// the cross-entropy tasks), else the float values.
Targets batch_targets(const Task& task, const Batch& b) {
  return task.loss() == LossKind::cross_entropy ? Targets(b.labels.data()) : Targets::of_values(b.targets.data());
}

// The parts of a step, in seconds (sums or medians over steps).
struct StepParts {
  double data = 0, compute = 0, comm_exposed = 0, optimizer = 0, bn_sync = 0;
  double comm_total = 0;  // not a part of the step: comm_exposed is the part of it not hidden
};
struct StepPartSums {
  StepParts parts;
  double steps = 0;
};

}  // namespace

// The timings summarize() reports (over ranks).
struct Trainer::Timings {
  std::vector<double> worst_step_s;             // per timed step, the slowest rank's step time
  Spread step, images_per_s;                    // over timed steps
  StepParts mean;                               // per step, averaged over ranks and timed steps
  StepParts median_max;                         // each rank's median, then the largest over ranks
  std::vector<double> compute_median_per_rank;  // rank 0 only
  double wall_s = 0;
  // A device model's paths (rank 0's) and memory (each field the largest over ranks): run.json's "gpu".
  std::optional<DevicePaths> gpu;
  // The loop's mean input wait over the mean step (> kInputBoundShare: input-bound).
  double data_share() const { return step.mean > 0 ? mean.data / step.mean : 0; }
};

Trainer::Trainer(TrainOptions opt, const ProcessContext& ctx, Communicator& comm, ControlComm& control)
    : opt_(std::move(opt)),
      ctx_(ctx),
      comm_(comm),
      control_(control),
      rank_(ctx.rank),
      world_(ctx.size),
      global_batch_(opt_.batch_size * ctx.size),
      uncaught_at_birth_(std::uncaught_exceptions()) {
  validate(opt_);
  if (auto v = process_env()("CNNSCALE_INJECT_ERROR")) {
    const size_t colon = v->find(':');
    if (colon == std::string::npos)
      fail("CNNSCALE_INJECT_ERROR=", *v, " is not RANK:STEP (a test hook; unset it to train normally)");
    const long r = parse_env_int("CNNSCALE_INJECT_ERROR", v->substr(0, colon));
    const long s = parse_env_int("CNNSCALE_INJECT_ERROR", v->substr(colon + 1));
    if (s < 1) fail("CNNSCALE_INJECT_ERROR=", *v, ": STEP counts from 1");
    if (r == rank_) inject_error_step_ = s - 1;
  }
  if (auto v = process_env()("CNNSCALE_INJECT_DELAY_MS")) {  // MS (every rank) or RANK:MS
    const size_t colon = v->find(':');
    const bool mine =
        colon == std::string::npos || parse_env_int("CNNSCALE_INJECT_DELAY_MS", v->substr(0, colon)) == rank_;
    const long ms = parse_env_int("CNNSCALE_INJECT_DELAY_MS", colon == std::string::npos ? *v : v->substr(colon + 1));
    if (mine && ms > 0) {
      inject_delay_ms_ = ms;
      log_all("CNNSCALE_INJECT_DELAY_MS: sleeping " + std::to_string(ms) +
              " ms in every gradient-ready callback (a test hook; unset it to train normally)");
    }
  }
  if (auto v = process_env()("CNNSCALE_INJECT_NAN_UPDATE")) {  // [RANK:]STEP:PARAM, PARAM checked in setup()
    std::vector<std::string> f;
    for (size_t b = 0, e; b <= v->size(); b = e + 1) {
      e = std::min(v->find(':', b), v->size());
      f.push_back(v->substr(b, e - b));
    }
    if (f.size() != 2 && f.size() != 3)
      fail("CNNSCALE_INJECT_NAN_UPDATE=", *v, " is not [RANK:]STEP:PARAM (a test hook; unset it to train normally)");
    const long s = parse_env_int("CNNSCALE_INJECT_NAN_UPDATE", f[f.size() - 2]);
    if (s < 1) fail("CNNSCALE_INJECT_NAN_UPDATE=", *v, ": STEP counts from 1");
    if (f.size() == 2 || parse_env_int("CNNSCALE_INJECT_NAN_UPDATE", f[0]) == rank_) inject_nan_update_step_ = s - 1;
    inject_nan_update_param_ = f.back();
  }
}

Trainer::Trainer(TrainOptions opt, World& world) : Trainer(std::move(opt), world.ctx, *world.comm, *world.control) {}

Trainer::~Trainer() {
  if (run_end_.enabled()) set_last_words(nullptr);  // it refers to this Trainer
  if (train_) train_->set_batch_hook({});           // its thread stops calling the model before the model goes
  if (std::uncaught_exceptions() > uncaught_at_birth_) comm_.abort();
}

void Trainer::setup() {
  // From here a SIGTERM/SIGUSR1 waits for the next step boundary (cmd_train installs the
  // handlers before start_world already; again here for in-process callers).
  install_stop_signal_handlers();
  if (!control_.start_watchdog(opt_.collective_timeout, ctx_.host, comm_.device_buffers()) && world_ > 1)
    log_warn("the MPI library gives less than MPI_THREAD_MULTIPLE, so the --collective-timeout watchdog is off");
  run_dir_ = std::make_unique<RunDir>(opt_, control_, ctx_.host, ctx_.launch.job_id);  // lock, --resume none rules
  if (!opt_.timeline.empty()) {
    // Rank 0 writes it at the end of the window: a path it cannot take (util/atomic_file.hpp)
    // is refused on every rank before the first step, not warned about after the window.
    // After the run directory, which may be the folder it goes into.
    control_.rank0_check([&] { check_output_file(opt_.timeline, "--timeline"); }, "the --timeline check");
  }

  // ---- data ----
  DataSources sources = open_data(opt_.data_options(), rank_, world_);  // reads dataset.json once
  const std::shared_ptr<const DatasetInfo> dataset = sources.dataset;   // null for synthetic data
  train_ = std::move(sources.train);
  if (opt_.evaluate && !opt_.data.synthetic) eval_ = std::move(sources.eval);

  // ---- model ----
  nn::set_threads(opt_.threads);
  // The GPU model on the rank's device when the communicator works on device buffers
  // (NCCL), else the host (oneDNN) model.
  {
    TaskOptions to = opt_.task;
    if (!opt_.loss_given) to.loss = default_loss(train_->task());
    // Segmentation: a loss term per pixel of the (augmented) sample's H×W.
    const SampleShape in = train_->shape();
    const int64_t pixels = train_->task() == TaskKind::segmentation ? in.plane() : 1;  // H·W (D·H·W)
    task_ = std::make_shared<const Task>(train_->task(), train_->classes(), std::move(to), pixels);
  }
  ModelOptions mo = opt_.model_options;
  mo.task = task_;
  model_ = make_model(opt_.model, train_->shape(), train_->classes(), comm_.device_buffers() ? ctx_.device : -1, mo);
  // The GPU model: the reader thread copies each batch into pinned memory (Model::stage).
  if (model_->on_device())
    train_->set_batch_hook([m = model_.get()](const Batch& b) {
      return m->stage(b.images.data(), b.labels.data(), b.sample_ids.data(), b.count);
    });
  std::vector<size_t> param_ends;
  for (const auto& p : model_->params()) {
    param_ends.push_back(p.offset + p.numel);
    has_buffers_ |= !p.trainable;
    if (!p.trainable && p.numel > 0) buffer_ranges_.emplace_back(p.offset, p.offset + p.numel);
  }
  std::sort(param_ends.begin(), param_ends.end());
  std::sort(buffer_ranges_.begin(), buffer_ranges_.end());
  {
    std::vector<std::pair<size_t, size_t>> merged;
    for (const auto& r : buffer_ranges_) {
      if (!merged.empty() && merged.back().second == r.first) merged.back().second = r.second;
      else merged.push_back(r);
    }
    buffer_ranges_ = std::move(merged);
  }
  if (opt_.sync_bn) {
    // Agreed (the switches are each rank's environment): every rank fails alike, named once.
    if (!control_.allreduce(model_->supports_sync_bn(opt_.precision) ? 1 : 0, ReduceOp::min,
                            "the --sync-bn support agreement"))
      fail_collective(rank_, "--sync-bn: batch norm across ranks runs on the GPU only in cnnscale's own NHWC batch norm "
           "(CNNSCALE_GPU_BN=own, with --precision bf16, or TF32 with CNNSCALE_GPU_NHWC_STORE=1; not yet run on a "
           "GPU: docs/gpu.md), and this run (backend ",
           backend_name(comm_.backend()),
           ") would normalise with cuDNN; set those, drop --sync-bn (each GPU then normalises with its own "
           "batch and the running statistics follow rank 0's, as DDP's default), or train on the CPUs with --device "
           "cpu (and --backend auto, mpi or gloo)");
    // Blocking sums on the control plane: a communicator of their own, so they never
    // interleave with the gradient buckets in flight on the data plane.
    sctx_.sum_across_ranks = [this](double* v, size_t n) {
      const auto t0 = Clock::now();
      control_.sum_in_rank_order(v, n, "the --sync-bn batch-norm statistics sum");
      bn_sync_s_ += seconds_since(t0);
    };
  }
  std::vector<Bucket> buckets = plan_buckets(param_ends, static_cast<size_t>(opt_.first_bucket_mb * 1024 * 1024),
                                             static_cast<size_t>(opt_.bucket_mb * 1024 * 1024));
  // Ranks of a node sum gradients in node-shared memory when they can
  // (comm/bucket_reducer.hpp): the model then writes its gradients straight into the
  // shared window.
  std::unique_ptr<NodeSharedReducer> shm =
      model_->on_device() ? nullptr : make_node_shared_reducer(comm_, model_->param_count(), buckets, &no_shm_);
  if (shm) {  // dropping it is collective (MPI_Win_free): agree first
    const int adopted = model_->adopt_grad_storage(shm->buffer()) ? 1 : 0;
    if (!control_.allreduce(adopted, ReduceOp::min, "the node-shared memory agreement")) {
      if (adopted) internal_error("some ranks' models could not use node-shared gradient memory");
      shm.reset();
    }
  }
  prepare_model();
  model_->init_params(opt_.seed);
  {
    auto waiting = control_.waiting("the parameter broadcast");
    model_->order_before(comm_.stream());  // a device model's queue before the communicator's
    comm_.broadcast(model_->param_data(), model_->param_count() * sizeof(float), 0);  // rank 0's state everywhere
    model_->wait_for(comm_.stream());  // and the model's queue after it, were it only enqueued
  }

  // ---- schedule, optimizer, gradient buckets ----
  steps_per_epoch_ = train_->steps_per_epoch();
  total_steps_ = steps_per_epoch_ * std::max(1, opt_.epochs);
  if (opt_.max_steps > 0) total_steps_ = std::min<int64_t>(total_steps_, opt_.max_steps);
  if (opt_.max_steps > 0 && opt_.epochs <= 1 && opt_.max_steps > total_steps_) total_steps_ = opt_.max_steps;
  epochs_planned_ = static_cast<int>((total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_);
  optimizer_ = make_optimizer(opt_.optimizer, *model_);  // CUDA kernels on the model's queue for a device model
  if (inject_nan_update_step_ >= 0) {
    const auto& ps = model_->params();
    if (std::none_of(ps.begin(), ps.end(), [&](const ParamInfo& p) {
          return p.trainable && p.name == inject_nan_update_param_;
        }))
      fail("CNNSCALE_INJECT_NAN_UPDATE: '", inject_nan_update_param_,
           "' is not a trainable parameter of this model (a test hook; unset it to train normally)");
  }
  schedule_ = std::make_unique<LrSchedule>(opt_.lr, global_batch_, steps_per_epoch_, total_steps_);
  std::unique_ptr<BucketReducer> reducer;
  if (shm) reducer = std::move(shm);
  else if (world_ > 1) reducer = make_allreduce_reducer(comm_, model_->grad_data(), buckets);
  sync_ = std::make_unique<GradSync>(std::move(buckets), std::move(reducer));

  ckpt_dir_ = opt_.run_dir.empty() ? std::string() : opt_.run_dir + "/checkpoints";
  config_ =
      make_run_config(opt_, model_->identity(),
                      dataset ? dataset_fingerprint(*dataset)
                              : synthetic_fingerprint(opt_.data.synthetic_samples, train_->shape(), train_->classes()));
  digest_ = config_.digest();
}

// The GPU model chooses its convolution algorithms in prepare (--cudnn-benchmark: by
// timing them, which varies from rank to rank). Rank 0 chooses and the other ranks
// adopt its choices before they prepare: every rank then runs the same algorithms,
// those that rank 0 stores in its checkpoints, so that a resumed run, which reapplies
// them on every rank (restore_checkpoint), computes the bits of the run it continues.
// (Per-rank choices would keep the replicas identical too, since the gradients are
// summed, the update is the same on every rank and the batch-norm buffers follow rank
// 0, but one checkpoint could not hold them all.) Choices for batch sizes planned
// later (evaluation) are each rank's own: they change no parameter.
void Trainer::prepare_model() {
  if (!model_->on_device() || world_ == 1) {
    model_->prepare(opt_.batch_size, opt_.precision);
    return;
  }
  std::string error, tuning;
  if (rank_ == 0) {
    try {
      model_->prepare(opt_.batch_size, opt_.precision);
      tuning = model_->tuning();
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  error = control_.broadcast_string(error, 0, "the model preparation outcome broadcast");
  if (!error.empty()) fail_collective(rank_, error);
  tuning = control_.broadcast_string(tuning, 0, "the convolution algorithm broadcast");
  if (rank_ != 0) {
    model_->set_tuning(tuning);
    model_->prepare(opt_.batch_size, opt_.precision);
  }
}

bool Trainer::resume() {
  run_dir_->check_identity(config_);
  const bool resumed = restore_checkpoint();
  nothing_to_train_ = run_dir_->finished(resumed, first_step_, total_steps_);  // run.json stays as it is
  return resumed;
}

// Rank 0 finds and validates the checkpoint (damaged newest ones are reported and
// skipped under --resume auto), then broadcasts parameters, optimiser state and position.
bool Trainer::restore_checkpoint() {
  using Mode = ResumeFrom::Mode;
  if (opt_.resume.mode == Mode::none) return false;
  const bool explicit_path = opt_.resume.mode == Mode::path;
  if (!explicit_path && opt_.run_dir.empty()) return false;
  std::string error, path, tuning;
  ResumePosition pos;
  if (rank_ == 0) {
    const std::vector<std::string> candidates = explicit_path ? std::vector<std::string>{opt_.resume.path}
                                                              : checkpoint_candidates(opt_.run_dir + "/checkpoints");
    std::string skipped;
    for (const auto& c : candidates) {
      try {
        const CheckpointMeta meta = read_checkpoint(c, *model_, *optimizer_);
        if (explicit_path) warn_if_other_config(c, meta, config_);
        path = c;
        tuning = meta.tuning;
        pos = {1, meta.step, meta.epoch, meta.step_in_epoch, meta.world_size, meta.global_batch, meta.optimizer_steps};
        break;
      } catch (const UserError& e) {
        if (explicit_path) {
          error = "--resume " + c + ": " + e.what();
          break;
        }
        // A NaN is not damage: falling back past it is the user's choice (checkpoint.hpp).
        if (dynamic_cast<const CheckpointNonFinite*>(&e)) {
          error = e.what();
          break;
        }
        log_warn(std::string("skipping checkpoint: ") + e.what());
        skipped += skipped.empty() ? c : ", " + c;
        // A model mismatch is not damage: every older checkpoint has the same model.
        if (dynamic_cast<const CheckpointMismatch*>(&e)) {
          error = e.what();
          break;
        }
      }
    }
    if (!pos.found && !skipped.empty() && error.empty())
      error = "no usable checkpoint in " + opt_.run_dir + "/checkpoints (damaged: " + skipped +
              "); remove the damaged files or pass --resume none to start over";
  }
  error = control_.broadcast_string(error, 0, "the resume decision broadcast");
  if (!error.empty()) fail_collective(rank_, error);
  control_.broadcast_value(pos, 0, "the resume position broadcast");
  if (!pos.found) return false;
  resumed_from_ = control_.broadcast_string(path, 0, "the resume position broadcast");
  // The convolution algorithms of the run that wrote the checkpoint (empty for the CPU
  // model and older checkpoints), on every rank: the same bits as that run.
  model_->set_tuning(control_.broadcast_string(tuning, 0, "the checkpoint's convolution algorithm broadcast"));
  // Over the control plane on host copies: the same path for host and device models.
  std::vector<float> host(model_->param_count());
  if (rank_ == 0) model_->copy_params_to_host(host.data());
  control_.broadcast(host.data(), host.size() * sizeof(float), 0, "the checkpoint parameter broadcast");
  if (rank_ != 0) model_->copy_params_from_host(host.data());
  for (auto& [name, buf] : optimizer_->state())
    control_.broadcast(buf->data(), buf->size() * sizeof(float), 0, "the checkpoint optimizer-state broadcast");
  optimizer_->commit_state();  // a device optimiser uploads now, not in the first step() behind its NCCL sums
  optimizer_->set_steps_taken(pos.optimizer_steps);

  first_step_ = next_step_ = pos.step;
  start_epoch_ = static_cast<int>(pos.epoch);
  start_in_epoch_ = pos.step_in_epoch;
  if (pos.global_batch != global_batch_) {
    // Same samples consumed, new batch size: continue at the same point of the epoch.
    start_in_epoch_ = pos.step_in_epoch * pos.global_batch / global_batch_;
    log_warn("resuming a run with global batch " + std::to_string(pos.global_batch) + " at global batch " +
             std::to_string(global_batch_) + ": from here on the batches, the step count per epoch and the " +
             "learning-rate schedule differ from the original run (it continues at the same sample position)");
  }
  log_info("resumed from " + resumed_from_ + " at step " + std::to_string(first_step_) + " (epoch " +
           std::to_string(start_epoch_ + 1) + ", written by " + std::to_string(pos.world_size) + " rank(s))");
  if (start_in_epoch_ >= steps_per_epoch_) {
    ++start_epoch_;
    start_in_epoch_ = 0;
  }
  return true;
}

void Trainer::begin() {
  begun_ = true;
  if (rank_ == 0 && run_dir_->enabled()) {
    metrics_.open(opt_.run_dir);
    metrics_.append(run_dir_->start_record(first_step_, world_, global_batch_, resumed_from_, digest_));
    open_run_end();
    for (const std::string& d : {opt_.run_dir, ckpt_dir_})
      for (const std::string& f : remove_stale_temporaries(d))
        log_info("removed " + d + "/" + f + " (left by a writer on this host that no longer runs)");
  }
  open_tensorboard();
  log_info("cnnscale train: " + std::to_string(world_) + " rank(s) on " + std::to_string(ctx_.num_nodes) +
           " node(s), backend " + backend_name(comm_.backend()) + ", model " + model_->name() + " (" +
           std::to_string(model_->param_count()) + " parameters), " + precision_name(opt_.precision) + ", batch " +
           std::to_string(opt_.batch_size) + "/rank = " + std::to_string(global_batch_) + " global, " +
           std::to_string(opt_.data.data_threads) + " data thread(s)/rank, " +
           std::to_string(steps_per_epoch_) + " steps/epoch, " + std::to_string(total_steps_) + " steps, " +
           std::to_string(sync_->buckets().size()) + " gradient bucket(s) summed by " + sync_->method() +
           (world_ > 1 && !no_shm_.empty() ? " (not node shared memory: " + no_shm_ + ")" : "") +
           (opt_.sync_bn ? std::string(", batch-norm statistics over the global batch (--sync-bn)") : std::string()));
  if (opt_.sync_bn && !has_buffers_) log_warn("--sync-bn: model " + model_->name() + " has no batch-norm layer");
  if (schedule_->peak() != schedule_->base())
    log_info("learning rate " + std::to_string(schedule_->base()) + " scaled to " + std::to_string(schedule_->peak()) +
             " (" + opt_.lr.scaling + ", reference batch " + std::to_string(opt_.lr.reference_batch) + ")");
  if (!opt_.timeline.empty()) {
    const TimelineWindow w =
        opt_.timeline_steps.given() ? opt_.timeline_steps : default_timeline_window(first_step_, total_steps_);
    if (w.last <= first_step_ || w.first > total_steps_) {
      log_warn("--timeline: steps " + std::to_string(w.first) + ":" + std::to_string(w.last) + " are not in this run " +
               "(steps " + std::to_string(first_step_ + 1) + ":" + std::to_string(total_steps_) + "), so " +
               opt_.timeline + " is not written; give --timeline-steps within them");
    } else {
      std::vector<std::pair<size_t, std::string>> layers;
      for (const auto& p : model_->params())
        if (p.trainable && p.numel > 0) layers.emplace_back(p.offset + p.numel, p.name);
      std::vector<size_t> bucket_bytes;
      for (const auto& b : sync_->buckets()) bucket_bytes.push_back((b.end - b.begin) * sizeof(float));
      timeline_ = std::make_unique<Timeline>(opt_.timeline, w, rank_, ctx_.host, layers, bucket_bytes);
      log_info("--timeline: recording steps " + std::to_string(w.first) + ":" +
               std::to_string(std::min(w.last, total_steps_)) + " into " + opt_.timeline);
    }
  }
  train_->seek(start_epoch_, start_in_epoch_);
  times_.reserve(static_cast<size_t>(std::max<int64_t>(0, total_steps_ - next_step_)));
  start_ = Clock::now();
  log_clock_ = Clock::now();
  sctx_.seed = opt_.seed;
  sctx_.training = true;
  // The mean over the global batch's loss terms: its samples (segmentation: its pixels), unless
  // the denominator depends on the labels (then set per step, in step()).
  sctx_.loss_scale = 1.0f / static_cast<float>(global_batch_ * task_->pixels());
  sctx_.step_graph = comm_.size() == 1;  // more ranks: their sums overlap backward, which a graph would not
  // A device model's loss wait may be a wait for the previous step's gradient sums (its
  // queue waits for the communicator's): check the transport's asynchronous errors
  // between its polls. No-op for host transports; never called by a host model.
  sctx_.while_waiting = [this] { comm_.check_async_error("the previous step's gradient allreduce (NCCL)"); };
}

// Rank 0 with --run-dir: how the run ends is recorded even when it ends early
// (train/run_end.hpp); a record without timings carries run_shape() and the planned steps.
void Trainer::open_run_end() {
  nlohmann::json base = run_shape();
  base["planned_steps"] = total_steps_;
  const RunDir* dir = run_dir_.get();
  const int64_t first = first_step_;
  run_end_.open(
      opt_.run_dir, dir->previous_finished(), &metrics_,
      [dir, first](nlohmann::json now) { return dir->summarize(std::move(now), first); }, std::move(base));
  run_end_.set_progress(next_step_, last_loss_, 0);
  // The fatal paths that end the process (a failed library call, the watchdog) say
  // their message here first (util/error.hpp).
  set_last_words([this](const std::string& why) {
    run_end_.write("failed after step " + std::to_string(run_end_.steps_done()) + ": " + why, nullptr, true);
  });
  ControlComm* control = &control_;
  run_end_.watch_signals(
      [control] { return control->waiting_in(); },
      [control](double wait, std::vector<std::string>* silent) { return control->unanswered(wait, silent); });
}

// Rank 0 creates the event file (one per process run), then a SessionLog START at the
// first step this segment writes, so TensorBoard drops what an earlier segment logged
// after the checkpoint this one resumed from (no step shows twice), and the options.
void Trainer::open_tensorboard() {
  const std::string dir = opt_.tensorboard_dir();
  if (dir.empty()) return;
  std::string error;
  if (rank_ == 0) {
    try {
      tb_ = std::make_unique<TensorBoardWriter>(dir, ctx_.host);
      tb_->session_start(first_step_ + 1);
      tb_->text(first_step_ + 1, "options", options_markdown());
    } catch (const UserError& e) {
      error = e.what();
    }
  }
  error = control_.broadcast_string(error, 0, "the TensorBoard file check");
  if (!error.empty()) fail_collective(rank_, error);
  if (tb_) log_info("TensorBoard events: " + tb_->path() + " (view with: tensorboard --logdir " + dir + ")");
}

// A two-column Markdown table: this segment's setup, then the run's identity (RunConfig).
std::string Trainer::options_markdown() const {
  const auto cell = [](const std::string& v) {
    std::string out = "`";
    for (char c : v) out += c == '|' ? std::string("\\|") : std::string(1, c);
    return out + "`";
  };
  std::string md = "| option | value |\n|---|---|\n";
  const auto row = [&](const std::string& k, const std::string& v) { md += "| " + cell(k) + " | " + cell(v) + " |\n"; };
  row("world_size", std::to_string(world_));
  row("nodes", std::to_string(ctx_.num_nodes));
  row("backend", backend_name(comm_.backend()));
  row("model_name", model_->name() + " (" + std::to_string(model_->param_count()) + " parameters)");
  row("batch_per_rank", std::to_string(opt_.batch_size));
  row("global_batch", std::to_string(global_batch_));
  row("steps", std::to_string(total_steps_) + " (" + std::to_string(steps_per_epoch_) + " per epoch)");
  row("threads_per_rank", std::to_string(opt_.threads));
  row("data_dir", opt_.data.synthetic ? std::string("synthetic") : opt_.data.dir);
  row("run_dir", opt_.run_dir.empty() ? std::string("none") : opt_.run_dir);
  row("first_step", std::to_string(first_step_ + 1));
  row("resumed_from", resumed_from_.empty() ? std::string("none") : resumed_from_);
  row("host", ctx_.host);
  if (!ctx_.launch.job_id.empty()) row("slurm_job", ctx_.launch.job_id);
  row("config_digest", digest_);
  for (const auto& [k, v] : config_.entries()) row(k, v);
  return md;
}

StepResult Trainer::step() {
  if (!begun_) begin();
  const int64_t step = next_step_;
  StepResult result;
  result.step = step + 1;
  StepTimes t;
  control_.set_step(step);
  // --timeline: spans of this step when it is in the window (tl_* in Timeline::now()).
  Timeline* tl = timeline_ && timeline_->begin_step(step + 1) ? timeline_.get() : nullptr;
  const double tl_start = tl ? Timeline::now() : 0;
  const auto t0 = Clock::now();
  train_->next(batch_);
  t.data = train_->take_wait_seconds();
  const auto t1 = Clock::now();
  double tl_mark = 0;
  size_t tl_ready = 0;
  if (tl) {
    tl_mark = Timeline::now();
    tl->span(Timeline::kData, "data wait", tl_start, tl_mark);
  }
  const double tl_compute = tl_mark;
  bool tl_backward = false;
  sctx_.step = step;
  sctx_.sample_ids = batch_.sample_ids.data();
  sctx_.staged = batch_.ticket;
  bn_sync_s_ = 0;
  // Device clock (Model::mark; no-op for a host model): one set of marks per step in
  // flight, read once the device has passed them (the next step, or drain()).
  const int marks = static_cast<int>(step % Model::kMarkSets);
  model_->mark(marks, kMarkStart);
  // --on-nan skip-step, host model: the batch-norm running statistics as they were before
  // this step's forward, so that a skipped step leaves no trace in them either (a NaN
  // batch would otherwise have made them NaN; C floats per layer).
  if (opt_.on_nan == NanPolicy::skip_step && has_buffers_ && !model_->on_device()) {
    saved_buffers_.clear();
    for (auto [b, e] : buffer_ranges_)
      saved_buffers_.insert(saved_buffers_.end(), model_->param_data() + b, model_->param_data() + e);
  }
  // The loss's denominator (nn/task.hpp): the global batch, or, where class weights or an
  // ignore index make it depend on the labels, their sum over the ranks' batches.
  const Targets targets = batch_targets(*task_, batch_);
  const double local_denominator = task_->denominator(targets, batch_.count);
  if (!task_->fixed_denominator()) {
    const double global = control_.allreduce(local_denominator, ReduceOp::sum, "the loss denominator");
    // A global batch of ignored labels only (or weights 0): no gradient, as torch's 0/0
    // would make NaN; the step agreement then treats it as a NaN loss would be.
    sctx_.loss_scale = global > 0 ? static_cast<float>(1.0 / global) : 0.f;
  }
  const auto fb = [&] {
    return model_->forward_backward(
        batch_.images.data(), targets, batch_.count, sctx_, [&](size_t ready_end) {
          if (tl) {
            const double now = Timeline::now();
            if (ready_end == 0) tl->span(Timeline::kForward, "forward", tl_mark, now);
            else tl->backward(tl_ready, ready_end, tl_mark, now);
            tl_backward = true;
            tl_mark = now;
            tl_ready = ready_end;
          }
          if (ready_end == 0) return;  // backward begins
          model_->order_before(comm_.stream());
          sync_->on_ready(ready_end);
          if (inject_delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(inject_delay_ms_));
          if (step == inject_error_step_)
            fail("rank ", rank_, " on ", ctx_.host, ": injected error during backward of step ", step + 1,
                 " (CNNSCALE_INJECT_ERROR; unset it to train normally)");
        });
  };
  double loss_sum = 0;
  if (model_->on_device()) {
    // Returns once the loss is known, backward still running on the device. Its loss wait
    // waits for the previous step's queue (gradient sums, optimizer) too: under the
    // watchdog, polling the communicator's errors (StepContext::while_waiting).
    auto waiting = control_.waiting("the device's step (the previous step's gradient allreduce, forward)");
    loss_sum = fb();
  } else {
    loss_sum = fb();  // returns after backward
  }
  model_->mark(marks, kMarkBackward);
  t.compute = seconds_since(t1) - bn_sync_s_;
  if (tl) {
    const double now = Timeline::now();
    if (!tl_backward) tl->span(Timeline::kForward, "forward + backward", tl_compute, now);
    else if (now > tl_mark) tl->span(Timeline::kBackward, "backward (input side)", tl_mark, now);
    tl_mark = now;
  }
  // The device has passed the previous step by now (its queue reached this step's loss):
  // its gradient sums are complete (checked here, no wait) and its device times known.
  if (sync_->device_ordered()) {
    auto waiting = control_.waiting("the gradient allreduce");
    sync_->complete();
  }
  read_marks(nullptr);

  // One small allreduce per step: did any rank get a stop signal or a non-finite loss?
  // Right after forward_backward, so that it overlaps a device model's backward.
  const auto ta = Clock::now();
  StepFlags any{stop_signal_received() ? 1 : 0, std::isfinite(loss_sum) ? 0 : 1, update_non_finite_ ? 1 : 0,
                times_.empty() ? 0 : static_cast<int>(std::min(2e9, times_.back().step * 1e6))};
  control_.allreduce_fields<int>(any, ReduceOp::max, "the step agreement allreduce");
  if (any.bad_update) check_update(step, true);  // the previous update's NaN: stop before this one
  if (any.prev_step_us > 0) slowest_step_s_ = any.prev_step_us * 1e-6;
  const double agreement_s = seconds_since(ta);
  if (tl) tl_mark = Timeline::now();

  const bool deferred = sync_->device_ordered();
  {
    // Host transports: wait for the buckets still in flight. Device-ordered (NCCL): start
    // the rest and return; the model's queue waits for them on the device (below).
    auto waiting = control_.waiting("the gradient allreduce");
    t.comm_exposed = sync_->end_round() + bn_sync_s_;
    t.comm_total = deferred ? -1 : sync_->last_comm_seconds();
  }
  if (tl) {
    tl->span(Timeline::kGradWait, deferred ? "gradient sums (enqueued)" : "gradient wait", tl_mark, Timeline::now());
    if (!deferred) tl->buckets(sync_->last_spans());  // a deferred round's spans are not known yet
  }
  model_->wait_for(comm_.stream());  // the optimizer reads the sums (no-op for a host model)
  model_->mark(marks, kMarkSummed);
  t.bn_sync = bn_sync_s_;
  const auto t3 = Clock::now();
  const double lr = schedule_->at(step);
  // A NaN/Inf born inside the network (a host model's scans, nn/net.hpp) makes the loss
  // NaN too, so `any` holds it; model_->non_finite_where() says where, on this rank.
  if (any.non_finite) {
    const std::string where = model_->non_finite_where();
    if (opt_.on_nan == NanPolicy::stop)
      fail_collective(rank_, "the training loss is not finite at step ", step + 1, " (lr ", lr,
                      where.empty() ? "" : "; rank 0 saw " + where,
                      "); stopped without writing a checkpoint, so the last good one is untouched. Lower --lr, "
                      "check the input data, or pass --on-nan skip-step");
    ++skipped_steps_;
    result.skipped = true;
    log_warn("non-finite loss at step " + std::to_string(step + 1) + (where.empty() ? "" : " (" + where + ")") +
             ": update skipped (--on-nan skip-step)");
    skip_leaves_finite_state(step + 1);
  }
  const double tl_opt = tl ? Timeline::now() : 0;
  const bool inject_nan = step == inject_nan_update_step_ && !any.non_finite;
  const auto nan_offset = [&] {
    for (const auto& p : model_->params())
      if (p.name == inject_nan_update_param_) return p.offset;
    return size_t{0};
  };
  if (inject_nan && !model_->on_device()) {
    model_->grad_data()[nan_offset()] = std::numeric_limits<float>::quiet_NaN();
    log_all("CNNSCALE_INJECT_NAN_UPDATE: a NaN written into the summed gradient of " + inject_nan_update_param_ +
            " before the update of step " + std::to_string(step + 1) + " (a test hook; unset it to train normally)");
  }
  // Enqueued on a device model's queue, after the sums; host models return when done.
  if (!any.non_finite) {
    optimizer_->step(model_->param_data(), model_->grad_data(), lr);
    update_non_finite_ = !optimizer_->wrote_finite();
  }
  if (inject_nan && model_->on_device()) {  // no device check to exercise: as if the update had written it
    std::vector<float> host(model_->param_count());
    model_->copy_params_to_host(host.data());
    host[nan_offset()] = std::numeric_limits<float>::quiet_NaN();
    model_->copy_params_from_host(host.data());
    log_all("CNNSCALE_INJECT_NAN_UPDATE: a NaN written into parameter " + inject_nan_update_param_ +
            " after the update of step " + std::to_string(step + 1) + " (a test hook; unset it to train normally)");
  }
  // With --sync-bn every rank computed the same running statistics from the same global
  // sums (bitwise: the sums are added in rank order on every rank).
  if (has_buffers_ && world_ > 1 && !opt_.sync_bn) broadcast_buffers();  // the next forward waits for it
  model_->mark(marks, kMarkEnd);
  t.optimizer = seconds_since(t3) + agreement_s;
  if (tl) tl->span(Timeline::kOptimizer, "optimizer", tl_opt, Timeline::now());
  marks_unread_ = {times_.size(), marks};  // t's slot once pushed below

  const bool log_due = (step + 1) % opt_.log_every == 0;
  const bool epoch_end = (step + 1) % steps_per_epoch_ == 0 || step + 1 == total_steps_;
  const bool replica_due = opt_.check_replicas > 0 && (step + 1) % opt_.check_replicas == 0;
  const bool want_ckpt = !ckpt_dir_.empty() && (epoch_end || any.stop_signal || step + 1 == total_steps_ ||
                                                (opt_.checkpoint_every > 0 && (step + 1) % opt_.checkpoint_every == 0));
  // Whatever reads this step's results on the host (the progress line's timings,
  // evaluation, a checkpoint, the replica check, the end of the run) waits for the device
  // first; other steps end with no host wait.
  if (log_due || epoch_end || replica_due || want_ckpt || any.stop_signal || step + 1 == total_steps_) {
    drain();
    read_marks(&t);
  }
  // Before anything reads this update's parameters (evaluation, a checkpoint, the end of
  // the run): one more small allreduce, on those steps only; other steps tell the next
  // step's agreement, before its update.
  if (epoch_end || want_ckpt || any.stop_signal || step + 1 == total_steps_) check_update(step + 1, false);
  if (replica_due) {
    if (!replicas_identical())
      fail_collective(rank_, "ranks hold different parameters after step ", step + 1,
                      " (--check-replicas): a rank computed differently (hardware fault or a bug); "
                      "do not trust this run");
    ++replica_checks_;
  }
  t.step = seconds_since(t0);
  if (tl) tl->span(Timeline::kStep, "step " + std::to_string(step + 1), tl_start, tl_start + t.step);
  times_.push_back(t);
  data_since_log_ += t.data;
  step_since_log_ += t.step;
  if (!any.non_finite) {
    loss_since_log_ += loss_sum;
    samples_since_log_ += local_denominator;
  }
  count_since_log_ += static_cast<double>(batch_.count);
  result.loss = local_denominator > 0 ? loss_sum / local_denominator : 0;

  if (log_due || epoch_end) log_progress(step, lr, t);
  if (epoch_end && eval_) {
    const double t_eval = tl ? Timeline::now() : 0;
    evaluate_epoch(step);
    if (tl)
      tl->span(Timeline::kEvaluation, "evaluation epoch " + std::to_string(batch_.epoch + 1), t_eval, Timeline::now());
  }
  if (want_ckpt) {
    const double t_ckpt = tl ? Timeline::now() : 0;
    save_checkpoint(step + 1);
    if (tl) tl->span(Timeline::kCheckpoint, "checkpoint step " + std::to_string(step + 1), t_ckpt, Timeline::now());
  }
  next_step_ = step + 1;
  if (status_line_enabled()) draw_progress_bar(epoch_end || any.stop_signal);
  // The window's last step, or the run ends earlier: every rank decides alike.
  if (tl && (step + 1 >= timeline_->window().last || step + 1 == total_steps_ || any.stop_signal)) write_timeline();
  if (run_end_.enabled()) run_end_.set_progress(next_step_, last_loss_, seconds_since(start_));
  if (any.stop_signal && next_step_ >= total_steps_) {
    log_info("stop signal received at the last step: the run is complete");
  } else if (any.stop_signal) {
    set_status_line("");
    result.stopped = true;
    log_info("stop signal received: checkpointed at step " + std::to_string(step + 1) +
             (ckpt_dir_.empty() ? std::string(" (no --run-dir, so nothing was saved)") : std::string()) +
             "; exiting with status " + std::to_string(kExitCheckpointedOnSignal) +
             " — rerun with --resume auto to continue");
  }
  return result;
}

// A NaN or Inf written by the update of step `steps_done` (1-based) stops every rank:
// --on-nan skip-step cannot skip an update already applied. `agreed`: the step agreement
// already found it on some rank; else one allreduce asks. Nothing is checkpointed.
void Trainer::check_update(int64_t steps_done, bool agreed) {
  // agreed: some rank found it, maybe not this one (replicas that differ): stop anyway.
  int bad = agreed || update_non_finite_ ? 1 : 0;
  if (!agreed) control_.allreduce(&bad, 1, ReduceOp::max, "the update finiteness allreduce");
  if (!bad) return;
  std::string where;
  if (rank_ == 0) where = non_finite_tensor(*model_, *optimizer_);
  fail_collective(rank_, "the update of step ", steps_done, " wrote a NaN or Inf",
                  where.empty() ? std::string(" on a rank other than 0 (its parameters differ from rank 0's: a "
                                              "hardware fault or a bug; do not trust this run)")
                                : " (rank 0: " + where + ")",
                  "; stopped without writing a checkpoint, so the last good one is untouched (--on-nan skip-step "
                  "cannot skip an update already applied). Lower --lr, or check the input data, and resume from the "
                  "last checkpoint");
}

// A skipped step must leave finite parameters and statistics behind: a host model gets
// its batch-norm statistics back as they were before the step; then rank 0 (whose
// statistics every rank has after the buffer broadcast, or all alike under --sync-bn)
// checks everything, and a NaN or Inf that skipping cannot undo — in a parameter (on the
// GPU the optimiser does not check what it writes), or in a device model's statistics —
// stops every rank. Only on skipped steps: one scan (a device model: a host copy).
void Trainer::skip_leaves_finite_state(int64_t step_1based) {
  if (!saved_buffers_.empty()) {
    size_t k = 0;
    for (auto [b, e] : buffer_ranges_) {
      std::copy_n(saved_buffers_.data() + k, e - b, model_->param_data() + b);
      k += e - b;
    }
  }
  // A device model's host copy waits behind this step's gradient sums: under the
  // watchdog, polling the communicator's errors (drain), as every host read of results.
  if (model_->on_device()) drain();
  std::string where;
  if (rank_ == 0) where = non_finite_tensor(*model_, *optimizer_);
  where = control_.broadcast_string(where, 0, "the skipped step's finiteness check");
  if (!where.empty())
    fail_collective(rank_, "step ", step_1based,
                    " was skipped (--on-nan skip-step), but the model still holds a NaN or Inf (rank 0: ", where,
                    "): skipping cannot undo it (a parameter written by an earlier update",
                    model_->on_device() ? ", or the batch-norm statistics of the skipped batch" : "",
                    "); stopped without writing a checkpoint, so the last good one is untouched. Lower --lr, or "
                    "check the input data, and resume from the last checkpoint");
}

// Rank 0 on a terminal: at most 10 redraws a second, and at every epoch end.
void Trainer::draw_progress_bar(bool force) {
  if (!force && bar_drawn_ && seconds_since(bar_clock_) < 0.1) return;
  bar_clock_ = Clock::now();
  bar_drawn_ = true;
  ProgressState p;
  p.epoch = batch_.epoch + 1;
  p.epochs = epochs_planned_;
  p.step_in_epoch = batch_.step_in_epoch + 1;
  p.steps_per_epoch = steps_per_epoch_;
  p.step = next_step_;
  p.total_steps = total_steps_;
  p.loss = last_loss_;
  p.slowest_step_s = slowest_step_s_;
  p.images_per_s = slowest_step_s_ > 0 ? static_cast<double>(global_batch_) / slowest_step_s_ : 0;
  const double done = static_cast<double>(next_step_ - first_step_);
  p.eta_s = done > 0 ? seconds_since(start_) / done * static_cast<double>(total_steps_ - next_step_) : -1;
  set_status_line(progress_bar_line(p, terminal_columns()));
}

void Trainer::write_timeline() {
  const auto t0 = Clock::now();
  size_t events = 0;
  std::string error;
  try {
    events = timeline_->write(control_);
  } catch (const UserError& e) {  // rank 0's write; training goes on
    error = e.what();
  }
  if (rank_ == 0) {
    if (error.empty()) {
      std::error_code ec;
      const auto abs = std::filesystem::absolute(timeline_->path(), ec);
      timeline_written_ = ec ? timeline_->path() : abs.lexically_normal().string();
      char took[64];
      std::snprintf(took, sizeof(took), " in %.2f s", seconds_since(t0));
      log_info("--timeline: wrote " + timeline_->path() + " (" + std::to_string(events) + " events of " +
               std::to_string(world_) + " rank(s), steps " + std::to_string(timeline_->window().first) + ":" +
               std::to_string(std::min(timeline_->window().last, next_step_)) + ")" + took +
               "; open it in https://ui.perfetto.dev or chrome://tracing");
    } else {
      log_warn("--timeline: " + error + "; training goes on without it");
    }
  }
  timeline_.reset();
}

void Trainer::broadcast_buffers() {
  // As DDP's broadcast_buffers: batch-norm running statistics follow rank 0. The
  // communicator picks the transport (Communicator::broadcast_ranges: host ranges packed
  // into one message; NCCL one grouped call, enqueued only); the model's queue then
  // waits on the device for it (a no-op for a host model).
  auto waiting = control_.waiting("the buffer broadcast");
  model_->order_before(comm_.stream());
  comm_.broadcast_ranges(model_->param_data(), buffer_ranges_, 0);
  model_->wait_for(comm_.stream());
}

void Trainer::drain() {
  {
    // The gradient sums (a device-ordered round's, checked and timed now) and the
    // communicator's queue (NCCL: polling its asynchronous errors); no-ops on the host.
    auto waiting = control_.waiting("the gradient allreduce and buffer broadcast");
    sync_->complete();
    comm_.synchronize();
  }
  model_->synchronize();  // the optimizer (a device model's queue; no-op on the host)
}

void Trainer::read_marks(StepTimes* current) {
  if (marks_unread_.set < 0) return;
  StepTimes* t = marks_unread_.index < times_.size() ? &times_[marks_unread_.index] : current;
  const int set = marks_unread_.set;
  double compute = 0, exposed = 0, update = 0;
  if (!t || !model_->marked_seconds(set, kMarkStart, kMarkBackward, &compute) ||
      !model_->marked_seconds(set, kMarkBackward, kMarkSummed, &exposed) ||
      !model_->marked_seconds(set, kMarkSummed, kMarkEnd, &update))
    return;  // a host model (its host clocks are exact), or not complete yet
  t->compute = compute;
  t->comm_exposed = exposed + t->bn_sync;  // bn_sync: CPU model only, 0 here
  t->optimizer = update;
  marks_unread_.set = -1;
}

bool Trainer::replicas_identical() {
  host_scratch_.resize(model_->param_count());
  model_->copy_params_to_host(host_scratch_.data());
  const uint64_t h = hash_params(host_scratch_.data(), host_scratch_.size());
  const uint64_t lo = control_.allreduce(h, ReduceOp::min, "the replica check");
  const uint64_t hi = control_.allreduce(h, ReduceOp::max, "the replica check");
  return lo == hi;
}

void Trainer::log_progress(int64_t step, double lr, const StepTimes& t) {
  LossSums sums{loss_since_log_, samples_since_log_, data_since_log_, step_since_log_, count_since_log_};
  control_.allreduce_fields(sums, ReduceOp::sum, "the loss allreduce");
  // Every step since the last line skipped (--on-nan skip-step): no loss to show (once
  // this read 0/0 as a NaN loss and stopped the run that skip-step was keeping alive).
  const bool all_skipped = sums.samples <= 0;
  if (!all_skipped) last_loss_ = sums.loss / sums.samples;
  if (!all_skipped && !std::isfinite(last_loss_))
    fail_collective(rank_, "training loss became ", last_loss_, " at step ", step + 1, "; lower --lr (now ", lr,
                    ") or check the input data");
  const double elapsed = seconds_since(start_);
  const double interval = seconds_since(log_clock_);
  log_clock_ = Clock::now();
  const double ips = interval > 0 ? sums.count / interval : 0;
  const double eta =
      elapsed / static_cast<double>(step + 1 - first_step_) * static_cast<double>(total_steps_ - step - 1);
  // The slowest rank's step time (the previous step's: it rides on this step's agreement).
  char slowest[64] = "";
  if (slowest_step_s_ > 0) std::snprintf(slowest, sizeof(slowest), " slowest rank %.1f ms/step", slowest_step_s_ * 1e3);
  // Input-bound over this interval (all ranks): the line says so, so that a user watching
  // the log sees it long before the summary.
  const double data_share = sums.step_s > 0 ? sums.data_s / sums.step_s : 0;
  if (data_share > kInputBoundShare)
    std::snprintf(slowest + std::strlen(slowest), sizeof(slowest) - std::strlen(slowest), " input-bound %.0f%%",
                  100 * data_share);
  char line[320];
  char loss_text[48];
  if (all_skipped) std::snprintf(loss_text, sizeof(loss_text), "loss - (skipped)");
  else std::snprintf(loss_text, sizeof(loss_text), "loss %.4f", last_loss_);
  // Samples that are not images (a regression's fields) are counted as samples.
  const char* per_s = task_->kind() == TaskKind::classification ? "img/s" : "samples/s";
  std::snprintf(line, sizeof(line), "epoch %d/%d step %lld/%lld %s lr %.4g %s %s%s ETA %s", batch_.epoch + 1,
                epochs_planned_, static_cast<long long>(step + 1), static_cast<long long>(total_steps_), loss_text, lr,
                format_rate(ips).c_str(), per_s, slowest, format_duration(eta).c_str());
  log_info(line);
  nlohmann::json line_json = {{"step", step + 1},
                              {"epoch", batch_.epoch + 1},
                              {"loss", all_skipped ? nlohmann::json(nullptr) : nlohmann::json(last_loss_)},
                              {"lr", lr},
                              {"images_per_s", ips},
                              {"step_ms", t.step * 1e3},
                              {"data_ms", t.data * 1e3},
                              {"compute_ms", t.compute * 1e3},
                              {"comm_exposed_ms", t.comm_exposed * 1e3},
                              {"optimizer_ms", t.optimizer * 1e3},
                              {"elapsed_s", elapsed}};
  if (opt_.sync_bn) line_json["bn_sync_ms"] = t.bn_sync * 1e3;  // included in comm_exposed_ms
  if (all_skipped) line_json["skipped"] = true;                 // loss null: no step since the last line was applied
  line_json["total_steps"] = total_steps_;                      // for `cnnscale watch` (progress, ETA)
  line_json["eta_s"] = std::isfinite(eta) && eta >= 0 ? nlohmann::json(eta) : nlohmann::json(nullptr);
  if (slowest_step_s_ > 0) line_json["slowest_step_ms"] = slowest_step_s_ * 1e3;  // max over ranks, previous step
  line_json["data_wait_share"] = data_share;  // the interval's input wait over its step time, all ranks
  metrics_.append(line_json);
  if (tb_) {  // the same values and step as the metrics line (docs/watching.md)
    std::vector<tb::Scalar> s = {{"train/lr", lr},
                                 {"train/images_per_s", ips},
                                 {"step_time/total_ms", t.step * 1e3},
                                 {"step_time/data_ms", t.data * 1e3},
                                 {"step_time/compute_ms", t.compute * 1e3},
                                 {"step_time/comm_exposed_ms", t.comm_exposed * 1e3},
                                 {"step_time/optimizer_ms", t.optimizer * 1e3}};
    if (opt_.sync_bn) s.push_back({"step_time/bn_sync_ms", t.bn_sync * 1e3});
    if (!all_skipped) s.insert(s.begin(), {"train/loss", last_loss_});
    tb_->scalars(step + 1, s);
  }
  loss_since_log_ = 0;
  samples_since_log_ = 0;
  count_since_log_ = 0;
  data_since_log_ = step_since_log_ = 0;
}

// Exact distributed evaluation: every test sample counted once, whatever the world size;
// the numbers are the task's (nn/task.hpp), from sums added over ranks.
Trainer::EvalResult Trainer::evaluate() {
  eval_->rewind();
  const int64_t outputs = model_->classes() * task_->pixels();  // per sample (segmentation: C×H×W)
  eval_sums_.assign(task_->eval_sum_count(), 0.0);
  while (eval_->next(eval_batch_, opt_.batch_size)) {
    const int64_t n = eval_batch_.count;
    logits_.resize(static_cast<size_t>(n * outputs));
    model_->forward_eval(eval_batch_.images.data(), n, logits_.data());
    task_->eval_accumulate(logits_.data(), batch_targets(*task_, eval_batch_), n, eval_sums_);
  }
  control_.allreduce(eval_sums_.data(), eval_sums_.size(), ReduceOp::sum, "the evaluation allreduce");
  EvalResult r;
  r.samples = static_cast<int64_t>(eval_sums_[0]);
  if (r.samples != eval_->samples())
    internal_error("evaluation counted ", r.samples, " samples but the test split has ", eval_->samples());
  r.metrics = task_->eval_metrics(eval_sums_);
  r.loss = task_->eval_loss(eval_sums_);
  for (const auto& [name, v] : r.metrics)
    if (name == "accuracy") r.accuracy = v;
  return r;
}

void Trainer::evaluate_epoch(int64_t step) {
  last_eval_ = evaluate();
  evaluated_ = true;
  const double elapsed = seconds_since(start_);
  // "test accuracy 0.9012 loss 0.2811", "test rmse 0.0311 mae 0.0242 loss 0.0009", "test miou
  // 0.8123 pixel_accuracy 0.9410 loss 0.1712": the task's numbers (per-target ones, rmse_0 …,
  // only in the files).
  std::string text;
  char v[48];
  for (const auto& [name, value] : last_eval_.metrics)
    if (const size_t u = name.rfind('_');
        u == std::string::npos || name.find_first_not_of("0123456789", u + 1) != std::string::npos) {
      std::snprintf(v, sizeof(v), " %.4f", value);
      text += " " + name + v;
    }
  log_info("epoch " + std::to_string(batch_.epoch + 1) + " test" + text + " (" + std::to_string(last_eval_.samples) +
           " samples)");
  const auto& [headline, headline_value] = last_eval_.metrics.front();
  accuracy_curve_.push_back({{"epoch", batch_.epoch + 1}, {"step", step + 1}, {headline, headline_value}, {"seconds", elapsed}});
  nlohmann::json event = {{"event", "eval"}, {"step", step + 1}, {"epoch", batch_.epoch + 1}};
  std::vector<tb::Scalar> scalars;
  for (const auto& [name, value] : last_eval_.metrics) {
    event["test_" + name] = value;
    scalars.push_back({"eval/" + name, value});
  }
  event["elapsed_s"] = elapsed;
  metrics_.append(event);
  if (tb_) tb_->scalars(step + 1, scalars);
}

// Rank 0 writes; every rank learns the outcome, so a failed write ends all ranks alike.
void Trainer::save_checkpoint(int64_t steps_done) {
  CheckpointMeta m;
  m.step = steps_done;
  m.epoch = batch_.epoch;  // the sampler position of the next batch
  m.step_in_epoch = batch_.step_in_epoch + 1;
  if (m.step_in_epoch >= steps_per_epoch_) {
    ++m.epoch;
    m.step_in_epoch = 0;
  }
  m.world_size = world_;
  m.global_batch = global_batch_;
  m.seed = opt_.seed;
  m.model = model_->name();
  m.model_spec = model_->spec();
  m.optimizer = optimizer_->kind();
  m.optimizer_steps = optimizer_->steps_taken();
  m.config_digest = digest_;
  m.config = config_.text();
  m.tuning = model_->tuning();  // rank 0's convolution algorithms, which every rank runs (prepare_model)
  m.input_channels = train_->shape().channels;
  m.input_height = train_->shape().height;
  m.input_width = train_->shape().width;
  m.input_depth = train_->shape().depth;
  m.classes = train_->classes();
  std::string message;
  if (rank_ == 0) {
    try {
      const auto t0 = Clock::now();
      model_->release_step_memory();  // the checkpoint image takes their place
      const std::string path = write_checkpoint(ckpt_dir_, *model_, *optimizer_, m, opt_.keep_checkpoints);
      std::error_code ec;  // size and time: what a stop signal's grace must cover (docs/checkpoints.md)
      char took[64];
      std::snprintf(took, sizeof(took), " (%.0f MB in %.1f s)", std::filesystem::file_size(path, ec) / 1e6,
                    seconds_since(t0));
      log_info("checkpoint " + path + took);
    } catch (const UserError& e) {
      message = e.what();
    } catch (const std::bad_alloc&) {  // the in-memory image is about 2-3x the model
      message = out_of_memory_message("building checkpoint step " + std::to_string(m.step) + " in memory (about " +
                                          format_bytes(3 * model_->param_count() * sizeof(float)) + ")",
                                      0, "run with more memory per rank; the previous checkpoint is untouched");
    }
  }
  message = control_.broadcast_string(message, 0, "the checkpoint broadcast");
  if (!message.empty()) fail_collective(rank_, message);
}

// Timings over steps after warm-up; the breakdown averaged over ranks.
void Trainer::summarize(const std::string& ended) {
  if (nothing_to_train_) return;
  const bool finished = ended == "finished";
  const int64_t steps_run = finished ? total_steps_ : next_step_;
  if (!begun_) begin();
  set_status_line("");  // the progress bar gives way to the summary
  drain();              // a device model: the last steps' device times (normally done by the last step)
  read_marks(nullptr);
  Timings tm;
  tm.wall_s = seconds_since(start_);
  if (opt_.check_replicas > 0) log_info("replicas identical at all " + std::to_string(replica_checks_) + " check(s)");

  const size_t skip = std::min(times_.size() ? times_.size() - 1 : 0,
                               static_cast<size_t>(warmup_steps_to_skip(static_cast<long long>(times_.size()))));
  StepPartSums sums;
  std::vector<double> data, compute, comm_exposed, optimizer, bn_sync, comm_total;
  for (size_t i = skip; i < times_.size(); ++i) {
    const StepTimes& t = times_[i];
    tm.worst_step_s.push_back(t.step);
    sums.parts.data += t.data;
    sums.parts.compute += t.compute;
    sums.parts.comm_exposed += t.comm_exposed;
    sums.parts.optimizer += t.optimizer;
    sums.parts.bn_sync += t.bn_sync;
    sums.steps += 1;
    data.push_back(t.data);
    compute.push_back(t.compute);
    comm_exposed.push_back(t.comm_exposed);
    optimizer.push_back(t.optimizer);
    bn_sync.push_back(t.bn_sync);
    if (t.comm_total >= 0) {
      comm_total.push_back(t.comm_total);
      sums.parts.comm_total += t.comm_total;
    }
  }
  // images/s per step uses the slowest rank's step time (the global batch completes then).
  if (!tm.worst_step_s.empty())
    control_.allreduce(tm.worst_step_s.data(), tm.worst_step_s.size(), ReduceOp::max, "the timing summary");
  control_.allreduce_fields(sums, ReduceOp::sum, "the timing summary");
  // Medians of the breakdown (per rank over timed steps, then the largest over ranks):
  // the means above include rare long waits (another process taking a rank's core).
  StepParts medians{spread_of(data).median,         spread_of(compute).median,
                    spread_of(comm_exposed).median, spread_of(optimizer).median,
                    spread_of(bn_sync).median,      comm_total.empty() ? -1.0 : spread_of(comm_total).median};
  tm.median_max = medians;
  control_.allreduce_fields(tm.median_max, ReduceOp::max, "the timing summary");
  // Every rank has a device model or none (the communicator decides for all), so every
  // rank takes part in this sum or none does.
  if (model_->on_device()) {
    tm.gpu = model_->device_paths();
    if (!tm.gpu) internal_error("a device model without device paths (Model::device_paths)");
    struct {
      double peak, used;
    } mem{tm.gpu->peak_memory_gib, tm.gpu->device_used_gib};
    control_.allreduce_fields(mem, ReduceOp::max, "the device memory summary");
    tm.gpu->peak_memory_gib = mem.peak;
    tm.gpu->device_used_gib = mem.used;
  }
  // Each rank's median compute time: a straggler (a slower core, a noisy node) shows here,
  // and every other rank waits for it at each step.
  tm.compute_median_per_rank = control_.gather(medians.compute, 0, "the timing summary");
  std::vector<double> ips;
  for (double s : tm.worst_step_s) ips.push_back(s > 0 ? static_cast<double>(global_batch_) / s : 0);
  tm.step = spread_of(tm.worst_step_s);
  tm.images_per_s = spread_of(ips);
  const double n = sums.steps > 0 ? sums.steps : 1;
  tm.mean = {sums.parts.data / n,      sums.parts.compute / n, sums.parts.comm_exposed / n,
             sums.parts.optimizer / n, sums.parts.bn_sync / n, sums.parts.comm_total / n};
  log_info(std::string(finished ? "done: " : "stopped: ") + std::to_string(steps_run) + " steps in " +
           format_duration(tm.wall_s) + ", median " + format_rate(tm.images_per_s.median) +
           (task_->kind() == TaskKind::classification ? " img/s" : " samples/s") + ", step " +
           std::to_string(tm.step.median * 1e3) + " ms (data " + std::to_string(tm.mean.data * 1e3) + ", compute " +
           std::to_string(tm.mean.compute * 1e3) + ", comm exposed " + std::to_string(tm.mean.comm_exposed * 1e3) +
           ", optimizer " + std::to_string(tm.mean.optimizer * 1e3) + " ms" +
           (opt_.sync_bn ? "; of comm exposed, --sync-bn sums " + std::to_string(tm.mean.bn_sync * 1e3) + " ms"
                         : std::string()) +
           ")" +
           (evaluated_ ? ", test " + last_eval_.metrics.front().first + " " + std::to_string(last_eval_.metrics.front().second)
                       : std::string()));

  const double data_share = tm.data_share();
  if (data_share > kInputBoundShare)
    log_warn("input-bound: the training loop waited for input " + std::to_string(std::lround(100 * data_share)) +
             "% of each step (data " + fixed1(tm.mean.data * 1e3) + " of " + fixed1(tm.step.mean * 1e3) +
             " ms): raise --data-threads (now " + std::to_string(opt_.data.data_threads) + ")" +
             (opt_.data.synthetic ? std::string()
                                  : ", use --cache memory (no reads after the first epoch), or prep smaller images; "
                                    "`cnnscale data-bench --data " +
                                        opt_.data.dir + " --augment " +
                                        (opt_.data.augment.empty() ? std::string("none") : opt_.data.augment) +
                                        " --data-threads N` measures the reader alone (docs/data.md)"));
  if (rank_ == 0 && run_end_.enabled()) {
    run_end_.write(ended, run_record(tm, steps_run), true);
    if (finished) log_info("wrote " + opt_.run_dir + "/run.json");
  }
}

// run.json: what `cnnscale report` reads (docs/report.md).
// The run's shape, identity and input: what every run.json carries, with timings or
// without (a run that ended before its summary, train/run_end.hpp).
nlohmann::json Trainer::run_shape() const {
  const bool on_gpu = comm_.device_buffers();
  nlohmann::json j;
  j["world_size"] = world_;
  j["nodes"] = ctx_.num_nodes;
  j["ranks_per_node"] = ctx_.num_nodes > 0 ? world_ / ctx_.num_nodes : world_;
  j["backend"] = backend_name(comm_.backend());
  j["device"] = on_gpu ? ctx_.device_label : std::string("cpu");
  j["model"] = model_->name();
  j["model_spec"] = model_->spec();
  j["parameters"] = model_->param_count();
  j["precision"] = precision_name(opt_.precision);
  // TF32 allowed for fp32 convolutions and matmuls (GPU model only; bf16 has none left in fp32)
  j["tf32"] = on_gpu && opt_.model_options.tf32 && opt_.precision == Precision::fp32;
  // Convolution algorithms timed by cuDNN (--cudnn-benchmark), else its heuristic pick (GPU model only)
  j["cudnn_benchmark"] = on_gpu && opt_.model_options.cudnn_benchmark;
  j["threads_per_rank"] = opt_.threads;
  j["data_threads"] = opt_.data.data_threads;  // `cnnscale report --data-bench` compares it with data-bench's
  j["batch_per_rank"] = opt_.batch_size;
  j["global_batch"] = global_batch_;
  j["train_samples"] = train_->samples();  // the train split: `cnnscale report --epochs` budgets from it
  j["optimizer"] = opt_.optimizer.kind;
  j["seed"] = opt_.seed;
  j["data"] = opt_.data.synthetic ? std::string("synthetic") : opt_.data.dir;
  j["launcher"] = ctx_.launch.name;
  j["resumed_from"] = resumed_from_.empty() ? nlohmann::json(nullptr) : nlohmann::json(resumed_from_);
  j["config_digest"] = digest_;
  j["config"] = config_.to_json();
  if (!ctx_.launch.job_id.empty()) {
    const char* nl = std::getenv("SLURM_JOB_NODELIST");
    if (!nl) nl = std::getenv("SLURM_NODELIST");
    j["slurm"] = {{"job_id", ctx_.launch.job_id}, {"nodelist", nl ? nl : ""}};
  }
  return j;
}

nlohmann::json Trainer::run_record(const Timings& tm, int64_t steps_run) const {
  nlohmann::json j = run_shape();
  j["steps"] = steps_run;  // total_steps_ unless the run stopped early (then also "planned_steps")
  if (steps_run != total_steps_) j["planned_steps"] = total_steps_;
  j["epochs"] = static_cast<double>(steps_run) / static_cast<double>(steps_per_epoch_);
  j["timed_steps"] = tm.worst_step_s.size();
  j["images_per_s"] = tm.images_per_s.median;
  j["images_per_s_p10"] = tm.images_per_s.p10;
  j["images_per_s_p90"] = tm.images_per_s.p90;
  j["step_ms"] = {{"median", tm.step.median * 1e3},
                  {"p10", tm.step.p10 * 1e3},
                  {"p90", tm.step.p90 * 1e3},
                  {"mean", tm.step.mean * 1e3}};
  j["data_wait_share"] = tm.data_share();  // > 0.05: input-bound
  j["breakdown_ms"] = {{"data", tm.mean.data * 1e3},
                       {"compute", tm.mean.compute * 1e3},
                       {"comm_exposed", tm.mean.comm_exposed * 1e3},
                       {"optimizer", tm.mean.optimizer * 1e3}};
  j["breakdown_median_ms"] = {{"data", tm.median_max.data * 1e3},
                              {"compute", tm.median_max.compute * 1e3},
                              {"comm_exposed", tm.median_max.comm_exposed * 1e3},
                              {"optimizer", tm.median_max.optimizer * 1e3}};
  // The gradient sum: its whole time vs the part the step waited for (the rest was hidden
  // behind backward). Medians as breakdown_median_ms (each rank's, then the largest).
  if (tm.median_max.comm_total >= 0) {
    const double total = tm.median_max.comm_total * 1e3, exposed = tm.median_max.comm_exposed * 1e3;
    j["comm_ms"] = {{"total_median", total},
                    {"exposed_median", exposed},
                    {"hidden_fraction", total > 0 ? std::max(0.0, 1.0 - exposed / total) : 0.0},
                    {"total_mean", tm.mean.comm_total * 1e3},
                    {"exposed_mean", tm.mean.comm_exposed * 1e3}};
  } else {
    j["comm_ms"] = nullptr;
  }
  j["compute_median_ms_per_rank"] = nlohmann::json::array();
  for (double c : tm.compute_median_per_rank) j["compute_median_ms_per_rank"].push_back(c * 1e3);
  j["grad_bytes"] = sync_->bytes_per_step();
  j["buckets"] = sync_->buckets().size();
  j["grad_sum"] = sync_->method();
  j["sync_bn"] = opt_.sync_bn;
  // --sync-bn: the waits in the batch-norm statistics sums, per step (already counted in
  // breakdown comm_exposed, and not in compute).
  if (opt_.sync_bn) j["bn_sync_ms"] = {{"mean", tm.mean.bn_sync * 1e3}, {"median", tm.median_max.bn_sync * 1e3}};
  j["train_loss"] = std::isfinite(last_loss_) ? nlohmann::json(last_loss_) : nlohmann::json(nullptr);
  j["task"] = {{"kind", task_name(task_->kind())}, {"loss", task_->describe()}, {"outputs", task_->outputs()}};
  // An accuracy per sample (classes; multilabel: per label); segmentation's pixel accuracy and
  // mean IoU are in test_metrics.
  const bool accuracy = task_->kind() == TaskKind::classification || task_->kind() == TaskKind::multilabel;
  j["test_accuracy"] = evaluated_ && accuracy ? nlohmann::json(last_eval_.accuracy) : nlohmann::json(nullptr);
  j["test_metrics"] = nlohmann::json::object();
  if (evaluated_)
    for (const auto& [name, value] : last_eval_.metrics) j["test_metrics"][name] = value;
  j["accuracy_per_epoch"] = accuracy_curve_;
  j["wall_s"] = tm.wall_s;
  j["lr"] = {{"base", schedule_->base()},
             {"peak", schedule_->peak()},
             {"scaling", opt_.lr.scaling},
             {"warmup_epochs", opt_.lr.warmup_epochs},
             {"decay", opt_.lr.decay}};
  j["skipped_steps"] = skipped_steps_;
  j["metrics_lines_lost"] = metrics_.lines_lost();
  if (!timeline_written_.empty()) j["timeline"] = timeline_written_;  // --timeline's file (docs/watching.md)
  j["tensorboard"] = tb_ ? nlohmann::json(tb_->path()) : nlohmann::json(nullptr);
  j["tensorboard_records_lost"] = tb_ ? tb_->records_lost() : 0;
  // A device model only (docs/gpu.md "What run.json says about the GPU"); older run.json
  // files and host runs have none.
  if (tm.gpu)
    j["gpu"] = {{"bn", tm.gpu->bn},
                {"nhwc_store32", tm.gpu->nhwc_store32},
                {"bf16_store", tm.gpu->bf16_store},
                {"tf32_nhwc", tm.gpu->tf32_nhwc},
                {"cuda_graph", tm.gpu->cuda_graph_steps > 0},
                {"cuda_graph_steps", tm.gpu->cuda_graph_steps},
                {"cuda_graph_note", tm.gpu->cuda_graph_note},
                {"peak_memory_gib", tm.gpu->peak_memory_gib},
                {"device_used_gib", tm.gpu->device_used_gib >= 0 ? nlohmann::json(tm.gpu->device_used_gib)
                                                                 : nlohmann::json(nullptr)},
                // How the gradients travel between GPU ranks: "device" (NCCL, on the GPUs) or "host"
                // (--device cuda over MPI/Gloo, staged through pinned host memory), and how many
                // local ranks share rank 0's GPU (> 1 only over the host plane): a scaling study
                // must not read 2 ranks on one GPU as 2 GPUs.
                {"data_plane", comm_.sums_on_stream() ? "device" : "host"},
                {"ranks_per_gpu", ctx_.gpu_sharing}};
  return j;
}

int Trainer::run() {
  setup();
  resume();
  if (nothing_to_train_) return 0;
  begin();
  try {
    while (!done())
      if (step().stopped) {
        // Every rank agreed at this boundary: the timings so far, and how it ended.
        summarize("signal " + std::string(stop_signal_name(stop_signal_received())) + " at step " +
                  std::to_string(next_step_));
        return kExitCheckpointedOnSignal;
      }
  } catch (const std::exception& e) {  // rank 0's record of it; main() reports it
    if (run_end_.enabled()) {
      std::string why = e.what();
      if (dynamic_cast<const InternalError*>(&e)) why = "internal error: " + why;
      run_end_.write("failed after step " + std::to_string(next_step_) + ": " + why, nullptr, true);
    }
    throw;
  }
  summarize();
  if (tb_ && tb_->records_lost() > 0)
    log_warn(std::to_string(tb_->records_lost()) + " TensorBoard record(s) could not be written to " + tb_->path() +
             "; run.json counts them (tensorboard_records_lost)");
  if (metrics_.lines_lost() > 0) {  // rank 0's log; its status makes the job's non-zero
    print_error(std::to_string(metrics_.lines_lost()) + " of " +
                std::to_string(metrics_.lines_lost() + metrics_.lines_written()) + " lines could not be written to " +
                metrics_.path() + " (" + metrics_.first_error() + "); training finished and run.json counts them " +
                "(metrics_lines_lost), but the metrics are incomplete. Free space on that file system");
    return kUserErrorStatus;
  }
  return 0;
}

}  // namespace cnnscale
