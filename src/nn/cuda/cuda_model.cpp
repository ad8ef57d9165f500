// cuda_model.cpp — CudaNet: the Model of nn/cuda_model.hpp. It runs the Graph that
// nn::build_model_graph gives (the CPU model's, with its names, spec errors and flat
// layout) on one device, one Layer per node (layer.hpp; one file per op: conv on cuDNN
// convolutions, relu and pools and batch-norm on cuDNN, linear and add on cuBLAS,
// dropout by a kernel, flatten as a view), plus softmax cross-entropy by a kernel
// (kernels.cu). This file owns the handles, the buffers and the per-batch-size plans,
// and drives forward, loss and backward with the grad-ready calls. TF32 as
// ModelOptions::tf32 says (cuDNN math type per convolution descriptor, cuBLAS math
// mode on the handle). Convolution algorithms per ModelOptions::cudnn_benchmark
// (layer_conv.cpp, nn/conv_algo.hpp), shared by identical convolutions through
// NetState::conv_algos, which tuning()/set_tuning() read and write.
#include "nn/cuda_model.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "nn/cuda/device_array.hpp"
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"
#include "nn/cuda/layer_profile.hpp"
#include "nn/cuda/step_graph.hpp"
#include "nn/graph.hpp"
#include "util/cuda/check.hpp"
#include "util/cuda/event_wait.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace nn::cuda {
namespace {

class CudaNet final : public DeviceModel {
 public:
  CudaNet(ModelGraph mg, int device, bool tf32, bool cudnn_benchmark)
      : g_(std::move(mg.graph)), name_(std::move(mg.name)), spec_(std::move(mg.spec)), identity_(std::move(mg.identity)), device_(device) {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) fail("no usable CUDA device: ", cudaGetErrorString(rc));
    if (device < 0 || device >= count) fail("CUDA device ", device, " does not exist (", count, " visible)");
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaStreamCreateWithFlags(&s_.stream, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&staged_ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&loss_ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&order_ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&wait_ev_, cudaEventDisableTiming));
    cudaCheck(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    for (cudaEvent_t& e : in_free_) cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    for (HostSlot& h : slots_) cudaCheck(cudaEventCreateWithFlags(&h.copied, cudaEventDisableTiming));
    cudnnCheck(cudnnCreate(&s_.cudnn));
    cudnnCheck(cudnnSetStream(s_.cudnn, s_.stream));
    cublasCheck(cublasCreate(&s_.cublas));
    cublasCheck(cublasSetStream(s_.cublas, s_.stream));
    s_.tf32 = tf32;
    set_cublas_math();
    s_.cudnn_benchmark = cudnn_benchmark;
    {  // for people reading a checkpoint's record: the choices hold for this GPU and cuDNN
      cudaDeviceProp prop{};
      cudaCheck(cudaGetDeviceProperties(&prop, device_));
      cc_major_ = prop.major;
      cc_minor_ = prop.minor;
      device_name_ = prop.name;
      tuning_comment_ = std::string("cuDNN convolution algorithms (cuDNN ") + std::to_string(cudnnGetVersion()) +
                        ", " + prop.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
    }
    s_.g = &g_;

    const size_t P = std::max<size_t>(g_.param_count, 1);
    s_.params.alloc(P, s_.stream);
    s_.grads.alloc(P, s_.stream);  // zero; never written for non-trainable parameters
    init_params(0);                // as the CPU model's constructor
    d_total_.alloc(1, s_.stream);
    h_total_.alloc(1);

    assign_types(false);
    assign_fusion();
    for (const Node& nd : g_.nodes) layers_.push_back(make_layer(nd, s_));
    if (const char* p = std::getenv("CNNSCALE_GPU_PROFILE"); p && *p) prof_ = std::make_unique<LayerProfile>(p);
    for (const Node& nd : g_.nodes) has_dropout_ = has_dropout_ || nd.op == Op::dropout;
    if (graphs_.requested()) {
      // cuBLAS's own workspace, so that a captured matmul never allocates (before CUDA
      // 12.2 each capture took a new one; PyTorch sets it too); 32 MiB, as PyTorch on Hopper.
      cublas_ws_.alloc(size_t{32} << 20, s_.stream);
      cublasCheck(cublasSetWorkspace(s_.cublas, cublas_ws_.get(), cublas_ws_.size()));
    }
  }

