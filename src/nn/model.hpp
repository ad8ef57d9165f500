// model.hpp — the contract between the network and the training loop.
//
// A Model owns its parameters and gradients in two flat float buffers laid out in
// REVERSE registration order (the last layer's parameters first), so that gradients
// become ready front-to-back during backward and a communication bucket is a
// contiguous range of the gradient buffer (no copies for the allreduce).
// Parameter names and layouts are PyTorch's state_dict ones (conv1.weight O×I×kH×kW,
// fc1.weight out×in, bn.running_mean ...).
//
// Loss convention for exact data parallelism: forward_backward returns the SUM of the
// local batch's loss terms under the model's task (nn/task.hpp; cross-entropy over class
// labels unless ModelOptions::task says otherwise), and accumulates gradients of
// (sum of local terms) × loss_scale, with loss_scale = 1 / the global batch's
// denominator (Task::denominator: the global batch size unless class weights or an
// ignore index make it a sum of weights). Summing the gradients over ranks then gives
// exactly the gradient of the global-batch mean.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/task.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale {

struct ParamInfo {
  std::string name;              // PyTorch state_dict name, e.g. "conv1.weight"
  std::vector<int64_t> shape;    // PyTorch layout
  size_t offset = 0;             // into the flat parameter / gradient buffers
  size_t numel = 0;
  bool trainable = true;         // false for buffers such as bn.running_mean (no grad)
  bool decay = true;             // weight decay applies (weights yes, biases/bn no)
};

enum class Precision { fp32, bf16 };

// Options of a model's construction (make_model), beyond its name and input.
struct ModelOptions {
  // torchvision's zero_init_residual: the last batch-norm weight of each residual block
  // of the torchvision ResNets starts at 0 (--zero-init-residual). A UserError for
  // other models.
  bool zero_init_residual = false;
  // TensorFloat-32 for the GPU model's fp32 convolutions (cuDNN) and matmuls (cuBLAS):
  // tensor-core speed at a 10-bit mantissa for the products (fp32 accumulation), as
  // PyTorch does for cuDNN by default (--tf32 on|off). No effect on GPUs before Ampere
  // nor on the CPU model.
  bool tf32 = true;
  // The GPU model benchmarks cuDNN's convolution algorithms once per distinct
  // convolution and batch size (cudnnFindConvolution*Algorithm) and runs the fastest
  // deterministic one (--cudnn-benchmark on|off, as torch.backends.cudnn.benchmark);
  // false: cuDNN's heuristic ranking. nn/conv_algo.hpp. No effect on the CPU model.
  bool cudnn_benchmark = true;
  // What the outputs are trained to be (loss, targets, metrics). Null: cross-entropy over
  // `classes` class labels. Its outputs() must be the model's classes. The GPU model
  // takes the plain cross-entropy only (a UserError otherwise).
  std::shared_ptr<const Task> task;
  // build_model_graph skips its check that the output fits `task` (cnnscale export: it needs
  // the graph alone, whichever task trained it).
  bool any_output = false;
};

