// trainer.cpp — see trainer.hpp. The loop, per step:
//   data (wait for the prefetched slice of the global batch)
//   compute (forward + backward; bucket allreduces start from the grad-ready hook)
//   comm_exposed (wait for the buckets still in flight)
//   optimizer (update the flat parameters)
// and, at log intervals, one allreduce of the loss for the progress line.
#include "train/trainer.hpp"

#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/make_communicator.hpp"
#include "comm/watchdog.hpp"
#include "data/open_source.hpp"
#include "launch/bootstrap.hpp"
#include "launch/mpi_check.hpp"
#include "nn/host_params.hpp"
#include "nn/model.hpp"
#include "train/checkpoint.hpp"
#include "train/grad_sync.hpp"
#include "train/lr_schedule.hpp"
#include "train/optimizer.hpp"
#include "train/run_dir.hpp"
#include "train/run_files.hpp"
#include "train/step_stats.hpp"
#include "train/stop_signal.hpp"
#include "util/atomic_file.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/memory.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  long t = std::lround(s);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

struct EvalResult {
  double accuracy = 0, loss = 0;
  int64_t samples = 0;
};

// Exact distributed evaluation: every test sample counted once, whatever the world size.
EvalResult evaluate(Model& model, EvalSource& eval, int64_t max_batch, Batch& scratch, std::vector<float>& logits,
                    Watchdog& wd) {
  eval.rewind();
  double local[3] = {0, 0, 0};  // correct, samples, loss sum
  const int classes = model.classes();
  while (eval.next(scratch, max_batch)) {
    const int64_t n = scratch.count;
    logits.resize(static_cast<size_t>(n * classes));
    model.forward_eval(scratch.images.data(), n, logits.data());
    for (int64_t i = 0; i < n; ++i) {
      const float* z = &logits[static_cast<size_t>(i * classes)];
      int best = 0;
      float mx = z[0];
      for (int c = 1; c < classes; ++c)
        if (z[c] > mx) mx = z[c], best = c;
      double se = 0;
      for (int c = 0; c < classes; ++c) se += std::exp(static_cast<double>(z[c] - mx));
      local[2] += std::log(se) - static_cast<double>(z[scratch.labels[static_cast<size_t>(i)]] - mx);
      local[0] += best == scratch.labels[static_cast<size_t>(i)];
    }
    local[1] += static_cast<double>(n);
  }
  double global[3];
  {
    Watchdog::Scope waiting(wd, "the evaluation allreduce");
    mpiCheck(MPI_Allreduce(local, global, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  }
  EvalResult r;
  r.samples = static_cast<int64_t>(global[1]);
  if (r.samples != eval.samples())
    abort_job("evaluation counted " + std::to_string(r.samples) + " samples but the test split has " +
              std::to_string(eval.samples()) + " (internal error in the evaluation split)");
  r.accuracy = r.samples ? global[0] / global[1] : 0;
  r.loss = r.samples ? global[2] / global[1] : 0;
  return r;
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::fp32;
  if (s == "bf16") return Precision::bf16;
  fail("--precision ", s, " is not supported; use fp32 or bf16");
}

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

// Collective: true when every rank's parameters hash the same.
bool replicas_identical(Model& m, std::vector<float>& scratch) {
  scratch.resize(m.param_count());
  copy_params_to_host(m, scratch.data());
  const uint64_t h = hash_params(scratch.data(), scratch.size());
  uint64_t lo = 0, hi = 0;
  mpiCheck(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  mpiCheck(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  return lo == hi;
}

// Rank 0 writes; every rank learns the outcome, so a failed write ends all ranks alike.
void save_checkpoint(const std::string& dir, Model& model, Optimizer& opt, const CheckpointMeta& meta, int keep,
                     int rank, Watchdog& wd) {
  char message[512] = {0};
  if (rank == 0) {
    try {
      const auto t0 = Clock::now();
      const std::string path = write_checkpoint(dir, model, opt, meta, keep);
      std::error_code ec;  // size and time: what a stop signal's grace must cover (docs/checkpoints.md)
      char took[64];
      std::snprintf(took, sizeof(took), " (%.0f MB in %.1f s)", std::filesystem::file_size(path, ec) / 1e6,
                    seconds_since(t0));
      log_info("checkpoint " + path + took);
    } catch (const UserError& e) {
      std::snprintf(message, sizeof(message), "%s", e.what());
    } catch (const std::bad_alloc&) {  // the in-memory image is about 2-3x the model
      std::snprintf(message, sizeof(message), "%s",
                    out_of_memory_message("building checkpoint step " + std::to_string(meta.step) +
                                              " in memory (about " +
                                              format_bytes(3 * model.param_count() * sizeof(float)) + ")",
                                          0, "run with more memory per rank; the previous checkpoint is untouched")
                        .c_str());
    }
  }
  {
    Watchdog::Scope waiting(wd, "the checkpoint broadcast");
    mpiCheck(MPI_Bcast(message, sizeof(message), MPI_CHAR, 0, MPI_COMM_WORLD));
  }
  if (message[0]) fail_collective(rank, message);
}

struct ResumePoint {
  bool resumed = false;
  CheckpointMeta meta;
  std::string path;
};

// Rank 0 finds and validates the checkpoint (damaged newest ones are reported and
// skipped under --resume auto), then broadcasts parameters, optimiser state and position.
ResumePoint resume_if_asked(const TrainOptions& opt, Model& model, Optimizer& optimizer, int rank,
                            const RunConfig& config) {
  ResumePoint rp;
  if (opt.resume == "none") return rp;
  const bool explicit_path = opt.resume != "auto";
  if (!explicit_path && opt.run_dir.empty()) return rp;
  char error[1024] = {0};
  int64_t pos[7] = {0, 0, 0, 0, 0, 0, 0};  // found, step, epoch, step_in_epoch, world, global_batch, opt_steps
  char path[512] = {0};
  if (rank == 0) {
    std::vector<std::string> candidates =
        explicit_path ? std::vector<std::string>{opt.resume} : checkpoint_candidates(opt.run_dir + "/checkpoints");
    std::string skipped;
    for (const auto& c : candidates) {
      try {
        rp.meta = read_checkpoint(c, model, optimizer);
        rp.path = c;
        rp.resumed = true;
        if (explicit_path) warn_if_other_config(c, rp.meta, config);
        break;
      } catch (const UserError& e) {
        if (explicit_path) {
          std::snprintf(error, sizeof(error), "--resume %s: %s", c.c_str(), e.what());
          break;
        }
        log_warn(std::string("skipping checkpoint: ") + e.what());
        skipped += skipped.empty() ? c : ", " + c;
        // A model mismatch is not damage: every older checkpoint has the same model.
        if (std::string(e.what()).find("configured model") != std::string::npos) {
          std::snprintf(error, sizeof(error), "%s", e.what());
          break;
        }
      }
    }
    if (!rp.resumed && !skipped.empty() && !error[0])
      std::snprintf(error, sizeof(error),
                    "no usable checkpoint in %s/checkpoints (damaged: %s); remove the damaged files or pass "
                    "--resume none to start over",
                    opt.run_dir.c_str(), skipped.c_str());
    if (rp.resumed) {
      pos[0] = 1;
      pos[1] = rp.meta.step;
      pos[2] = rp.meta.epoch;
      pos[3] = rp.meta.step_in_epoch;
      pos[4] = rp.meta.world_size;
      pos[5] = rp.meta.global_batch;
      pos[6] = rp.meta.optimizer_steps;
      std::snprintf(path, sizeof(path), "%s", rp.path.c_str());
    }
  }
  mpiCheck(MPI_Bcast(error, sizeof(error), MPI_CHAR, 0, MPI_COMM_WORLD));
  if (error[0]) fail_collective(rank, error);
  mpiCheck(MPI_Bcast(pos, 7, MPI_INT64_T, 0, MPI_COMM_WORLD));
  if (!pos[0]) return rp;
  mpiCheck(MPI_Bcast(path, sizeof(path), MPI_CHAR, 0, MPI_COMM_WORLD));
  rp.resumed = true;
  rp.path = path;
  rp.meta.step = pos[1];
  rp.meta.epoch = static_cast<int>(pos[2]);
  rp.meta.step_in_epoch = pos[3];
  rp.meta.world_size = static_cast<int>(pos[4]);
  rp.meta.global_batch = pos[5];
  rp.meta.optimizer_steps = pos[6];
  // Over MPI on host copies: the same path for host and device models.
  std::vector<float> host(model.param_count());
  if (rank == 0) copy_params_to_host(model, host.data());
  mpiCheck(MPI_Bcast(host.data(), static_cast<int>(host.size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
  if (rank != 0) copy_params_from_host(model, host.data());
  for (auto& [name, buf] : optimizer.state())
    mpiCheck(MPI_Bcast(buf->data(), static_cast<int>(buf->size()), MPI_FLOAT, 0, MPI_COMM_WORLD));
  optimizer.set_steps_taken(rp.meta.optimizer_steps);
  return rp;
}

}  // namespace

int run_training(const TrainOptions& opt) {
  // ---- validate what needs no other rank ----
  const Precision precision = parse_precision(opt.precision);
  validate_lr_options(opt.lr);
  if (opt.batch_size < 1) fail("--batch-size must be at least 1 (it is per rank)");
  if (opt.epochs < 1 && opt.max_steps <= 0) fail("--epochs must be at least 1 (or give --max-steps)");
  if (opt.data_dir.empty() && !opt.synthetic)
    fail("no input: give --data DIR (a `cnnscale prep` output) or --synthetic");
  if (!opt.data_dir.empty() && opt.synthetic) fail("--data and --synthetic exclude each other; pick one");
  if (opt.bucket_mb <= 0 || opt.first_bucket_mb <= 0) fail("--bucket-mb must be positive");
  if (opt.log_every < 1) fail("--log-every must be at least 1");
  if (opt.checkpoint_every < 0) fail("--checkpoint-every must not be negative");
  if (opt.keep_checkpoints < 1) fail("--keep-checkpoints must be at least 1");
  if (!(opt.collective_timeout > 0)) fail("--collective-timeout must be positive (seconds)");
  if (opt.on_nan != "stop" && opt.on_nan != "skip-step") fail("--on-nan ", opt.on_nan, " is not supported; use stop or skip-step");
  Backend requested = parse_backend(opt.backend);
  install_stop_signal_handlers();  // from here a SIGTERM/SIGUSR1 waits for the next step boundary

  // ---- who am I ----
  BootstrapOptions bo;
  bo.use_gpu = requested != Backend::mpi;
  bo.allow_gpu_sharing = opt.allow_gpu_sharing;
  ProcessContext ctx = bootstrap(bo);
  // NCCL (and the cuDNN/cuBLAS model) when every rank has a GPU, else MPI and oneDNN.
  auto comm = make_communicator(requested, ctx);
  const bool on_gpu = comm->device_buffers();
  const int rank = ctx.rank, world = ctx.size;
  const int64_t global_batch = opt.batch_size * world;
  RunDir run_dir(opt, rank, ctx.host, ctx.launch.job_id);  // lock, --resume none / --force-new rules

  // ---- data ----
  DataOptions dopt;
  dopt.dir = opt.data_dir;
  dopt.synthetic = opt.synthetic;
  dopt.synthetic_samples = opt.synthetic_samples;
  dopt.batch_per_rank = opt.batch_size;
  dopt.seed = opt.seed;
  dopt.drop_last = opt.drop_last;
  dopt.prefetch = opt.prefetch;
  dopt.cache = opt.cache;
  DataSources sources = open_data(dopt, rank, world);  // reads dataset.json once
  auto train = std::move(sources.train);
  std::unique_ptr<EvalSource> eval;
  if (opt.evaluate && !opt.synthetic) eval = std::move(sources.eval);

  // ---- model ----
  nn::set_threads(opt.threads);
  std::unique_ptr<Model> model = make_model(opt.model, train->shape(), train->classes(), on_gpu ? ctx.device : -1);
  // Device models enqueue work on their own stream; NCCL must wait for it (no-ops on the CPU).
  auto comm_after_model = [&]() { model->order_before(comm->stream()); };
  auto wait_for_model = [&]() { model->synchronize(); };
  bool has_buffers = false;
  std::vector<size_t> param_ends;
  for (const auto& p : model->params()) {
    param_ends.push_back(p.offset + p.numel);
    has_buffers |= !p.trainable;
  }
  std::sort(param_ends.begin(), param_ends.end());
  std::vector<Bucket> buckets = plan_buckets(param_ends, static_cast<size_t>(opt.first_bucket_mb * 1024 * 1024),
                                             static_cast<size_t>(opt.bucket_mb * 1024 * 1024));
  // Ranks of a node sum gradients in node-shared memory when they can (grad_sync.hpp):
  // the model then writes its gradients straight into the shared window.
  std::string no_shm;
  std::unique_ptr<ShmAllreduce> shm =
      model->on_device() ? nullptr : make_shm_allreduce(*comm, model->param_count(), buckets, &no_shm);
  if (shm) {  // dropping it is collective (MPI_Win_free): agree first
    int adopted = model->adopt_grad_storage(shm->buffer()) ? 1 : 0, all = 0;
    mpiCheck(MPI_Allreduce(&adopted, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all) {
      if (adopted) fail("internal: some ranks' models could not use node-shared gradient memory");
      shm.reset();
    }
  }
  model->prepare(opt.batch_size, precision);
  model->init_params(opt.seed);
  comm_after_model();
  comm->broadcast(model->param_data(), model->param_count() * sizeof(float), 0);  // rank 0's state everywhere
  std::vector<float> host_scratch;

  const int64_t steps_per_epoch = train->steps_per_epoch();
  int64_t total_steps = steps_per_epoch * std::max(1, opt.epochs);
  if (opt.max_steps > 0) total_steps = std::min<int64_t>(total_steps, opt.max_steps);
  if (opt.max_steps > 0 && opt.epochs <= 1 && opt.max_steps > total_steps) total_steps = opt.max_steps;
  const int epochs_planned = static_cast<int>((total_steps + steps_per_epoch - 1) / steps_per_epoch);

  std::unique_ptr<Optimizer> optimizer = make_optimizer(opt.optimizer, *model);  // CUDA kernels for a device model
  LrSchedule schedule(opt.lr, global_batch, steps_per_epoch, total_steps);
  GradSync sync(*comm, model->grad_data(), std::move(buckets), DType::f32, shm.get());

  // ---- resume ----
  const RunConfig config =
      make_run_config(opt, model->spec(),
                      sources.dataset ? dataset_fingerprint(*sources.dataset)
                                      : synthetic_fingerprint(opt.synthetic_samples, train->shape(), train->classes()));
  run_dir.check_identity(config);
  ResumePoint rp = resume_if_asked(opt, *model, *optimizer, rank, config);
  int64_t first_step = 0;
  int start_epoch = 0;
  int64_t start_in_epoch = 0;
  if (rp.resumed) {
    first_step = rp.meta.step;
    start_epoch = rp.meta.epoch;
    start_in_epoch = rp.meta.step_in_epoch;
    if (rp.meta.global_batch != global_batch) {
      // Same samples consumed, new batch size: continue at the same point of the epoch.
      start_in_epoch = rp.meta.step_in_epoch * rp.meta.global_batch / global_batch;
      log_warn("resuming a run with global batch " + std::to_string(rp.meta.global_batch) + " at global batch " +
               std::to_string(global_batch) + ": from here on the batches, the step count per epoch and the " +
               "learning-rate schedule differ from the original run (it continues at the same sample position)");
    }
    log_info("resumed from " + rp.path + " at step " + std::to_string(first_step) + " (epoch " +
             std::to_string(start_epoch + 1) + ", written by " + std::to_string(rp.meta.world_size) + " rank(s))");
    if (start_in_epoch >= steps_per_epoch) {
      ++start_epoch;
      start_in_epoch = 0;
    }
  }
  if (run_dir.finished(rp.resumed, rp.meta.step, total_steps)) return 0;  // run.json stays as it is
  const std::string ckpt_dir = opt.run_dir.empty() ? std::string() : opt.run_dir + "/checkpoints";
  const std::string digest = config.digest();
  auto make_meta = [&](int64_t steps_done, int next_epoch, int64_t next_in_epoch) {
    CheckpointMeta m;
    m.step = steps_done;
    m.epoch = next_epoch;
    m.step_in_epoch = next_in_epoch;
    m.world_size = world;
    m.global_batch = global_batch;
    m.seed = opt.seed;
    m.model = model->name();
    m.model_spec = model->spec();
    m.optimizer = optimizer->kind();
    m.optimizer_steps = optimizer->steps_taken();
    m.config_digest = digest;
    m.config = config.text();
    return m;
  };
  Watchdog wd;
  if (world > 1 && !wd.start(MPI_COMM_WORLD, opt.collective_timeout, ctx.host))
    log_warn("the MPI library gives less than MPI_THREAD_MULTIPLE, so the --collective-timeout watchdog is off");

  MetricsLog metrics;
  if (rank == 0 && run_dir.enabled()) {
    metrics.open(opt.run_dir);
    metrics.append(run_dir.start_record(first_step, world, global_batch, rp.path, digest));
  }
  if (rank == 0 && run_dir.enabled())
    for (const std::string& d : {opt.run_dir, ckpt_dir})
      for (const std::string& f : remove_stale_temporaries(d))
        log_info("removed " + d + "/" + f + " (left by a writer on this host that no longer runs)");
  log_info("cnnscale train: " + std::to_string(world) + " rank(s) on " + std::to_string(ctx.num_nodes) +
           " node(s), backend " + comm->backend() + ", model " + model->name() + " (" +
           std::to_string(model->param_count()) + " parameters), " + opt.precision + ", batch " +
           std::to_string(opt.batch_size) + "/rank = " + std::to_string(global_batch) + " global, " +
           std::to_string(steps_per_epoch) + " steps/epoch, " + std::to_string(total_steps) + " steps, " +
           std::to_string(sync.buckets().size()) + " gradient bucket(s) summed by " + sync.method() +
           (world > 1 && !shm && !no_shm.empty() ? " (not node shared memory: " + no_shm + ")" : ""));
  if (schedule.peak() != schedule.base())
    log_info("learning rate " + std::to_string(schedule.base()) + " scaled to " + std::to_string(schedule.peak()) +
             " (" + opt.lr.scaling + ", reference batch " + std::to_string(opt.lr.reference_batch) + ")");

  // ---- loop ----
  train->seek(start_epoch, start_in_epoch);
  Batch batch, eval_batch;
  std::vector<float> logits;
  std::vector<StepTimes> times;
  times.reserve(static_cast<size_t>(total_steps));
  double loss_since_log = 0;
  int64_t samples_since_log = 0;
  double last_loss = NAN;
  nlohmann::json accuracy_curve = nlohmann::json::array();
  EvalResult last_eval;
  bool evaluated = false;
  const auto start = Clock::now();
  auto log_clock = Clock::now();
  StepContext sctx;
  sctx.seed = opt.seed;
  sctx.training = true;
  sctx.loss_scale = 1.0f / static_cast<float>(global_batch);
  const float* params_ro = model->param_data();
  (void)params_ro;

  int64_t skipped_steps = 0, replica_checks = 0;
  for (int64_t step = first_step; step < total_steps; ++step) {
    StepTimes t;
    wd.set_step(step);
    const auto t0 = Clock::now();
    train->next(batch);
    t.data = train->take_wait_seconds();
    const auto t1 = Clock::now();
    sctx.step = step;
    sctx.sample_ids = batch.sample_ids.data();
    const double loss_sum = model->forward_backward(batch.images.data(), batch.labels.data(), batch.count, sctx,
                                                    [&](size_t ready_end) {
                                                      comm_after_model();
                                                      sync.on_ready(ready_end);
                                                    });
    wait_for_model();  // a device model returns before its backward has run
    t.compute = seconds_since(t1);
    {
      Watchdog::Scope waiting(wd, "the gradient allreduce");
      t.comm_exposed = sync.finish();
    }
    const auto t3 = Clock::now();
    // One small allreduce per step: did any rank get a stop signal or a non-finite loss?
    int control[2] = {stop_signal_received() ? 1 : 0, std::isfinite(loss_sum) ? 0 : 1}, agreed[2];
    {
      Watchdog::Scope waiting(wd, "the step agreement allreduce");
      mpiCheck(MPI_Allreduce(control, agreed, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    }
    const double lr = schedule.at(step);
    if (agreed[1]) {
      if (opt.on_nan == "stop")
        fail_collective(rank, "the training loss is not finite at step ", step + 1, " (lr ", lr,
                        "); stopped without writing a checkpoint, so the last good one is untouched. Lower --lr, "
                        "check the input data, or pass --on-nan skip-step");
      ++skipped_steps;
      log_warn("non-finite loss at step " + std::to_string(step + 1) + ": update skipped (--on-nan skip-step)");
    } else {
      optimizer->step(model->param_data(), model->grad_data(), lr);
      wait_for_model();  // the CUDA optimizer runs on the model's stream
    }
    if (has_buffers && world > 1) {
      // As DDP's broadcast_buffers: batch-norm running statistics follow rank 0.
      comm_after_model();
      for (const auto& p : model->params())
        if (!p.trainable) comm->broadcast(model->param_data() + p.offset, p.numel * sizeof(float), 0);
    }
    t.optimizer = seconds_since(t3);
    if (opt.check_replicas > 0 && (step + 1) % opt.check_replicas == 0) {
      if (!replicas_identical(*model, host_scratch))
        fail_collective(rank, "ranks hold different parameters after step ", step + 1,
                        " (--check-replicas): a rank computed differently (hardware fault or a bug); "
                        "do not trust this run");
      ++replica_checks;
    }
    t.step = seconds_since(t0);
    times.push_back(t);
    if (!agreed[1]) {
      loss_since_log += loss_sum;
      samples_since_log += batch.count;
    }

    const bool epoch_end = (step + 1) % steps_per_epoch == 0 || step + 1 == total_steps;
    if ((step + 1) % opt.log_every == 0 || epoch_end) {
      double local[2] = {loss_since_log, static_cast<double>(samples_since_log)}, global[2];
      {
        Watchdog::Scope waiting(wd, "the loss allreduce");
        mpiCheck(MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
      }
      last_loss = global[1] > 0 ? global[0] / global[1] : NAN;
      if (!std::isfinite(last_loss))
        fail_collective(rank, "training loss became ", last_loss, " at step ", step + 1,
                        "; lower --lr (now ", lr, ") or check the input data");
      const double elapsed = seconds_since(start);
      const double interval = seconds_since(log_clock);
      log_clock = Clock::now();
      const double ips = interval > 0 ? global[1] / interval : 0;
      const double eta =
          elapsed / static_cast<double>(step + 1 - first_step) * static_cast<double>(total_steps - step - 1);
      char line[256];
      std::snprintf(line, sizeof(line), "epoch %d/%d step %lld/%lld loss %.4f lr %.4g %.0f img/s ETA %s",
                    batch.epoch + 1, epochs_planned, static_cast<long long>(step + 1),
                    static_cast<long long>(total_steps), last_loss, lr, ips, format_duration(eta).c_str());
      log_info(line);
      metrics.append({{"step", step + 1}, {"epoch", batch.epoch + 1}, {"loss", last_loss}, {"lr", lr},
                      {"images_per_s", ips}, {"step_ms", t.step * 1e3}, {"data_ms", t.data * 1e3},
                      {"compute_ms", t.compute * 1e3}, {"comm_exposed_ms", t.comm_exposed * 1e3},
                      {"optimizer_ms", t.optimizer * 1e3}, {"elapsed_s", elapsed}});
      loss_since_log = 0;
      samples_since_log = 0;
    }
    if (epoch_end && eval) {
      last_eval = evaluate(*model, *eval, opt.batch_size, eval_batch, logits, wd);
      evaluated = true;
      const double elapsed = seconds_since(start);
      char line[160];
      std::snprintf(line, sizeof(line), "epoch %d test accuracy %.4f loss %.4f (%lld samples)", batch.epoch + 1,
                    last_eval.accuracy, last_eval.loss, static_cast<long long>(last_eval.samples));
      log_info(line);
      accuracy_curve.push_back({{"epoch", batch.epoch + 1}, {"step", step + 1}, {"accuracy", last_eval.accuracy},
                                {"seconds", elapsed}});
      metrics.append({{"event", "eval"}, {"step", step + 1}, {"epoch", batch.epoch + 1},
                      {"test_accuracy", last_eval.accuracy}, {"test_loss", last_eval.loss}, {"elapsed_s", elapsed}});
    }
    const bool want_ckpt = !ckpt_dir.empty() && (epoch_end || agreed[0] || step + 1 == total_steps ||
                                                 (opt.checkpoint_every > 0 && (step + 1) % opt.checkpoint_every == 0));
    if (want_ckpt) {
      int next_epoch = batch.epoch;
      int64_t next_in_epoch = batch.step_in_epoch + 1;
      if (next_in_epoch >= steps_per_epoch) {
        ++next_epoch;
        next_in_epoch = 0;
      }
      save_checkpoint(ckpt_dir, *model, *optimizer, make_meta(step + 1, next_epoch, next_in_epoch),
                      opt.keep_checkpoints, rank, wd);
    }
    if (agreed[0]) {
      log_info("stop signal received: checkpointed at step " + std::to_string(step + 1) +
               (ckpt_dir.empty() ? std::string(" (no --run-dir, so nothing was saved)") : std::string()) +
               "; exiting with status " + std::to_string(kExitCheckpointedOnSignal) +
               " — rerun with --resume auto to continue");
      return kExitCheckpointedOnSignal;
    }
  }
  const double wall = seconds_since(start);
  if (opt.check_replicas > 0)
    log_info("replicas identical at all " + std::to_string(replica_checks) + " check(s)");

  // ---- summary: timings over steps after warm-up, breakdown averaged over ranks ----
  const size_t skip = std::min(times.size() ? times.size() - 1 : 0,
                               static_cast<size_t>(warmup_steps_to_skip(static_cast<long long>(times.size()))));
  std::vector<double> step_s, ips;
  double sums[5] = {0, 0, 0, 0, 0};
  for (size_t i = skip; i < times.size(); ++i) {
    step_s.push_back(times[i].step);
    sums[0] += times[i].data;
    sums[1] += times[i].compute;
    sums[2] += times[i].comm_exposed;
    sums[3] += times[i].optimizer;
    sums[4] += 1;
  }
  // images/s per step uses the slowest rank's step time (the global batch completes then).
  std::vector<double> worst(step_s.size());
  if (!step_s.empty())
    mpiCheck(MPI_Allreduce(step_s.data(), worst.data(), static_cast<int>(step_s.size()), MPI_DOUBLE, MPI_MAX,
                           MPI_COMM_WORLD));
  double gsums[5];
  mpiCheck(MPI_Allreduce(sums, gsums, 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  // Medians of the breakdown (per rank over timed steps, then the largest over ranks):
  // the means above include rare long waits (another process taking a rank's core).
  double meds[4] = {0, 0, 0, 0}, gmeds[4];
  {
    std::vector<double> v[4];
    for (size_t i = skip; i < times.size(); ++i) {
      v[0].push_back(times[i].data);
      v[1].push_back(times[i].compute);
      v[2].push_back(times[i].comm_exposed);
      v[3].push_back(times[i].optimizer);
    }
    for (int k = 0; k < 4; ++k) meds[k] = spread_of(v[k]).median;
  }
  mpiCheck(MPI_Allreduce(meds, gmeds, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  // Each rank's median compute time: a straggler (a slower core, a noisy node) shows here,
  // and every other rank waits for it at each step.
  std::vector<double> compute_per_rank(static_cast<size_t>(world));
  mpiCheck(MPI_Gather(&meds[1], 1, MPI_DOUBLE, compute_per_rank.data(), 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  for (double s : worst) ips.push_back(s > 0 ? static_cast<double>(global_batch) / s : 0);
  Spread step_spread = spread_of(worst), ips_spread = spread_of(ips);
  const double n = gsums[4] > 0 ? gsums[4] : 1;
  log_info("done: " + std::to_string(total_steps) + " steps in " + format_duration(wall) + ", median " +
           std::to_string(static_cast<long long>(std::llround(ips_spread.median))) + " img/s, step " +
           std::to_string(step_spread.median * 1e3) + " ms (data " + std::to_string(gsums[0] / n * 1e3) +
           ", compute " + std::to_string(gsums[1] / n * 1e3) + ", comm exposed " +
           std::to_string(gsums[2] / n * 1e3) + ", optimizer " + std::to_string(gsums[3] / n * 1e3) + " ms)" +
           (evaluated ? ", test accuracy " + std::to_string(last_eval.accuracy) : std::string()));

  if (rank == 0 && !opt.run_dir.empty()) {
    nlohmann::json j;
    j["world_size"] = world;
    j["nodes"] = ctx.num_nodes;
    j["ranks_per_node"] = ctx.num_nodes > 0 ? world / ctx.num_nodes : world;
    j["backend"] = comm->backend();
    j["device"] = on_gpu ? ctx.device_label : std::string("cpu");
    j["model"] = model->name();
    j["model_spec"] = model->spec();
    j["parameters"] = model->param_count();
    j["precision"] = opt.precision;
    j["batch_per_rank"] = opt.batch_size;
    j["global_batch"] = global_batch;
    j["steps"] = total_steps;
    j["epochs"] = static_cast<double>(total_steps) / static_cast<double>(steps_per_epoch);
    j["timed_steps"] = worst.size();
    j["images_per_s"] = ips_spread.median;
    j["images_per_s_p10"] = ips_spread.p10;
    j["images_per_s_p90"] = ips_spread.p90;
    j["step_ms"] = {{"median", step_spread.median * 1e3}, {"p10", step_spread.p10 * 1e3},
                    {"p90", step_spread.p90 * 1e3}, {"mean", step_spread.mean * 1e3}};
    j["breakdown_ms"] = {{"data", gsums[0] / n * 1e3}, {"compute", gsums[1] / n * 1e3},
                         {"comm_exposed", gsums[2] / n * 1e3}, {"optimizer", gsums[3] / n * 1e3}};
    j["breakdown_median_ms"] = {{"data", gmeds[0] * 1e3}, {"compute", gmeds[1] * 1e3},
                                {"comm_exposed", gmeds[2] * 1e3}, {"optimizer", gmeds[3] * 1e3}};
    j["compute_median_ms_per_rank"] = nlohmann::json::array();
    for (double c : compute_per_rank) j["compute_median_ms_per_rank"].push_back(c * 1e3);
    j["grad_bytes"] = sync.bytes_per_step();
    j["buckets"] = sync.buckets().size();
    j["grad_sum"] = sync.method();
    j["train_loss"] = std::isfinite(last_loss) ? nlohmann::json(last_loss) : nlohmann::json(nullptr);
    j["test_accuracy"] = evaluated ? nlohmann::json(last_eval.accuracy) : nlohmann::json(nullptr);
    j["accuracy_per_epoch"] = accuracy_curve;
    j["wall_s"] = wall;
    j["lr"] = {{"base", schedule.base()}, {"peak", schedule.peak()}, {"scaling", opt.lr.scaling},
               {"warmup_epochs", opt.lr.warmup_epochs}, {"decay", opt.lr.decay}};
    j["optimizer"] = opt.optimizer.kind;
    j["seed"] = opt.seed;
    j["data"] = opt.synthetic ? std::string("synthetic") : opt.data_dir;
    j["launcher"] = ctx.launch.name;
    j["skipped_steps"] = skipped_steps;
    j["resumed_from"] = rp.resumed ? nlohmann::json(rp.path) : nlohmann::json(nullptr);
    j["config_digest"] = digest;
    j["metrics_lines_lost"] = metrics.lines_lost();
    j["config"] = config.to_json();
    if (!ctx.launch.job_id.empty()) {
      const char* nl = std::getenv("SLURM_JOB_NODELIST");
      if (!nl) nl = std::getenv("SLURM_NODELIST");
      j["slurm"] = {{"job_id", ctx.launch.job_id}, {"nodelist", nl ? nl : ""}};
    }
    write_run_json(opt.run_dir, run_dir.summarize(std::move(j), first_step));
    log_info("wrote " + opt.run_dir + "/run.json");
  }
  if (metrics.lines_lost() > 0) {  // rank 0's log; its status makes the job's non-zero
    print_error(std::to_string(metrics.lines_lost()) + " of " +
                std::to_string(metrics.lines_lost() + metrics.lines_written()) + " lines could not be written to " +
                metrics.path() + " (" + metrics.first_error() + "); training finished and run.json counts them " +
                "(metrics_lines_lost), but the metrics are incomplete. Free space on that file system");
    return kUserErrorStatus;
  }
  return 0;
}

}  // namespace cnnscale