  ~CudaNet() override {
    // No checks here: a destructor must not abort the job.
    cudaSetDevice(device_);
    if (s_.stream) cudaStreamSynchronize(s_.stream);
    if (copy_stream_) cudaStreamSynchronize(copy_stream_);
    if (prof_)
      prof_->write(s_.stream, g_,
                   name_ +
                       (s_.bf16   ? (s_.bf16_store() ? " bf16 (bf16 NHWC activations)" : " bf16 (per-convolution conversions)")
                        : s_.store32 ? " fp32 (TF32 allowed, fp32 NHWC activations)"
                        : s_.tf32 ? " fp32 (TF32 allowed)"
                                  : " fp32 (--tf32 off)") +
                       " on " +
                       device_name_,
                   max_batch_);
    prof_.reset();
    graphs_.clear();
    plans_.clear();
    layers_.clear();
    if (s_.cublas) cublasDestroy(s_.cublas);
    if (s_.cudnn) cudnnDestroy(s_.cudnn);
    for (cudaEvent_t e : {staged_ev_, loss_ev_, order_ev_, wait_ev_, in_free_[0], in_free_[1]})
      if (e) cudaEventDestroy(e);
    for (HostSlot& h : slots_)
      if (h.copied) cudaEventDestroy(h.copied);
    for (auto& set : marks_)
      for (cudaEvent_t e : set)
        if (e) cudaEventDestroy(e);
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
    if (s_.stream) cudaStreamDestroy(s_.stream);
  }

  std::string name() const override { return name_; }
  std::string spec() const override { return spec_; }
  std::string identity() const override { return identity_.empty() ? spec_ : identity_; }
  const std::vector<ParamInfo>& params() const override { return g_.infos; }
  float* param_data() override { return s_.params.get(); }
  float* grad_data() override { return s_.grads.get(); }
  size_t param_count() const override { return g_.param_count; }
  int classes() const override { return g_.classes; }
  int device() const override { return device_; }
  void* stream() const override { return s_.stream; }
  int64_t staged_steps() const override { return staged_steps_; }

  // run.json's "gpu" object (model.hpp DevicePaths: what the peak counts).
  std::optional<DevicePaths> device_paths() const override {
    DevicePaths d;
    d.bn = s_.bn_own ? "own" : "cudnn";
    d.nhwc_store32 = s_.store32;
    d.bf16_store = s_.bf16_store();
    d.tf32_nhwc = s_.nhwc32;
    d.cuda_graph_steps = graphs_.replays();
    d.cuda_graph_note = graphs_.note();
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    d.peak_memory_gib = static_cast<double>(DeviceBytes::peak.load()) / kGiB;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(device_) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      d.device_used_gib = static_cast<double>(total_b - free_b) / kGiB;
    else
      cudaGetLastError();  // not sticky: clear it, the number stays −1
    return d;
  }

  void order_before(void* other) override {
    if (!other) return;
    cudaCheck(cudaEventRecord(order_ev_, s_.stream));
    cudaCheck(cudaStreamWaitEvent(static_cast<cudaStream_t>(other), order_ev_, 0));
  }
  void wait_for(void* other) override {
    if (!other) return;
    cudaCheck(cudaEventRecord(wait_ev_, static_cast<cudaStream_t>(other)));
    cudaCheck(cudaStreamWaitEvent(s_.stream, wait_ev_, 0));
  }
  void synchronize() override { cudaCheck(cudaStreamSynchronize(s_.stream)); }