struct StepContext {
  uint64_t seed = 0;             // run seed
  int64_t step = 0;              // global optimiser step (0-based)
  const int64_t* sample_ids = nullptr;  // global index of each sample in the batch
  // The ticket Model::stage returned for this very batch (same images, labels and ids
  // as the pointers passed to forward_backward), or -1. A ticket the model no longer
  // holds (staged too far ahead, or from another batch size) is ignored: the pointers
  // are copied as without one. Same results either way.
  int64_t staged = -1;
  bool training = true;          // dropout active, batch-norm uses batch statistics
  float loss_scale = 1.f;        // see above
  // --sync-bn (torch.nn.SyncBatchNorm): when set, batch-norm layers in training use the
  // statistics of the global batch. The model calls it (blocking, collective: every
  // rank calls it in the same order with the same n) with a small vector of per-rank
  // partial sums, and gets back the sum over ranks, bitwise equal on every rank. The
  // model never talks to MPI itself: the training loop builds it from its control plane
  // (ControlComm::sum_in_rank_order). Doubles: the forward message holds sums of
  // squares, whose float rounding would be amplified by E[x^2] - mean^2. Empty: each
  // rank's batch-norm uses its own batch (DDP's default). The GPU model only in its own
  // NHWC batch norm (Model::supports_sync_bn; a batch norm left to cuDNN refuses it).
  std::function<void(double* data, size_t n)> sum_across_ranks;
  // Called by a device model between polls while the host waits for the device (the
  // loss of forward_backward): the device queue may be waiting for another queue's work
  // (the previous step's gradient sums, Model::wait_for), which fails on the device
  // without any call returning an error. The training loop checks the communicator's
  // asynchronous error here (Communicator::check_async_error), so that a failed NCCL
  // collective ends the job with NCCL's message instead of a wait that never returns.
  // May throw or end the job; empty: nothing to check. Host models never call it.
  std::function<void()> while_waiting;
  // The training loop lets a device model replay its step as a CUDA graph
  // (CNNSCALE_GPU_GRAPH=1, nn/cuda/step_graph.hpp): set for one rank, where nothing waits
  // for the grad-ready calls during backward (a graph's come after it, all at once).
  bool step_graph = false;
};

// Called during backward each time more gradients are final: all gradients with flat
// offset < ready_end are final (ready_end only grows; the last call has
// ready_end == param_count()). The training loop launches bucket allreduces from it.
// The first call, with ready_end == 0 (nothing final yet), marks the end of forward and
// the loss, just before backward starts (--timeline's forward/backward boundary).
using GradReadyFn = std::function<void(size_t ready_end)>;

// Which paths a device model ran and how much device memory it held: run.json's "gpu"
// object (Trainer::run_record; docs/gpu.md "What run.json says about the GPU"). Read at the
// end of a run, when the paths have been chosen (Model::prepare) and the memory peaked.
struct DevicePaths {
  std::string bn;              // the store's batch norms: "cudnn", or "own" (ours, fused; CNNSCALE_GPU_BN=own)
  bool nhwc_store32 = false;   // fp32 NHWC activations between layers (TF32, CNNSCALE_GPU_NHWC_STORE=1)
  bool bf16_store = false;     // bf16 NHWC activations between layers (--precision bf16, CNNSCALE_GPU_BF16_STORE)
  bool tf32_nhwc = false;      // fp32 convolutions on NHWC copies for the TF32 tensor cores
  // The steps (forward, loss, backward) replayed as CUDA graphs (CNNSCALE_GPU_GRAPH=1,
  // nn/cuda/step_graph.hpp; run.json's cuda_graph is cuda_graph_steps > 0), and what
  // happened in words (empty when not asked for: the graphs, or why none ran).
  int64_t cuda_graph_steps = 0;
  std::string cuda_graph_note;
  // The most bytes the model's own device arrays held at once in this process, in GiB
  // (2^30): parameters, gradients, activations and their gradients, bf16/NHWC scratch,
  // the convolution workspace, layer state (batch-norm saves and reserve, dropout
  // masks), the input slots: every DevArray (nn/cuda/device_array.hpp). Not counted: the
  // optimiser's state (SGD momentum: one parameter-sized buffer, 0.1 GiB for
  // ResNet-50), cuDNN's, cuBLAS's and NCCL's own allocations, the CUDA context. The
  // nearest PyTorch number is torch.cuda.max_memory_allocated() (its caching
  // allocator's tensors, optimiser state and cuDNN workspace included).
  double peak_memory_gib = 0;
  // The whole device's used memory when this is read (cudaMemGetInfo total − free): every
  // process on the GPU, contexts and library pools included; −1 when it cannot be read.
  double device_used_gib = -1;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string name() const = 0;          // "mnist_cnn", or the spec text
  virtual std::string spec() const = 0;          // canonical one-line spec
  // What the run's identity records for the model (ModelGraph::identity): the spec, or an
  // ONNX file's content digest.
  virtual std::string identity() const { return spec(); }
  virtual const std::vector<ParamInfo>& params() const = 0;  // registration (state_dict) order
  virtual float* param_data() = 0;               // flat, size param_count()
  virtual float* grad_data() = 0;                // flat, same layout; zero for non-trainable
  virtual size_t param_count() const = 0;
  virtual int classes() const = 0;

