// train_args.cpp — `cnnscale train`'s options (command line and --config INI) → checked
// TrainOptions (contract: train_args.hpp).
#include "cli/train_args.hpp"

#include "cli/options.hpp"
#include "nn/task.hpp"
#include "train/timeline.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::cli {

TrainArgs parse_train_args(int argc, char** argv, int default_threads) {
  CommandSpec spec{
      "train", "cnnscale train (--data DIR | --synthetic) [options]",
      "Data-parallel training with exact DDP semantics: rank 0's initial parameters are broadcast,\n"
      "gradients are summed in buckets overlapped with backward, and W ranks with batch B each follow\n"
      "the same trajectory as one rank with batch W*B. Every long option may also come from an INI\n"
      "file given with --config (key = value, keys without the dashes; the command line wins).",
      "Examples:\n"
      "  cnnscale train --synthetic --model resnet50 --image-size 224 --channels 3 --classes 1000 --batch-size 32 "
      "--max-steps 20\n"
      "  cnnscale prep --format idx --input /usr/share/datasets/fashion-mnist --output data/fmnist --shards 8\n"
      "  mpirun -n 2 cnnscale train --data data/fmnist --epochs 5 --run-dir runs/fmnist-2\n"
      "  srun --mpi=pmix cnnscale train --synthetic --max-steps 200 --run-dir runs/syn-$SLURM_JOB_ID\n"
      "Outputs (with --run-dir): metrics.jsonl, run.json (read by `cnnscale report`), checkpoints/, tb/\n"
      "(TensorBoard events: tensorboard --logdir RUN_DIR/tb).\n"
      "Watch a running job: `cnnscale watch RUN_DIR`; where a step's time goes: --timeline FILE.json.\n"
      "A run directory holds one run: one training at a time (RUN_DIR/run.lock), the same configuration\n"
      "on resume, and a finished run is not rewritten (docs/checkpoints.md, \"Run directory rules\")."};
  TrainArgs a;
  TrainOptions& o = a.o;
  // The templates export OMP_NUM_THREADS=--cpus-per-task: that is the default, as docs/models.md says.
  o.threads = default_threads;
  // Choices are read as text here and parsed into o's enums below.
  std::string precision = precision_name(o.precision), backend = "auto", resume = "auto", on_nan = "stop",
              device = "auto";
  std::string tf32 = o.model_options.tf32 ? "on" : "off";
  std::string cudnn_benchmark = o.model_options.cudnn_benchmark ? "on" : "off";
  po::options_description input("Input");
  input.add_options()("data", po::value(&o.data.dir), "dataset directory written by `cnnscale prep`")(
      "synthetic", po::bool_switch(&o.data.synthetic),
      "deterministic random images instead of a data set (throughput)")(
      "synthetic-samples", po::value(&o.data.synthetic_samples)->default_value(o.data.synthetic_samples),
      "samples per synthetic epoch")("image-size", po::value<std::string>(),
                                     "synthetic images of S×S (or HxW, e.g. 224 or 32x48) pixels (default 28)")(
      "channels", po::value(&o.data.synthetic_shape.channels)->default_value(o.data.synthetic_shape.channels),
      "synthetic image channels")("classes",
                                  po::value(&o.data.synthetic_classes)->default_value(o.data.synthetic_classes),
                                  "synthetic classes (a data set's come from its dataset.json)")(
      "drop-last", po::value(&o.data.drop_last)->default_value(true)->implicit_value(true),
      "drop the epoch's tail that does not fill a global batch (default)")(
      "no-drop-last", po::bool_switch(), "wrap around to fill the last global batch instead")(
      "prefetch", po::value(&o.data.prefetch)->default_value(o.data.prefetch), "batches the reader thread keeps ready")(
      "cache", po::value(&o.data.cache)->default_value(o.data.cache),
      "none|memory: keep this rank's samples after first read")(
      "augment", po::value(&o.data.augment)->default_value("none"),
      "training augmentation, comma-separated steps applied in order in the reader thread (evaluation never "
      "augments): crop<S>pad<P> = RandomCrop(S, padding=P) with zero padding, S the image size (e.g. crop32pad4); "
      "hflip = RandomHorizontalFlip(p=0.5); rrc<S> = RandomResizedCrop(S) (the sample becomes S×S; evaluation then "
      "center-crops to S); center<S> = CenterCrop(S); resize<S> = Resize(S); volumes (C×D×H×W): flip3d = each of "
      "D, H, W reversed with probability 1/2, transpose3d = a random permutation of D, H, W (cubes), as CosmoFlow; "
      "none. A label map moves with its sample. Each sample's draws depend only on (seed, epoch, sample index)")(
      "data-threads", po::value(&o.data.data_threads)->default_value(o.data.data_threads),
      "threads per rank that read, augment and normalise each batch (the reader thread and N-1 workers), or "
      "make the --synthetic batches; the batches are identical for any count. Default on a rank that trains on "
      "a GPU: the cores the rank may use (its affinity mask, SLURM_CPUS_PER_TASK, its share of the node) less "
      "one for the training thread; on the CPU 1 (the cores go to --threads)")(
      "jpeg-decode", po::value(&o.data.jpeg_decode)->default_value(o.data.jpeg_decode),
      "data sets of `prep --store jpeg`: fast (each JPEG decoded at the smallest DCT scale that keeps rrc<S>'s "
      "window at least SxS pixels, as FFCV) | exact (decoded whole: PIL's pixels, torchvision's crop, bit for bit)");
  po::options_description model("Model and numerics");
  model.add_options()("model", po::value(&o.model)->default_value(o.model),
                      (builtin_model_list(" | ") +
                       " (all but the first three and the last are torchvision's; unet(D,W): depth D, width W, "
                       "a segmentation model) | a one-line spec, "
                       "e.g. \"conv(32,3) relu maxpool(2) flatten linear(10)\" | FILE.onnx: a PyTorch CNN exported "
                       "by scripts/export-onnx.py (its initializers are the initial weights; docs/models.md)")
                          .c_str())(
      "zero-init-residual", po::bool_switch(&o.model_options.zero_init_residual),
      "torchvision ResNets: start each residual block's last batch-norm weight at 0")(
      "loss", po::value<std::string>(),
      "cross-entropy | mse | l1 | smooth-l1 | bce-with-logits: PyTorch's definitions, reduction 'mean' over the "
      "global batch. Default: the data set's task picks it (class labels: cross-entropy; float targets: mse; "
      "0/1 targets: bce-with-logits; docs/data.md)")(
      "class-weights", po::value<std::string>(),
      "W0,W1,...: cross-entropy: one weight per class (F.cross_entropy's weight: the mean divides by the sum of "
      "the batch's weights); bce-with-logits: one per output")(
      "ignore-index", po::value<int>(),
      "cross-entropy: samples (segmentation: pixels) of this label count neither in the loss nor in its mean "
      "(F.cross_entropy's ignore_index); classification: a class; segmentation: any label, e.g. 255, which "
      "also fills the pixels a padded --augment crop adds to a label map")(
      "precision", po::value(&precision)->default_value(precision),
      "fp32|bf16: bf16 compute for convolutions and matmuls with fp32 accumulation and fp32 master weights; "
      "CPU: oneDNN, needs AVX512-BF16 or AMX; GPU: cuDNN/cuBLAS bf16 tensor cores (compute capability 8.0+), "
      "convolutions in NHWC, as PyTorch's autocast(torch.bfloat16) with channels_last")(
      "tf32", po::value(&tf32)->default_value(tf32),
      "on|off: TensorFloat-32 tensor cores for the GPU model's fp32 convolutions (cuDNN) and matmuls (cuBLAS), as "
      "PyTorch's cuDNN default (10-bit mantissa products, fp32 sums); off = full fp32. No effect on the CPU")(
      "cudnn-benchmark", po::value(&cudnn_benchmark)->default_value(cudnn_benchmark),
      "on|off: the GPU model times cuDNN's convolution algorithms once per distinct convolution and batch size "
      "and runs the fastest deterministic one (as torch.backends.cudnn.benchmark); off = cuDNN's heuristic pick. "
      "Rank 0's choices hold on every rank and are stored in checkpoints, which a resumed run reapplies. No "
      "effect on the CPU")("threads", po::value(&o.threads)->default_value(o.threads),
                           "compute (oneDNN/OpenMP) threads per rank; default OMP_NUM_THREADS when set, else 1");
  po::options_description sched("Schedule and optimiser");
  sched.add_options()("epochs", po::value(&o.epochs)->default_value(o.epochs), "passes over the training split")(
      "max-steps", po::value(&o.max_steps)->default_value(0), "stop after this many steps (0: no limit)")(
      "batch-size", po::value(&o.batch_size)->default_value(o.batch_size), "samples per rank per step")(
      "seed", po::value(&o.seed)->default_value(o.seed), "seed for initialisation, sample order and dropout")(
      "lr", po::value(&o.lr.lr)->default_value(o.lr.lr, shortest(o.lr.lr)), "learning rate (for --lr-reference-batch)")(
      "lr-scaling", po::value(&o.lr.scaling)->default_value(o.lr.scaling),
      "linear|sqrt|none: scale --lr by global batch / reference batch")(
      "lr-reference-batch", po::value(&o.lr.reference_batch)->default_value(o.lr.reference_batch),
      "the batch --lr was tuned for")("warmup-epochs",
                                      po::value(&o.lr.warmup_epochs)->default_value(o.lr.warmup_epochs, shortest(o.lr.warmup_epochs)),
                                      "ramp from --lr to the scaled lr over this many epochs (Goyal et al.)")(
      "lr-decay", po::value(&o.lr.decay)->default_value(o.lr.decay), "none|step|cosine after warm-up")(
      "lr-step-epochs", po::value(&o.lr.step_epochs)->default_value(o.lr.step_epochs), "epochs per step decay")(
      "lr-gamma", po::value(&o.lr.gamma)->default_value(o.lr.gamma, shortest(o.lr.gamma)), "factor per step decay")(
      "optimizer", po::value(&o.optimizer.kind)->default_value(o.optimizer.kind), "sgd|adamw")(
      "momentum", po::value(&o.optimizer.momentum)->default_value(o.optimizer.momentum, shortest(o.optimizer.momentum)), "SGD momentum")(
      "nesterov", po::bool_switch(&o.optimizer.nesterov), "Nesterov momentum")(
      "weight-decay", po::value(&o.optimizer.weight_decay)->default_value(o.optimizer.weight_decay, shortest(o.optimizer.weight_decay)),
      "L2 (SGD) or decoupled (AdamW) weight decay")(
      "beta1", po::value(&o.optimizer.beta1)->default_value(o.optimizer.beta1, shortest(o.optimizer.beta1)), "AdamW beta1")(
      "beta2", po::value(&o.optimizer.beta2)->default_value(o.optimizer.beta2, shortest(o.optimizer.beta2)), "AdamW beta2")(
      "no-eval", po::bool_switch(), "skip test-split evaluation at epoch ends");
  po::options_description par("Parallelism");
  par.add_options()("backend", po::value(&backend)->default_value(backend),
                    "auto|mpi|nccl|gloo (auto: NCCL on GPUs, else MPI under srun/mpirun; Gloo on CPUs when started by "
                    "torchrun-style variables or TF_CONFIG, meeting at MASTER_ADDR:MASTER_PORT; docs/launch.md)")(
      "device", po::value(&device)->default_value(device),
      "auto|cuda|cpu: where each rank trains. auto: a GPU with NCCL (one GPU per rank), else the CPU. cuda with "
      "--backend mpi or gloo: GPU ranks over a host data plane (gradients staged through pinned host memory; ranks "
      "may share a GPU; not yet run on a GPU: docs/gpu.md). cpu: the CPU model whatever GPUs there are")(
      "bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb, shortest(o.bucket_mb)), "gradient bucket size (MiB)")(
      "first-bucket-mb", po::value(&o.first_bucket_mb)->default_value(o.first_bucket_mb, shortest(o.first_bucket_mb)),
      "size of the first bucket, started earliest in backward (MiB)")(
      "check-replicas", po::value(&o.check_replicas)->default_value(0),
      "every N steps verify that all ranks hold bitwise-identical parameters (0: off)")(
      "sync-bn", po::bool_switch(&o.sync_bn),
      "batch-norm statistics over the global batch, as torch.nn.SyncBatchNorm: one small sum over ranks per BN "
      "layer in forward and one in backward (the CPU model; on GPUs only with CNNSCALE_GPU_BN=own, not yet run on "
      "a GPU: docs/gpu.md). Without it each rank "
      "normalises with its own batch and "
      "the running statistics follow rank 0's, as DDP's broadcast_buffers=True");
  po::options_description out("Output, checkpoints and faults");
  out.add_options()("run-dir", po::value(&o.run_dir), "write metrics.jsonl, run.json and checkpoints/ here")(
      "log-every", po::value(&o.log_every)->default_value(o.log_every),
      "steps between progress lines (each with ETA and the slowest rank's step time; on a terminal, rank 0 also "
      "draws a per-epoch progress bar on stderr)")(
      "progress", po::value<std::string>()->default_value("auto"),
      "auto|bar|lines: rank 0's live per-epoch progress bar on stderr (auto: when stderr is a terminal; under "
      "mpirun a rank's stderr is a pipe, so pass bar there to get it on mpirun's terminal)")(
      "timeline", po::value(&o.timeline),
      "write a Chrome trace-event timeline of the --timeline-steps to this FILE.json (open it in ui.perfetto.dev "
      "or chrome://tracing): per rank, data wait, forward, backward per layer, each gradient bucket's allreduce, "
      "optimizer, evaluation, checkpoints (docs/watching.md)")(
      "timeline-steps", po::value<std::string>(),
      "A:B: the steps (from 1, inclusive) --timeline records (default: the 50 steps after the warm-up steps the "
      "summary leaves out)")(
      "tensorboard", po::value(&o.tensorboard),
      "rank 0 writes TensorBoard event files (loss, lr, images/s, step-time breakdown, test accuracy, the "
      "options) into this directory, for `tensorboard --logdir`; default RUN_DIR/tb with --run-dir "
      "(docs/watching.md)")("no-tensorboard", po::bool_switch(&o.no_tensorboard), "write no TensorBoard event files")(
      "checkpoint-every", po::value(&o.checkpoint_every)->default_value(0), "checkpoint every N steps (0: off)")(
      "resume", po::value(&resume)->default_value(resume),
      "auto (continue the run in --run-dir, if any) | none (a new run) | PATH (start from that checkpoint)")(
      "force-new", po::bool_switch(&o.force_new),
      "with --resume none: move the run already in --run-dir to RUN_DIR/previous-<time>/ and start afresh")(
      "keep-checkpoints", po::value(&o.keep_checkpoints)->default_value(o.keep_checkpoints),
      "newest checkpoints to keep")("collective-timeout",
                                    po::value(&o.collective_timeout)->default_value(o.collective_timeout, shortest(o.collective_timeout)),
                                    "seconds before a silent rank is reported")(
      "on-nan", po::value(&on_nan)->default_value(on_nan), "stop|skip-step when the loss is not finite (skip-step: the update is skipped and the step "
      "leaves no trace; a NaN it cannot undo — in a parameter, or on the GPU in batch-norm statistics — "
      "still stops the run; docs/checkpoints.md)");
  po::options_description all("Options");
  all.add(input).add(model).add(sched).add(par).add(out);
  auto parsed = parse_options(spec, argc, argv, all, {}, /*allow_config=*/true);
  if (parsed.help) {
    print_help(spec, all);
    a.help = true;
    return a;
  }
  // The command line wins over --config: --synthetic given there drops a config's data
  // (and --data given there drops a config's synthetic = true).
  const auto& cl = parsed.on_command_line;
  if (o.data.synthetic && !o.data.dir.empty()) {
    if (cl.count("synthetic") && !cl.count("data")) o.data.dir.clear();
    else if (cl.count("data") && !cl.count("synthetic")) o.data.synthetic = false;
  }
  if (parsed.vm.count("image-size"))
    o.data.synthetic_shape = parse_image_size(parsed.vm["image-size"].as<std::string>(), o.data.synthetic_shape);
  if (!o.data.synthetic)
    for (const char* k : {"image-size", "channels", "classes"})
      if (parsed.vm.count(k) && !parsed.vm[k].defaulted())
        fail("--", k, " applies to --synthetic data; a data set's shape and classes come from its dataset.json");
  if (parsed.vm["no-drop-last"].as<bool>()) o.data.drop_last = false;
  if (parsed.vm["no-eval"].as<bool>()) o.evaluate = false;
  {
    const std::string p = parsed.vm["progress"].as<std::string>();
    if (p == "bar") set_status_mode(StatusMode::on);
    else if (p == "lines") set_status_mode(StatusMode::off);
    else if (p != "auto") fail("--progress ", p, " is not supported; use auto, bar or lines");
  }
  if (parsed.vm.count("timeline-steps"))
    o.timeline_steps = parse_timeline_steps(parsed.vm["timeline-steps"].as<std::string>());
  // Every mistake that needs no other rank is reported before the world starts.
  o.precision = parse_precision(precision);
  if (tf32 != "on" && tf32 != "off") fail("--tf32 takes on or off, not '", tf32, "'");
  o.model_options.tf32 = tf32 == "on";
  if (cudnn_benchmark != "on" && cudnn_benchmark != "off")
    fail("--cudnn-benchmark takes on or off, not '", cudnn_benchmark, "'");
  o.model_options.cudnn_benchmark = cudnn_benchmark == "on";
  if (parsed.vm.count("loss")) {
    o.task.loss = parse_loss(parsed.vm["loss"].as<std::string>());
    o.loss_given = true;
  }
  if (parsed.vm.count("class-weights")) o.task.class_weights = parse_class_weights(parsed.vm["class-weights"].as<std::string>());
  if (parsed.vm.count("ignore-index")) {
    o.task.ignore_index = parsed.vm["ignore-index"].as<int>();
    if (o.task.ignore_index < 0) fail("--ignore-index ", o.task.ignore_index, " is not a class; give a class index ≥ 0");
  }
  validate(o);
  o.on_nan = parse_nan_policy(on_nan);
  o.resume = parse_resume(resume);
  a.backend = backend;
  a.device = device;
  a.data_threads_defaulted = parsed.vm["data-threads"].defaulted();
  return a;
}

}  // namespace cnnscale::cli