  // Timing events, created on first use (with timing, unlike the others) and reused.
  void mark(int set, int point) override {
    check_mark(set, point);
    cudaEvent_t& ev = marks_[set][point];
    if (!ev) {
      cudaCheck(cudaSetDevice(device_));
      cudaCheck(cudaEventCreate(&ev));
    }
    cudaCheck(cudaEventRecord(ev, s_.stream));
    marked_[set][point] = true;
  }
  bool marked_seconds(int set, int from, int to, double* seconds) override {
    check_mark(set, from);
    check_mark(set, to);
    if (!marked_[set][from] || !marked_[set][to]) return false;
    for (cudaEvent_t ev : {marks_[set][from], marks_[set][to]}) {
      const cudaError_t q = cudaEventQuery(ev);
      if (q == cudaErrorNotReady) return false;
      cudaCheck(q);
    }
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, marks_[set][from], marks_[set][to]));
    *seconds = std::max(0.0, static_cast<double>(ms) * 1e-3);
    return true;
  }

  void copy_params_to_host(float* host) override { download(s_.params.get(), host); }
  void download_grads(float* host) override { download(s_.grads.get(), host); }
  void copy_params_from_host(const float* host) override {
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(
        cudaMemcpyAsync(s_.params.get(), host, g_.param_count * sizeof(float), cudaMemcpyHostToDevice, s_.stream));
    cudaCheck(cudaStreamSynchronize(s_.stream));
  }

  // On the host with the CPU model's init (bit-identical for the same seed), uploaded.
  void init_params(uint64_t seed) override {
    std::vector<float> host(g_.param_count);
    for (const auto& p : g_.params) init_param(p, seed, host.data() + p.info.offset);
    copy_params_from_host(host.data());
  }

  std::string tuning() const override { return format_tuning(s_.conv_algos, tuning_comment_); }

  void set_tuning(const std::string& text) override {
    const ConvTuning t = parse_tuning(text);
    if (t.empty()) return;
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaStreamSynchronize(s_.stream));  // no step runs with the plans being replaced
    for (const auto& [key, algo] : t) s_.conv_algos[key] = algo;
    // Plans again, in the same order (the layers keep per-plan state by plan index).
    std::vector<int64_t> sizes;
    for (const auto& p : plans_) sizes.push_back(p->n);
    drop_plans();
    for (int64_t n : sizes) plan_for(n);
  }

  // bf16 needs bf16 tensor cores (compute capability 8.0, A100, or later). A change of
  // precision replans (the convolutions' descriptors and algorithms differ).
  void prepare(int64_t max_batch, Precision precision) override {
    if (max_batch < 1) fail("batch size must be at least 1, got ", max_batch);
    cudaCheck(cudaSetDevice(device_));
    const bool bf16 = precision == Precision::bf16;
    if (bf16 && cc_major_ < 8)
      fail("--precision bf16 on the GPU needs bf16 tensor cores (compute capability 8.0, A100, or later); GPU ", device_,
           " is ", device_name_, " (sm_", cc_major_, cc_minor_, "): use --precision fp32");
    const Paths pp = paths_for(precision);
    const bool nhwc32 = pp.nhwc32, store32 = pp.store32, store = pp.store, bn_own = pp.bn_own;
    const bool retype = store != s_.nhwc_store() || store32 != s_.store32;
    if (bf16 != s_.bf16 || nhwc32 != s_.nhwc32 || retype || bn_own != s_.bn_own) {
      cudaCheck(cudaStreamSynchronize(s_.stream));
      s_.bf16 = bf16;
      s_.nhwc32 = nhwc32;
      s_.bn_own = bn_own;
      drop_plans();
      set_cublas_math();
      if (retype) {  // the activation buffers change type (and size): allocated anew
        s_.store32 = store32;
        assign_types(store);
      }
      const std::vector<char> was_dead = s_.dead;
      assign_fusion();
      if (retype || s_.dead != was_dead) {  // which tensors have buffers changed too
        max_batch = std::max(max_batch, max_batch_);
        max_batch_ = 0;
      }
    }
    ensure_capacity(max_batch);
    plan_for(max_batch_);
  }

  double forward_backward(const float* images, const Targets& targets, int64_t n, const StepContext& ctx,
                          const GradReadyFn& on_ready) override {
    if (n <= 0) fail("forward_backward: empty batch");
    const int32_t* labels = targets.labels;  // the plain cross-entropy only (make_cuda_model)
    if (!labels) internal_error("the GPU model trains on class labels only");
    const int C = g_.classes;
    for (int64_t i = 0; i < n; ++i)
      if (labels[i] < 0 || labels[i] >= C) fail("label ", labels[i], " of sample ", i, " is outside [0, ", C, ")");
    cudaCheck(cudaSetDevice(device_));
    ensure_capacity(n);
    const Plan& plan = plan_for(n);
    if (prof_) prof_->begin_step(s_.stream);  // never with graphs (graph_refusal)
    take_input(images, labels, ctx, n);
    // The device work of forward, loss and backward: enqueued as is, or captured into a
    // CUDA graph and replayed (CNNSCALE_GPU_GRAPH=1, step_graph.hpp). `report` receives
    // the grad-ready points as backward reaches them (as is) or not at all (captured: the
    // caller reports them after the launch).
    const auto enqueue = [&](const GradReadyFn& report) {
      for (int k : order_) {
        if (prof_) prof_->mark(s_.stream, k, LayerProfile::kForward);
        layers_[static_cast<size_t>(k)]->forward(plan, ctx, false);
      }
      const int out = g_.output;
      if (prof_) prof_->mark(s_.stream, -1, LayerProfile::kLoss);
      softmax_ce(s_.data[out], in_labels_[cur_].get(), n, C, ctx.loss_scale, s_.diff[out], d_loss_.get(),
                 d_total_.get(), s_.stream);
      cudaCheck(cudaMemcpyAsync(h_total_.get(), d_total_.get(), sizeof(double), cudaMemcpyDeviceToHost, s_.stream));
      // Captured: an external event record node, which the host can wait for after the
      // launch (a plain record in a capture is only an ordering between streams).
      if (CaptureScope::open()) cudaCheck(cudaEventRecordWithFlags(loss_ev_, s_.stream, cudaEventRecordExternal));
      else cudaCheck(cudaEventRecord(loss_ev_, s_.stream));
      s_.written.assign(g_.tensor_count(), 0);
      s_.written[out] = 1;
      size_t reported = 0;
      if (report) report(0);  // backward begins (enqueued: --timeline shows host times)
      for (size_t i = order_.size(); i-- > 0;) {
        const size_t k = static_cast<size_t>(order_[i]);
        s_.bf_b_holds = nullptr;  // bf16: only a layer's own backward_params leaves its dy there
        if (prof_) prof_->mark(s_.stream, static_cast<int>(k), LayerProfile::kBackwardParams);
        layers_[k]->backward_params(plan);
        if (ready_after_[i] > reported) {
          reported = ready_after_[i];
          if (report) report(reported);
        }
        if (prof_) prof_->mark(s_.stream, static_cast<int>(k), LayerProfile::kBackwardData);
        layers_[k]->backward_data(plan);
      }
      if (prof_) prof_->end_step(s_.stream);
      if (reported < g_.param_count && report) report(g_.param_count);
    };
    const char* no_graph = graphs_.requested() ? graph_refusal(ctx) : nullptr;
    if (no_graph) graphs_.decline(no_graph);
    bool graphed = false;
    if (graphs_.requested() && !no_graph) {
      uint32_t scale_bits = 0;
      std::memcpy(&scale_bits, &ctx.loss_scale, sizeof scale_bits);
      const StepGraphs::Key key{n, cur_, scale_bits, plans_gen_};
      // While captured (CaptureScope open) nothing is reported: the caller's grad-ready
      // work (order_before, the sums) is not the graph's.
      graphed = graphs_.run(key, s_.stream, [&] { enqueue(CaptureScope::open() ? GradReadyFn() : on_ready); });
    } else {
      enqueue(on_ready);
    }
    if (graphed && on_ready) {  // every gradient is final once the graph has run: report them now
      on_ready(0);
      size_t reported = 0;
      for (size_t i = ready_after_.size(); i-- > 0;)  // backward order, as enqueue reports them
        if (ready_after_[i] > reported) on_ready(reported = ready_after_[i]);
      if (reported < g_.param_count) on_ready(g_.param_count);
    }
    cudaCheck(cudaEventRecord(in_free_[cur_], s_.stream));  // the last reader of the input slot (conv1's dW)
    wait_event(loss_ev_, ctx);
    return *h_total_.get();
  }

  // Every plan goes (a new precision, path or tuning) and every step graph with them:
  // they baked in the plans' algorithms and descriptors (step_graph.hpp's key).
  void drop_plans() {
    plans_.clear();
    ++plans_gen_;
    graphs_.clear();
  }

  // Why this step is not offered to the graph (step_graph.hpp), or nullptr.
  const char* graph_refusal(const StepContext& ctx) const {
    if (!ctx.step_graph)
      return "not offered by the caller: more than one rank (the gradient sums would wait for the whole backward), "
             "or not the training loop";
    if (ctx.sum_across_ranks) return "--sync-bn (host sums between layers)";
    if (!ctx.training) return "evaluation";
    if (has_dropout_) return "the model has dropout (a seed per step)";
    if (prof_) return "CNNSCALE_GPU_PROFILE (per-layer events)";
    return nullptr;
  }

  void forward_eval(const float* images, int64_t n, float* logits) override {
    if (n <= 0) return;
    cudaCheck(cudaSetDevice(device_));
    if (max_batch_ == 0) prepare(std::min<int64_t>(n, 256), Precision::fp32);
    const int64_t per = g_.input.numel();
    const int C = g_.classes;
    StepContext ctx;
    ctx.training = false;
    for (int64_t off = 0; off < n; off += max_batch_) {
      const int64_t m = std::min(max_batch_, n - off);
      const Plan& plan = plan_for(m);
      upload(images + off * per, nullptr, nullptr, m);
      for (int k : order_) layers_[static_cast<size_t>(k)]->forward(plan, ctx, true);
      cudaCheck(cudaMemcpyAsync(h_logits_.get(), s_.data[g_.output], static_cast<size_t>(m * C) * sizeof(float),
                                cudaMemcpyDeviceToHost, s_.stream));
      cudaCheck(cudaStreamSynchronize(s_.stream));
      std::memcpy(logits + off * C, h_logits_.get(), static_cast<size_t>(m * C) * sizeof(float));
    }
  }

 private:
  static void check_mark(int set, int point) {
    if (set < 0 || set >= kMarkSets || point < 0 || point >= kMarkPoints)
      internal_error("timing mark (", set, ", ", point, ") outside ", kMarkSets, " x ", kMarkPoints);
  }

  // The host waits for ev by polling, never inside CUDA: the model's queue may be waiting
  // for another queue (the communicator's sums, wait_for) whose failure no CUDA call
  // reports, so ctx.while_waiting (the communicator's error check) runs between polls.
  // Yields for the first ~1k polls (a loss that is nearly there costs no sleep), then
  // sleeps 50 us between polls, leaving the core to the data loader (as
  // NcclCommunicator::wait_event).
  static void wait_event(cudaEvent_t ev, const StepContext& ctx) {
    wait_event_polling(ev, [&] {
      if (ctx.while_waiting) ctx.while_waiting();
    });
  }

  void download(const float* dev, float* host) {
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaMemcpyAsync(host, dev, g_.param_count * sizeof(float), cudaMemcpyDeviceToHost, s_.stream));
    cudaCheck(cudaStreamSynchronize(s_.stream));
  }

  // Per tensor: bf16 NHWC or fp32 (NetState::half, nn::gpu_bf16_tensors, with the store
  // on: bf16 only), which flatten outputs alias their input (an fp32 input with no other
  // reader), which tensors need a gradient, and their readers.
  void assign_types(bool store) {
    const int T = g_.tensor_count();
    s_.half.clear();
    if (store) s_.half = gpu_bf16_tensors(g_);
    s_.readers.assign(T, 0);
    for (const Node& nd : g_.nodes)
      for (int t : nd.inputs) s_.readers[t]++;
    s_.alias.assign(T, false);
    s_.needs_diff.assign(T, true);
    s_.needs_diff[0] = false;
    for (const Node& nd : g_.nodes) {
      const int in = nd.inputs[0], out = nd.index + 1;
      if (nd.op == Op::flatten && s_.readers[in] == 1 && !s_.is_nhwc(in)) {
        s_.alias[out] = true;
        s_.needs_diff[out] = s_.needs_diff[in];
      }
    }
  }

  // Which GPU paths a precision takes here (decided by prepare; supports_sync_bn asks before).
  struct Paths {
    bool nhwc32 = false, store32 = false, store = false, bn_own = false;
  };
  Paths paths_for(Precision precision) const {
    const bool bf16 = precision == Precision::bf16;
    Paths p;
    // TF32 convolutions on NHWC copies where TF32 tensor cores exist (NetState::nhwc32);
    // CNNSCALE_TF32_NCHW=1 keeps them on the NCHW tensors (for comparison). Decided in
    // prepare: a model used without prepare() (tests) keeps NCHW.
    const char* nchw = std::getenv("CNNSCALE_TF32_NCHW");
    p.nhwc32 = !bf16 && s_.tf32 && cc_major_ >= 8 && !(nchw && std::string(nchw) == "1");
    // bf16 keeps its activations in bf16 NHWC (NetState::half) unless CNNSCALE_GPU_BF16_STORE=0.
    const char* st = std::getenv("CNNSCALE_GPU_BF16_STORE");
    // TF32 keeps the same tensors in fp32 NHWC (NetState::store32) with
    // CNNSCALE_GPU_NHWC_STORE=1: not yet run on a GPU, so not the default.
    const char* n32 = std::getenv("CNNSCALE_GPU_NHWC_STORE");
    p.store32 = p.nhwc32 && n32 && std::string(n32) == "1";
    p.store = (bf16 && !(st && std::string(st) == "0")) || p.store32;
    // The store's batch norms on our own fused NHWC kernels: CNNSCALE_GPU_BN=own (layer_bn.cpp;
    // not yet run on a GPU, so not the default); "cudnn" or unset: cuDNN.
    p.bn_own = p.store && bn_choice() == "own";
    return p;
  }

  // --sync-bn runs in our batch norm only: every batch norm must read a store tensor (a
  // batch norm on an fp32 NCHW tensor would be cuDNN's, which it refuses at its forward).
  bool supports_sync_bn(Precision precision) const override { return paths_for(precision).bn_own; }

  static std::string bn_choice() {
    const char* v = std::getenv("CNNSCALE_GPU_BN");
    const std::string c = v ? v : "";
    if (!c.empty() && c != "own" && c != "cudnn")
      fail("CNNSCALE_GPU_BN=", c, " is not a batch-norm implementation: use own (our fused NHWC kernels) or cudnn");
    return c;
  }

  // With NetState::bn_own, which batch norms absorb the layers after them
  // (NetState::bn_fusion), which tensors need no buffers (NetState::dead), the order the
  // layers run in (order_) and the grad-ready points (ready_after_): nn::plan_gpu_fusion
  // (graph.hpp says how; its CPU tests check every model).
  void assign_fusion() {
    nn::FusionPlan p = plan_gpu_fusion(g_, s_.half, s_.bn_own);
    s_.bn_fusion = std::move(p.bn);
    s_.absorbed = std::move(p.absorbed);
    s_.dead = std::move(p.dead);
    order_ = std::move(p.order);
    ready_after_ = std::move(p.ready_after);
  }

  // Activation buffers, masks, input slots and staging for batches of up to n samples.
  void ensure_capacity(int64_t n) {
    if (n <= max_batch_) return;
    cudaCheck(cudaStreamSynchronize(s_.stream));
    cudaCheck(cudaStreamSynchronize(copy_stream_));  // no copy into the old input slots in flight
    max_batch_ = n;
    const int T = g_.tensor_count();
    auto numel = [&](int t) { return t == 0 ? g_.input.numel() : g_.nodes[t - 1].out.numel(); };
    bufs_.clear();
    s_.data.assign(T, nullptr);
    s_.diff.assign(T, nullptr);
    auto make = [&](int64_t count) {  // count floats
      bufs_.emplace_back();
      bufs_.back().alloc(static_cast<size_t>(count), s_.stream);
      return bufs_.back().get();
    };
    bufs_.reserve(2 * T);
    for (int t = 0; t < T; ++t) {
      if (s_.alias[t]) {  // flatten output: the input's buffers
        const int in = g_.nodes[t - 1].inputs[0];
        s_.data[t] = s_.data[in];
        s_.diff[t] = s_.diff[in];
        continue;
      }
      if (t == 0) {  // the input: two device slots (double buffering, see stage())
        for (auto& a : in_images_) a.alloc(static_cast<size_t>(n * numel(0)), s_.stream);
        s_.data[0] = in_images_[cur_].get();
      }
      if (s_.is_dead(t)) continue;  // a fused batch norm writes past it: no buffers
      // A bf16 tensor (NetState::half) takes half the floats, rounded up.
      const int64_t floats = s_.is_half(t) ? (n * numel(t) + 1) / 2 : n * numel(t);
      if (t > 0) s_.data[t] = make(floats);
      s_.diff[t] = make(floats);  // also for the input: batch-norm always writes a data gradient
    }
    for (auto& l : layers_) l->reserve(n);
    const size_t N = static_cast<size_t>(n);
    for (auto& a : in_labels_) a.alloc(N, s_.stream);
    for (auto& a : in_ids_) a.alloc(N, s_.stream);
    s_.sample_ids = in_ids_[cur_].get();
    d_loss_.alloc(N, s_.stream);
    s_.ones.alloc(N, s_.stream);
    std::vector<float> ones(N, 1.f);
    // On the model's queue, after alloc's zero fill (a cudaMemcpy on the legacy stream is
    // not ordered with it); the pageable source is staged before the call returns.
    cudaCheck(cudaMemcpyAsync(s_.ones.get(), ones.data(), N * sizeof(float), cudaMemcpyHostToDevice, s_.stream));
    cudaCheck(cudaStreamSynchronize(s_.stream));
    h_images_.alloc(N * static_cast<size_t>(g_.input.numel()));
    h_labels_.alloc(N);
    h_ids_.alloc(N);
    h_logits_.alloc(N * static_cast<size_t>(g_.classes));
  }

  // TF32 tensor cores for the fp32 matmuls (linear layers) unless --tf32 off or bf16
  // (whose fp32 cuBLAS calls left, db's gemv, stay full fp32, as run.json's "tf32": false
  // says); cuBLAS still computes in fp32 on GPUs without them (before Ampere).
  void set_cublas_math() {
    cublasCheck(cublasSetMathMode(s_.cublas, s_.tf32 && !s_.bf16 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }

  // bf16 (or fp32 NHWC: NetState::nhwc32) scratch for batches of up to max_batch_ (grown, never shrunk).
  void ensure_bf16_scratch() {
    Bf16Need need;
    for (const auto& l : layers_) {
      const Bf16Need b = l->bf16_need(max_batch_);
      need.a = std::max(need.a, b.a);
      need.b = std::max(need.b, b.b);
      need.w = std::max(need.w, b.w);
    }
    bool sync = false;
    auto grow = [&](auto* arr, int64_t count) {
      if (arr->size() >= static_cast<size_t>(count)) return;
      if (!sync) cudaCheck(cudaStreamSynchronize(s_.stream));  // no kernel still reads the old buffer
      sync = true;
      arr->alloc(static_cast<size_t>(count), s_.stream);
    };
    if (s_.bf16) {
      grow(&s_.bf_a, need.a);
      grow(&s_.bf_b, need.b);
      grow(&s_.bf_w, need.w);
    }
    if (s_.nhwc32) {  // the same counts in fp32 (NetState::nhwc32)
      grow(&s_.nh_a, need.a);
      grow(&s_.nh_b, need.b);
      grow(&s_.nh_w, need.w);
    }
  }

  const Plan& plan_for(int64_t n) {
    for (const auto& p : plans_)
      if (p->n == n) return *p;
    auto plan = std::make_unique<Plan>();
    plan->index = static_cast<int>(plans_.size());
    plan->n = n;
    const int T = g_.tensor_count();
    for (int t = 0; t < T; ++t) {
      if (t == 0) {
        plan->t.push_back(tensor_desc(n, g_.input.channels, g_.input.height, g_.input.width));
      } else {
        const Shape& s = g_.nodes[t - 1].out;
        if (s_.is_nhwc(t))
          plan->t.push_back(tensor_desc(n, s.c, s.h, s.w, CUDNN_TENSOR_NHWC,
                                        s_.is_half(t) ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT));
        else
          plan->t.push_back(tensor_desc(n, s.c, s.flat ? 1 : s.h, s.flat ? 1 : s.w));
      }
    }
    if (s_.bf16 || s_.nhwc32) ensure_bf16_scratch();
    size_t ws = 0;
    for (auto& l : layers_) ws = std::max(ws, l->plan(*plan));
    if (ws > s_.workspace.size()) {  // grows once per new batch size at most, never in steady state
      cudaCheck(cudaStreamSynchronize(s_.stream));
      s_.workspace.alloc(ws, s_.stream);
    }
    plans_.push_back(std::move(plan));
    return *plans_.back();
  }

  // The unstaged path (forward_eval, and forward_backward without a live ticket): the
  // host data through one pinned buffer into the CURRENT input slot, on the model's
  // stream (so after every earlier reader of that slot). A staged copy into this slot
  // later waits for in_free_[cur_], recorded after this step's backward (forward_eval
  // synchronizes its stream before it returns).
  void upload(const float* images, const int32_t* labels, const int64_t* ids, int64_t n) {
    cudaCheck(cudaEventSynchronize(staged_ev_));  // the previous batch left the staging buffers
    const size_t N = static_cast<size_t>(n);
    const size_t img = N * static_cast<size_t>(g_.input.numel());
    std::memcpy(h_images_.get(), images, img * sizeof(float));
    cudaCheck(cudaMemcpyAsync(s_.data[0], h_images_.get(), img * sizeof(float), cudaMemcpyHostToDevice, s_.stream));
    if (labels) {
      std::memcpy(h_labels_.get(), labels, N * sizeof(int32_t));
      for (size_t i = 0; i < N; ++i) h_ids_.get()[i] = ids ? ids[i] : static_cast<int64_t>(i);
      cudaCheck(cudaMemcpyAsync(in_labels_[cur_].get(), h_labels_.get(), N * sizeof(int32_t), cudaMemcpyHostToDevice,
                                s_.stream));
      cudaCheck(
          cudaMemcpyAsync(in_ids_[cur_].get(), h_ids_.get(), N * sizeof(int64_t), cudaMemcpyHostToDevice, s_.stream));
    }
    cudaCheck(cudaEventRecord(staged_ev_, s_.stream));
  }

 public:
  // ---- staging: pinned host slots written by the data pipeline's thread ----
  //
  // stage() (any thread; the prefetcher's through the Trainer's BatchHook) copies a batch
  // into a free pinned host slot and returns a ticket (increasing). forward_backward with
  // ctx.staged == that ticket (training thread) switches to the other device input slot,
  // makes the copy stream wait until that slot's last reader is done (in_free_, recorded
  // after the backward of the step that used it), copies the host slot into it on the
  // copy stream, records the host slot's `copied` event, and makes the model's stream
  // wait for that event. So the H2D copy of step k+1 runs while the GPU still computes
  // the backward (and the optimizer) of step k, and the training thread does no memcpy.
  // Safety, under mu_: a slot being written has ticket -1, so no consumer reads it; a
  // consumed slot (ticket -1, `copying`) is rewritten only after its `copied` event
  // (recorded under mu_ before `copying` was set) has completed; pinned memory is freed
  // (a slot grown for a larger batch) only after that wait, or in the destructor after
  // both streams are synchronized. The hook must be removed before the model goes
  // (Trainer's destructor does). A ticket whose slot was reused (staged more than
  // kHostSlots batches ahead, or dropped by a seek) or whose size differs is stale:
  // forward_backward then copies the host pointers (upload()): the same bytes reach the
  // device either way. Slots are allocated on first use (about prefetch depth + 2 in steady
  // state: a consumed slot is reused, least recently staged first).
  int64_t stage(const float* images, const int32_t* labels, const int64_t* ids, int64_t n) override {
    if (n <= 0 || !images || !labels) return -1;
    cudaCheck(cudaSetDevice(device_));  // per host thread
    HostSlot* h = nullptr;
    bool wait = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      // A free allocated slot, least recently staged (its copy is the likeliest done);
      // else an unallocated one; else the slot of the oldest ticket (it goes stale).
      for (HostSlot& c : slots_)
        if (!c.writing && c.ticket < 0 && c.cap > 0 && (!h || c.used < h->used)) h = &c;
      for (HostSlot& c : slots_)
        if (!h && !c.writing && c.cap == 0) h = &c;
      if (!h)
        for (HostSlot& c : slots_)
          if (!c.writing && c.ticket >= 0 && (!h || c.ticket < h->ticket)) h = &c;
      if (!h) return -1;
      h->ticket = -1;
      h->writing = true;
      wait = h->copying;
      h->copying = false;
    }
    try {
      if (wait) cudaCheck(cudaEventSynchronize(h->copied));  // its last H2D copy has read it
      const size_t N = static_cast<size_t>(n), per = static_cast<size_t>(g_.input.numel());
      if (h->cap < N) {
        h->images.alloc(N * per);
        h->labels.alloc(N);
        h->ids.alloc(N);
        h->cap = N;
      }
      std::memcpy(h->images.get(), images, N * per * sizeof(float));
      std::memcpy(h->labels.get(), labels, N * sizeof(int32_t));
      for (size_t i = 0; i < N; ++i) h->ids.get()[i] = ids ? ids[i] : static_cast<int64_t>(i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      h->writing = false;
      throw;
    }
    std::lock_guard<std::mutex> lk(mu_);
    h->n = n;
    h->ticket = next_ticket_++;
    h->used = h->ticket;
    h->writing = false;
    return h->ticket;
  }

 private:
  // The next input slot, filled from the ticket's host slot (copy stream) or, without a
  // live ticket, from the host pointers (model stream).
  void take_input(const float* images, const int32_t* labels, const StepContext& ctx, int64_t n) {
    cur_ ^= 1;
    s_.data[0] = in_images_[cur_].get();
    for (int t = 1; t < g_.tensor_count(); ++t)  // flatten views of the input follow it
      if (s_.alias[t]) s_.data[t] = s_.data[g_.nodes[t - 1].inputs[0]];
    s_.sample_ids = in_ids_[cur_].get();
    if (ctx.staged >= 0) {
      std::lock_guard<std::mutex> lk(mu_);
      for (HostSlot& h : slots_) {
        if (h.ticket != ctx.staged || h.n != n || h.writing) continue;
        const size_t N = static_cast<size_t>(n), img = N * static_cast<size_t>(g_.input.numel());
        h.ticket = -1;  // consumed
        cudaCheck(cudaStreamWaitEvent(copy_stream_, in_free_[cur_], 0));
        cudaCheck(cudaMemcpyAsync(in_images_[cur_].get(), h.images.get(), img * sizeof(float), cudaMemcpyHostToDevice,
                                  copy_stream_));
        cudaCheck(cudaMemcpyAsync(in_labels_[cur_].get(), h.labels.get(), N * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, copy_stream_));
        cudaCheck(cudaMemcpyAsync(in_ids_[cur_].get(), h.ids.get(), N * sizeof(int64_t), cudaMemcpyHostToDevice,
                                  copy_stream_));
        cudaCheck(cudaEventRecord(h.copied, copy_stream_));
        h.copying = true;
        cudaCheck(cudaStreamWaitEvent(s_.stream, h.copied, 0));
        staged_steps_++;
        return;
      }
    }
    upload(images, labels, ctx.sample_ids, n);
  }

  Graph g_;
  std::string name_, spec_, identity_, tuning_comment_, device_name_;
  int device_ = 0, cc_major_ = 0, cc_minor_ = 0;
  NetState s_;                                  // handles, flat buffers, activations: what the layers share
  std::vector<std::unique_ptr<Layer>> layers_;  // one per node
  std::vector<int> order_;                      // the nodes that run, in forward order (assign_fusion)
  std::vector<size_t> ready_after_;             // per order_ position: gradients final below this flat offset
  cudaEvent_t staged_ev_ = nullptr, loss_ev_ = nullptr, order_ev_ = nullptr, wait_ev_ = nullptr;
  cudaEvent_t marks_[kMarkSets][kMarkPoints] = {};  // mark(): timing events, created on first use
  bool marked_[kMarkSets][kMarkPoints] = {};        // recorded at least once
  int64_t max_batch_ = 0;
  std::vector<DevArray<float>> bufs_;  // the activations and their gradients (bf16 ones in half the floats)
  // Input double buffering (stage(), take_input()): device slot cur_ is this step's.
  DevArray<float> in_images_[2];
  DevArray<int32_t> in_labels_[2];
  DevArray<int64_t> in_ids_[2];
  cudaEvent_t in_free_[2] = {nullptr, nullptr};  // after the backward of the last step that read the slot
  std::unique_ptr<LayerProfile> prof_;            // CNNSCALE_GPU_PROFILE (layer_profile.hpp)
  int cur_ = 0;
  cudaStream_t copy_stream_ = nullptr;
  struct HostSlot {
    Pinned<float> images;
    Pinned<int32_t> labels;
    Pinned<int64_t> ids;
    size_t cap = 0;               // samples the buffers hold
    int64_t n = 0;                // samples staged
    int64_t ticket = -1;          // -1: free (never used, being written, or consumed)
    int64_t used = -1;            // the last ticket it held
    bool writing = false;         // stage() is filling it (outside mu_)
    bool copying = false;         // consumed: an H2D copy from it was enqueued, `copied` follows it
    cudaEvent_t copied = nullptr;
  };
  static constexpr int kHostSlots = 8;  // allocated on first use
  std::mutex mu_;                       // slots_, next_ticket_
  HostSlot slots_[kHostSlots];
  int64_t next_ticket_ = 0;
  std::atomic<int64_t> staged_steps_{0};  // steps whose input came from a staged slot
  DevArray<double> d_loss_, d_total_;
  Pinned<float> h_images_, h_logits_;
  Pinned<int32_t> h_labels_;
  Pinned<int64_t> h_ids_;
  Pinned<double> h_total_;
  std::vector<std::unique_ptr<Plan>> plans_;
  uint64_t plans_gen_ = 0;  // drop_plans() calls: part of a step graph's key
  // CNNSCALE_GPU_GRAPH=1: the step as CUDA graphs (step_graph.hpp; not yet run on a GPU).
  StepGraphs graphs_{env_is("CNNSCALE_GPU_GRAPH", "1")};
  DevArray<char> cublas_ws_;  // with graphs only
  bool has_dropout_ = false;  // no graph: its seed changes every step
  static bool env_is(const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::string(v) == value;
  }
};

}  // namespace
}  // namespace nn::cuda

std::unique_ptr<DeviceModel> make_cuda_model(const std::string& name_or_spec, const SampleShape& input, int classes,
                                             int device, const ModelOptions& options) {
  if (options.task && !options.task->plain_cross_entropy())
    fail("--device cuda trains with the plain cross-entropy over class labels only; ", options.task->describe(),
         " runs on the CPU model (leave out --device cuda) until the GPU model has it");
  if (input.volume())
    fail("--device cuda: the GPU model has no 3-D layers yet and the data are volumes (", input.text(),
         "); train on the CPU model (leave out --device cuda)");
  return std::make_unique<nn::cuda::CudaNet>(nn::build_model_graph(name_or_spec, input, classes, options), device,
                                             options.tf32, options.cudnn_benchmark);
}

}  // namespace cnnscale