  // Allocates activations and builds primitives for up to max_batch samples.
  // Called once before training (and again only if max_batch grows).
  virtual void prepare(int64_t max_batch, Precision precision) = 0;

  // Forward, loss and backward on n samples. Gradients are OVERWRITTEN (not
  // accumulated). Returns the sum of the samples' loss terms. on_ready may be empty.
  virtual double forward_backward(const float* images, const Targets& targets, int64_t n,
                                  const StepContext& ctx, const GradReadyFn& on_ready) = 0;

  // Copies a training batch into memory the model can upload from without the
  // training thread (the GPU model: a pinned host slot), and returns a ticket for
  // StepContext::staged, or -1 when it staged nothing (the default: host models read
  // the caller's memory directly). Thread-safe with respect to the model's other calls:
  // the data pipeline's thread calls it (BatchHook, batch_source.hpp). sample_ids may
  // be null (then 0..n-1, as forward_backward without ids).
  virtual int64_t stage(const float* /*images*/, const int32_t* /*labels*/, const int64_t* /*sample_ids*/,
                        int64_t /*n*/) {
    return -1;
  }

  // Inference (dropout off, batch-norm running stats): writes n × classes logits (a dense
  // output: n × classes × H × W, plain NCHW).
  virtual void forward_eval(const float* images, int64_t n, float* logits) = 0;

  // Re-initialises parameters as PyTorch does by default (Kaiming-uniform(a=√5)
  // weights, uniform(±1/√fan_in) biases; bn weight 1, bias 0), from seed.
  virtual void init_params(uint64_t seed) = 0;

  // Makes the model write its gradients into caller-owned host memory of
  // param_count() floats (GradSync's node-shared window, so that ranks of a node sum
  // gradients where backward wrote them). The model never frees it; it must stay
  // valid for as long as the model computes. Call before prepare(). Returns false
  // where the model cannot (device models).
  virtual bool adopt_grad_storage(float* /*grads*/) { return false; }

  // Gives the pages of the per-step buffers (activations, activation gradients, layout
  // conversions: all rewritten by the next step before they are read) back to the
  // operating system, for a long pause between steps (writing a checkpoint, whose
  // in-memory image would otherwise come on top of them). The next step faults them in
  // again, zero-filled. Results do not change. No-op where the model keeps none.
  virtual void release_step_memory() {}

  // Where the last forward_backward met a NaN (or a batch-norm input with NaN/Inf) that
  // a CPU ReLU or max-pool would have dropped ("" when none): forward_backward then
  // returns a NaN loss, so --on-nan acts as it does in PyTorch, where the NaN would reach
  // the loss (issue 28 item 2). The GPU model propagates NaN itself and says nothing here.
  virtual std::string non_finite_where() const { return {}; }

  // The model's tuning choices as text (the GPU model: its cuDNN convolution
  // algorithm per distinct convolution, nn/conv_algo.hpp format_tuning), for a
  // checkpoint; empty where the model makes none (the CPU model).
  virtual std::string tuning() const { return {}; }
  // Makes the model use these choices (text from tuning(), possibly of another process
  // or rank) for the problems they cover, so that it computes bitwise as the model
  // that made them (same GPU type and library versions); problems they do not cover
  // are chosen as usual. Best called before prepare(); afterwards the plans made so far
  // are rebuilt. Throws UserError for malformed text. No-op for the CPU model.
  virtual void set_tuning(const std::string& /*text*/) {}

  // ---- where the model runs; the defaults are the host model's (oneDNN): host
  // memory, and every call returns when its work is done ----

  // True when param_data()/grad_data() are CUDA device pointers (the GPU model,
  // nn/cuda_model.hpp); the CPU model's buffers are host memory.
  virtual bool on_device() const { return false; }
  // Batch norm over the global batch (StepContext::sum_across_ranks, --sync-bn) at this
  // precision: the host model always; the GPU model with its own NHWC batch norm
  // (CNNSCALE_GPU_BN=own on the activation store; nn/cuda/batchnorm_nhwc.hpp).
  virtual bool supports_sync_bn(Precision /*precision*/) const { return !on_device(); }

  // The device queue the model enqueues its work on (the GPU model's cudaStream_t), or
  // nullptr. Work that others enqueue on it (the CUDA optimizer) is ordered with the
  // model's own.
  virtual void* stream() const { return nullptr; }

  // Makes the device queue `other` (e.g. Communicator::stream()) wait for the work the
  // model has enqueued so far, without a host wait. No-op for a host model or a null queue.
  virtual void order_before(void* /*other*/) {}
  // The reverse: the model's queue waits (on the device, no host wait) for the work
  // enqueued on `other` so far, e.g. the communicator's gradient sums or batch-norm
  // buffer broadcast before the optimizer or the next forward reads them. No-op for a
  // host model or a null queue.
  virtual void wait_for(void* /*other*/) {}

  // The host waits for the work the model has enqueued (forward_backward of a device
  // model returns before its backward has run). No-op for a host model.
  virtual void synchronize() {}

  // Device clock for the step's timing columns: the host clock around a call of a device
  // model measures enqueueing, not the work. mark(set, point) records the moment the
  // model's queue reaches everything enqueued so far (sets < kMarkSets, points <
  // kMarkPoints; each (set, point) reusable: recording it again replaces it, so a
  // caller keeps one set per step it has not read yet). marked_seconds(set, from, to, &s)
  // gives the device time between two recorded marks of a set once the queue has
  // passed both, without a wait; false while it has not, when either was never
  // recorded, or where the model has no device clock. Host models (the defaults): no
  // marks, always false: their calls return when their work is done, so the caller's
  // host clocks are exact.
  static constexpr int kMarkSets = 2, kMarkPoints = 4;
  virtual void mark(int /*set*/, int /*point*/) {}
  virtual bool marked_seconds(int /*set*/, int /*from*/, int /*to*/, double* /*seconds*/) { return false; }

  // Host copies of the flat parameters (param_count() floats), synchronous: for
  // checkpoints, replica checks and broadcasts over MPI.
  // The device paths and memory of a device model (above); none for a host model, whose
  // run.json then has no "gpu" object.
  virtual std::optional<DevicePaths> device_paths() const { return std::nullopt; }

  virtual void copy_params_to_host(float* host) { std::copy_n(param_data(), param_count(), host); }
  virtual void copy_params_from_host(const float* host) { std::copy_n(host, param_count(), param_data()); }
};

// Builds a model from a built-in name (mnist_cnn, lenet5, resnet20) or a one-line spec
// such as "conv(32,3) relu conv(64,3) relu maxpool(2) dropout(0.25) flatten linear(128)
// relu dropout(0.5) linear(10)", for inputs of the given shape. Throws UserError with
// the position of a mistake in a spec.
// Also applies the default thread count once (nn::default_threads(): OMP_NUM_THREADS or 1).
// device < 0: the CPU (oneDNN) model; device >= 0: the GPU model on that CUDA device
// (nn/cuda_model.hpp), a UserError in a build without CUDA.
std::unique_ptr<Model> make_model(const std::string& name_or_spec, const SampleShape& input, int classes,
                                  int device = -1, const ModelOptions& options = {});

// The built-in model names, in the order --help and errors list them (models.cpp).
const std::vector<std::string>& builtin_models();
// The same, joined by `sep` ("mnist_cnn | lenet5 | ...").
std::string builtin_model_list(const std::string& sep);

namespace nn {
// oneDNN threads per rank (OpenMP); see threads.hpp. Call before prepare().
void set_threads(int n);
int threads();
}  // namespace nn

}  // namespace cnnscale
