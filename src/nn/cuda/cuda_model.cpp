// cuda_model.cpp — CudaNet: the Model of nn/cuda_model.hpp. It runs the Graph of the
// CPU model (built by make_model, whose init it also reuses) on one device:
//   conv      cudnnConvolutionForward / BackwardData / BackwardFilter / BackwardBias,
//             cudnnAddTensor for the bias; algorithms from cudnnGet*Algorithm_v7
//             (deterministic ones preferred), one workspace for all convs
//   relu      cudnnActivationForward / Backward
//   pools     cudnnPoolingForward / Backward (max: CUDNN_POOLING_MAX_DETERMINISTIC)
//   bn        cudnnBatchNormalizationForwardTraining / Inference / Backward (spatial)
//   linear    cublasSgemm (x·Wᵀ on the PyTorch out×in layout, bias as a rank-1 gemm),
//             cublasSgemv for the bias gradient
//   add       cudaMemcpyAsync + cublasSaxpy
//   flatten   no op (the output aliases the input)
//   dropout, softmax cross-entropy, num_batches_tracked: kernels.cu
// Activations are plain NCHW fp32. A tensor read by several nodes gets its gradient
// written by the first reader in backward order (beta 0) and accumulated by the
// others (beta 1). No TF32: CUDNN_FMA_MATH on every convolution descriptor and
// CUBLAS_DEFAULT_MATH on the cuBLAS handle.
#include "nn/cuda_model.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "util/cuda/check.hpp"
#include "nn/cuda/kernels.hpp"
#include "nn/dropout_mask.hpp"
#include "nn/graph.hpp"
#include "nn/net.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace nn::cuda {
namespace {

constexpr float kOne = 1.f, kZero = 0.f;
constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;  // PyTorch's defaults, as the CPU model
constexpr size_t kMaxConvWorkspace = size_t{512} << 20;

// Device memory of n elements of T (zero-filled), freed on destruction.
template <class T>
class DevArray {
 public:
  DevArray() = default;
  DevArray(const DevArray&) = delete;
  DevArray& operator=(const DevArray&) = delete;
  DevArray(DevArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  ~DevArray() { release(); }
  void alloc(size_t n) {
    release();
    if (n == 0) return;
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    cudaCheck(cudaMemset(p_, 0, n * sizeof(T)));
    n_ = n;
  }
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr, n_ = 0;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Page-locked host memory (for asynchronous copies).
template <class T>
class Pinned {
 public:
  Pinned() = default;
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
  ~Pinned() { release(); }
  void alloc(size_t n) {
    release();
    if (n) cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  void release() {
    if (p_) cudaFreeHost(p_);
    p_ = nullptr;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Desc {
 public:
  Desc() { cudnnCheck(Create(&d_)); }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() { Destroy(d_); }
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActDesc = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

std::unique_ptr<TensorDesc> tensor_desc(int64_t n, int c, int h, int w) {
  auto d = std::make_unique<TensorDesc>();
  cudnnCheck(cudnnSetTensor4dDescriptor(d->get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n), c, h, w));
  return d;
}

// The first algorithm that worked in cuDNN's ranking, within the workspace cap;
// deterministic ones first (so that a rerun gives the same bits).
template <class Perf>
Perf choose(const Perf* perf, int count, const char* what) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspace) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      return p;
    }
  throw std::runtime_error(std::string("cuDNN offers no usable ") + what + " algorithm for this convolution");
}

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
};

// Batch-independent state of one node.
struct NodeState {
  std::unique_ptr<FilterDesc> w;      // conv
  std::unique_ptr<ConvDesc> conv;     // conv
  std::unique_ptr<TensorDesc> chan;   // conv bias / bn scale etc.: 1×C×1×1
  std::unique_ptr<PoolDesc> pool;     // pools
  DevArray<float> save_mean, save_inv_var;  // bn (training forward → backward)
  DevArray<uint8_t> mask;             // dropout (max_batch × numel)
  bool dropout_active = false;
};

class CudaNet final : public DeviceModel {
 public:
  CudaNet(std::unique_ptr<Model> cpu, int device) : cpu_(std::move(cpu)), device_(device) {
    auto* net = dynamic_cast<Net*>(cpu_.get());
    if (!net) throw std::logic_error("make_cuda_model: make_model did not return an nn::Net");
    g_ = &net->graph();
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) fail("no usable CUDA device: ", cudaGetErrorString(rc));
    if (device < 0 || device >= count) fail("CUDA device ", device, " does not exist (", count, " visible)");
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreateWithFlags(&staged_ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&loss_ev_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&order_ev_, cudaEventDisableTiming));
    cudnnCheck(cudnnCreate(&cudnn_));
    cudnnCheck(cudnnSetStream(cudnn_, stream_));
    cublasCheck(cublasCreate(&cublas_));
    cublasCheck(cublasSetStream(cublas_, stream_));
    cublasCheck(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));  // no TF32
    cudnnCheck(cudnnSetActivationDescriptor(act_.get(), CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));

    const size_t P = std::max<size_t>(g_->param_count, 1);
    params_.alloc(P);
    grads_.alloc(P);  // zero; never written for non-trainable parameters
    copy_params_from_host(cpu_->param_data());
    d_total_.alloc(1);
    h_total_.alloc(1);

    const int T = g_->tensor_count();
    consumers_.assign(T, 0);
    for (const Node& nd : g_->nodes)
      for (int t : nd.inputs) consumers_[t]++;
    alias_.assign(T, false);
    needs_diff_.assign(T, true);
    needs_diff_[0] = false;
    for (const Node& nd : g_->nodes) {
      const int in = nd.inputs[0], out = nd.index + 1;
      if (nd.op == Op::flatten && consumers_[in] == 1) {
        alias_[out] = true;
        needs_diff_[out] = needs_diff_[in];
      }
    }
    nodes_.resize(g_->nodes.size());
    for (const Node& nd : g_->nodes) {
      NodeState& s = nodes_[nd.index];
      switch (nd.op) {
        case Op::conv:
          s.w = std::make_unique<FilterDesc>();
          cudnnCheck(cudnnSetFilter4dDescriptor(s.w->get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd.out_channels,
                                                nd.in.c, nd.kernel, nd.kernel));
          s.conv = std::make_unique<ConvDesc>();
          cudnnCheck(cudnnSetConvolution2dDescriptor(s.conv->get(), nd.pad, nd.pad, nd.stride, nd.stride, 1, 1,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
          cudnnCheck(cudnnSetConvolutionMathType(s.conv->get(), CUDNN_FMA_MATH));  // no TF32
          s.chan = tensor_desc(1, nd.out_channels, 1, 1);
          break;
        case Op::maxpool:
        case Op::avgpool:
          s.pool = std::make_unique<PoolDesc>();
          cudnnCheck(cudnnSetPooling2dDescriptor(
              s.pool->get(),
              nd.op == Op::maxpool ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
              CUDNN_NOT_PROPAGATE_NAN, nd.kernel, nd.kernel, 0, 0, nd.stride, nd.stride));
          break;
        case Op::bn:
          s.chan = tensor_desc(1, nd.in.c, 1, 1);
          s.save_mean.alloc(static_cast<size_t>(nd.in.c));
          s.save_inv_var.alloc(static_cast<size_t>(nd.in.c));
          break;
        default: break;
      }
    }
  }

  ~CudaNet() override {
    // No checks here: a destructor must not abort the job.
    cudaSetDevice(device_);
    if (stream_) cudaStreamSynchronize(stream_);
    plans_.clear();
    nodes_.clear();
    if (cublas_) cublasDestroy(cublas_);
    if (cudnn_) cudnnDestroy(cudnn_);
    for (cudaEvent_t e : {staged_ev_, loss_ev_, order_ev_})
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return cpu_->name(); }
  std::string spec() const override { return cpu_->spec(); }
  const std::vector<ParamInfo>& params() const override { return cpu_->params(); }
  float* param_data() override { return params_.get(); }
  float* grad_data() override { return grads_.get(); }
  size_t param_count() const override { return g_->param_count; }
  int classes() const override { return g_->classes; }
  int device() const override { return device_; }
  void* stream() const override { return stream_; }

  void order_before(void* other) override {
    cudaCheck(cudaEventRecord(order_ev_, stream_));
    cudaCheck(cudaStreamWaitEvent(static_cast<cudaStream_t>(other), order_ev_, 0));
  }
  void synchronize() override { cudaCheck(cudaStreamSynchronize(stream_)); }

  void copy_params_to_host(float* host) override { download(params_.get(), host); }
  void download_grads(float* host) override { download(grads_.get(), host); }
  void copy_params_from_host(const float* host) override {
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaMemcpyAsync(params_.get(), host, g_->param_count * sizeof(float), cudaMemcpyHostToDevice, stream_));
    cudaCheck(cudaStreamSynchronize(stream_));
  }

  void init_params(uint64_t seed) override {
    cpu_->init_params(seed);  // the CPU model's init: bit-identical initial parameters
    copy_params_from_host(cpu_->param_data());
  }

  void prepare(int64_t max_batch, Precision precision) override {
    if (max_batch < 1) fail("batch size must be at least 1, got ", max_batch);
    if (precision != Precision::fp32) fail("--precision bf16: bf16 on GPU not yet supported; use --precision fp32");
    cudaCheck(cudaSetDevice(device_));
    ensure_capacity(max_batch);
    plan_for(max_batch_);
  }

  double forward_backward(const float* images, const int32_t* labels, int64_t n, const StepContext& ctx,
                          const GradReadyFn& on_ready) override {
    if (n <= 0) fail("forward_backward: empty batch");
    const int C = g_->classes;
    for (int64_t i = 0; i < n; ++i)
      if (labels[i] < 0 || labels[i] >= C) fail("label ", labels[i], " of sample ", i, " is outside [0, ", C, ")");
    cudaCheck(cudaSetDevice(device_));
    ensure_capacity(n);
    const Plan& plan = plan_for(n);
    upload(images, labels, ctx.sample_ids, n);
    forward(plan, ctx, false);

    const int out = g_->output;
    softmax_ce(data_[out], d_labels_.get(), n, C, ctx.loss_scale, diff_[out], d_loss_.get(), d_total_.get(), stream_);
    cudaCheck(cudaMemcpyAsync(h_total_.get(), d_total_.get(), sizeof(double), cudaMemcpyDeviceToHost, stream_));
    cudaCheck(cudaEventRecord(loss_ev_, stream_));

    written_.assign(g_->tensor_count(), 0);
    written_[out] = 1;
    size_t reported = 0;
    for (size_t k = g_->nodes.size(); k-- > 0;) {
      const Node& nd = g_->nodes[k];
      backward_params(plan, nd);
      if (!nd.params.empty() && nd.flat_end > reported) {
        reported = nd.flat_end;
        if (on_ready) on_ready(reported);
      }
      backward_data(plan, nd);
    }
    if (reported < g_->param_count && on_ready) on_ready(g_->param_count);
    cudaCheck(cudaEventSynchronize(loss_ev_));
    return *h_total_.get();
  }

  void forward_eval(const float* images, int64_t n, float* logits) override {
    if (n <= 0) return;
    cudaCheck(cudaSetDevice(device_));
    if (max_batch_ == 0) prepare(std::min<int64_t>(n, 256), Precision::fp32);
    const int64_t per = g_->input.numel();
    const int C = g_->classes;
    StepContext ctx;
    ctx.training = false;
    for (int64_t off = 0; off < n; off += max_batch_) {
      const int64_t m = std::min(max_batch_, n - off);
      const Plan& plan = plan_for(m);
      upload(images + off * per, nullptr, nullptr, m);
      forward(plan, ctx, true);
      cudaCheck(cudaMemcpyAsync(h_logits_.get(), data_[g_->output], static_cast<size_t>(m * C) * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
      cudaCheck(cudaStreamSynchronize(stream_));
      std::memcpy(logits + off * C, h_logits_.get(), static_cast<size_t>(m * C) * sizeof(float));
    }
  }

 private:
  struct Plan {
    int64_t n = 0;
    std::vector<std::unique_ptr<TensorDesc>> t;  // per tensor
    std::vector<ConvAlgos> algo;                 // per node (convs)
  };

  void download(const float* dev, float* host) {
    cudaCheck(cudaSetDevice(device_));
    cudaCheck(cudaMemcpyAsync(host, dev, g_->param_count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    cudaCheck(cudaStreamSynchronize(stream_));
  }

  // Activation buffers, masks and staging for batches of up to n samples.
  void ensure_capacity(int64_t n) {
    if (n <= max_batch_) return;
    cudaCheck(cudaStreamSynchronize(stream_));
    max_batch_ = n;
    const int T = g_->tensor_count();
    auto numel = [&](int t) { return t == 0 ? g_->input.numel() : g_->nodes[t - 1].out.numel(); };
    store_.clear();
    data_.assign(T, nullptr);
    diff_.assign(T, nullptr);
    auto make = [&](int64_t count) {
      store_.emplace_back();
      store_.back().alloc(static_cast<size_t>(count));
      return store_.back().get();
    };
    store_.reserve(2 * T);
    for (int t = 0; t < T; ++t) {
      if (alias_[t]) {  // flatten output: the input's buffers
        const int in = g_->nodes[t - 1].inputs[0];
        data_[t] = data_[in];
        diff_[t] = diff_[in];
        continue;
      }
      data_[t] = make(n * numel(t));
      diff_[t] = make(n * numel(t));  // also for the input: batch-norm always writes a data gradient
    }
    for (const Node& nd : g_->nodes)
      if (nd.op == Op::dropout) nodes_[nd.index].mask.alloc(static_cast<size_t>(n * nd.out.numel()));
    const size_t N = static_cast<size_t>(n);
    d_labels_.alloc(N);
    d_ids_.alloc(N);
    d_loss_.alloc(N);
    ones_.alloc(N);
    std::vector<float> ones(N, 1.f);
    cudaCheck(cudaMemcpy(ones_.get(), ones.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    h_images_.alloc(N * static_cast<size_t>(g_->input.numel()));
    h_labels_.alloc(N);
    h_ids_.alloc(N);
    h_logits_.alloc(N * static_cast<size_t>(g_->classes));
  }

  const Plan& plan_for(int64_t n) {
    for (const auto& p : plans_)
      if (p->n == n) return *p;
    auto plan = std::make_unique<Plan>();
    plan->n = n;
    const int T = g_->tensor_count();
    for (int t = 0; t < T; ++t) {
      if (t == 0) {
        plan->t.push_back(tensor_desc(n, g_->input.channels, g_->input.height, g_->input.width));
      } else {
        const Shape& s = g_->nodes[t - 1].out;
        plan->t.push_back(tensor_desc(n, s.c, s.flat ? 1 : s.h, s.flat ? 1 : s.w));
      }
    }
    plan->algo.resize(g_->nodes.size());
    size_t ws = 0;
    for (const Node& nd : g_->nodes) {
      const NodeState& s = nodes_[nd.index];
      const cudnnTensorDescriptor_t xd = plan->t[nd.inputs[0]]->get(), yd = plan->t[nd.index + 1]->get();
      int on = 0, oc = 0, oh = 0, ow = 0;
      if (nd.op == Op::conv) {
        cudnnCheck(cudnnGetConvolution2dForwardOutputDim(s.conv->get(), xd, s.w->get(), &on, &oc, &oh, &ow));
      } else if (nd.op == Op::maxpool || nd.op == Op::avgpool) {
        cudnnCheck(cudnnGetPooling2dForwardOutputDim(s.pool->get(), xd, &on, &oc, &oh, &ow));
      } else {
        continue;
      }
      if (on != n || oc != nd.out.c || oh != nd.out.h || ow != nd.out.w)
        throw std::logic_error("cuDNN output shape differs from the graph's at node " + std::to_string(nd.index));
      if (nd.op != Op::conv) continue;
      ConvAlgos& a = plan->algo[nd.index];
      size_t bytes = 0;
      int got = 0;
      {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        cudnnCheck(cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, xd, s.w->get(), s.conv->get(), yd,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
        a.fwd = choose(perf, got, "forward").algo;
        cudnnCheck(cudnnGetConvolutionForwardWorkspaceSize(cudnn_, xd, s.w->get(), s.conv->get(), yd, a.fwd, &bytes));
        ws = std::max(ws, bytes);
      }
      {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, xd, yd, s.conv->get(), s.w->get(),
                                                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
        a.bwd_filter = choose(perf, got, "backward-filter").algo;
        cudnnCheck(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, xd, yd, s.conv->get(), s.w->get(),
                                                                  a.bwd_filter, &bytes));
        ws = std::max(ws, bytes);
      }
      if (needs_diff_[nd.inputs[0]]) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, s.w->get(), yd, s.conv->get(), xd,
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
        a.bwd_data = choose(perf, got, "backward-data").algo;
        cudnnCheck(cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, s.w->get(), yd, s.conv->get(), xd,
                                                                a.bwd_data, &bytes));
        ws = std::max(ws, bytes);
      }
    }
    if (ws > workspace_.size()) {  // grows once per new batch size at most, never in steady state
      cudaCheck(cudaStreamSynchronize(stream_));
      workspace_.alloc(ws);
    }
    plans_.push_back(std::move(plan));
    return *plans_.back();
  }

  void upload(const float* images, const int32_t* labels, const int64_t* ids, int64_t n) {
    cudaCheck(cudaEventSynchronize(staged_ev_));  // the previous batch left the staging buffers
    const size_t N = static_cast<size_t>(n);
    const size_t img = N * static_cast<size_t>(g_->input.numel());
    std::memcpy(h_images_.get(), images, img * sizeof(float));
    cudaCheck(cudaMemcpyAsync(data_[0], h_images_.get(), img * sizeof(float), cudaMemcpyHostToDevice, stream_));
    if (labels) {
      std::memcpy(h_labels_.get(), labels, N * sizeof(int32_t));
      for (size_t i = 0; i < N; ++i) h_ids_.get()[i] = ids ? ids[i] : static_cast<int64_t>(i);
      cudaCheck(cudaMemcpyAsync(d_labels_.get(), h_labels_.get(), N * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
      cudaCheck(cudaMemcpyAsync(d_ids_.get(), h_ids_.get(), N * sizeof(int64_t), cudaMemcpyHostToDevice, stream_));
    }
    cudaCheck(cudaEventRecord(staged_ev_, stream_));
  }

  float* P(const Node& nd, int k) const { return params_.get() + g_->params[nd.params[k]].info.offset; }
  float* G(const Node& nd, int k) const { return grads_.get() + g_->params[nd.params[k]].info.offset; }
  static int as_int(int64_t v) {
    if (v > INT32_MAX) throw std::runtime_error("tensor too large for a 32-bit cuBLAS/cuDNN count");
    return static_cast<int>(v);
  }
  // beta for the gradient of tensor t: 0 for its first writer in backward order, then 1.
  const float* beta_for(int t) {
    const bool acc = written_[t];
    written_[t] = 1;
    return acc ? &kOne : &kZero;
  }
  // dx (=|+=) dy over count floats.
  void pass_grad(const float* dy, float* dx, int64_t count, const float* beta) {
    if (*beta != 0.f)
      cublasCheck(cublasSaxpy(cublas_, as_int(count), &kOne, dy, 1, dx, 1));
    else
      cudaCheck(cudaMemcpyAsync(dx, dy, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }

  // eval: dropout off and batch-norm on running statistics (forward_eval); otherwise
  // dropout follows ctx.training and batch-norm uses (and updates) batch statistics.
  void forward(const Plan& plan, const StepContext& ctx, bool eval) {
    const int64_t n = plan.n;
    for (const Node& nd : g_->nodes) {
      NodeState& s = nodes_[nd.index];
      const int in = nd.inputs[0], out = nd.index + 1;
      const cudnnTensorDescriptor_t xd = plan.t[in]->get(), yd = plan.t[out]->get();
      const float* x = data_[in];
      float* y = data_[out];
      switch (nd.op) {
        case Op::conv:
          cudnnCheck(cudnnConvolutionForward(cudnn_, &kOne, xd, x, s.w->get(), P(nd, 0), s.conv->get(),
                                             plan.algo[nd.index].fwd, workspace_.get(), workspace_.size(), &kZero, yd,
                                             y));
          if (nd.params.size() > 1) cudnnCheck(cudnnAddTensor(cudnn_, &kOne, s.chan->get(), P(nd, 1), &kOne, yd, y));
          break;
        case Op::relu:
          cudnnCheck(cudnnActivationForward(cudnn_, act_.get(), &kOne, xd, x, &kZero, yd, y));
          break;
        case Op::maxpool:
        case Op::avgpool:
          cudnnCheck(cudnnPoolingForward(cudnn_, s.pool->get(), &kOne, xd, x, &kZero, yd, y));
          break;
        case Op::bn:
          if (!eval) {
            if (!ctx.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
            cudnnCheck(cudnnBatchNormalizationForwardTraining(
                cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x, yd, y, s.chan->get(), P(nd, 0), P(nd, 1),
                kBnMomentum, P(nd, 2), P(nd, 3), kBnEps, s.save_mean.get(), s.save_inv_var.get()));
            increment(P(nd, 4), stream_);
          } else {
            cudnnCheck(cudnnBatchNormalizationForwardInference(cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd, x,
                                                               yd, y, s.chan->get(), P(nd, 0), P(nd, 1), P(nd, 2),
                                                               P(nd, 3), kBnEps));
          }
          break;
        case Op::dropout:
          s.dropout_active = !eval && ctx.training && nd.p > 0;
          if (s.dropout_active) {
            dropout_forward(x, y, s.mask.get(), n, nd.out.numel(), ctx.seed, ctx.step, nd.index, d_ids_.get(),
                            dropout_threshold(nd.p), static_cast<float>(1.0 / (1.0 - nd.p)), stream_);
          } else {
            cudaCheck(cudaMemcpyAsync(y, x, static_cast<size_t>(n * nd.out.numel()) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream_));
          }
          break;
        case Op::flatten:
          if (!alias_[out])
            cudaCheck(cudaMemcpyAsync(y, x, static_cast<size_t>(n * nd.out.numel()) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream_));
          break;
        case Op::linear: {
          // Column-major view: yᵀ (O×n) = b·1ᵀ + W (O×I, stored as Wᵀ I×O) · xᵀ (I×n).
          const int O = nd.out_channels, I = nd.in.c, N = as_int(n);
          cublasCheck(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, O, N, 1, &kOne, P(nd, 1), O, ones_.get(), 1,
                                  &kZero, y, O));
          cublasCheck(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &kOne, P(nd, 0), I, x, I, &kOne, y, O));
          break;
        }
        case Op::add: {
          const int64_t count = n * nd.out.numel();
          cudaCheck(cudaMemcpyAsync(y, x, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice,
                                    stream_));
          cublasCheck(cublasSaxpy(cublas_, as_int(count), &kOne, data_[nd.inputs[1]], 1, y, 1));
          break;
        }
      }
    }
  }

  // Parameter gradients of node nd (final once enqueued; batch-norm also does its data gradient).
  void backward_params(const Plan& plan, const Node& nd) {
    const NodeState& s = nodes_[nd.index];
    const int in = nd.inputs[0], out = nd.index + 1;
    const cudnnTensorDescriptor_t xd = plan.t[in]->get(), yd = plan.t[out]->get();
    switch (nd.op) {
      case Op::conv:
        cudnnCheck(cudnnConvolutionBackwardFilter(cudnn_, &kOne, xd, data_[in], yd, diff_[out], s.conv->get(),
                                                  plan.algo[nd.index].bwd_filter, workspace_.get(), workspace_.size(),
                                                  &kZero, s.w->get(), G(nd, 0)));
        if (nd.params.size() > 1)
          cudnnCheck(cudnnConvolutionBackwardBias(cudnn_, &kOne, yd, diff_[out], &kZero, s.chan->get(), G(nd, 1)));
        break;
      case Op::linear: {
        // dWᵀ (I×O) = xᵀ (I×n) · dy (n×O);  db (O) = dyᵀ (O×n) · 1
        const int O = nd.out_channels, I = nd.in.c, N = as_int(plan.n);
        cublasCheck(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &kOne, data_[in], I, diff_[out], O, &kZero,
                                G(nd, 0), I));
        cublasCheck(cublasSgemv(cublas_, CUBLAS_OP_N, O, N, &kOne, diff_[out], O, ones_.get(), 1, &kZero, G(nd, 1), 1));
        break;
      }
      case Op::bn: {
        const float* beta = beta_for(in);
        cudnnCheck(cudnnBatchNormalizationBackward(cudnn_, CUDNN_BATCHNORM_SPATIAL, &kOne, beta, &kOne, &kZero, xd,
                                                   data_[in], yd, diff_[out], xd, diff_[in], s.chan->get(), P(nd, 0),
                                                   G(nd, 0), G(nd, 1), kBnEps, s.save_mean.get(),
                                                   s.save_inv_var.get()));
        break;
      }
      default: break;
    }
  }

  // Input gradient(s) of node nd.
  void backward_data(const Plan& plan, const Node& nd) {
    const NodeState& s = nodes_[nd.index];
    const int in = nd.inputs[0], out = nd.index + 1;
    const int64_t n = plan.n;
    if (nd.op == Op::bn) return;  // done in backward_params
    if (nd.op == Op::flatten && alias_[out]) {
      written_[in] = written_[out];  // same buffer
      return;
    }
    if (nd.op == Op::add) {
      for (int t : nd.inputs)
        if (needs_diff_[t]) pass_grad(diff_[out], diff_[t], n * nd.out.numel(), beta_for(t));
      return;
    }
    if (!needs_diff_[in]) return;
    const cudnnTensorDescriptor_t xd = plan.t[in]->get(), yd = plan.t[out]->get();
    const float* beta = beta_for(in);
    switch (nd.op) {
      case Op::conv:
        cudnnCheck(cudnnConvolutionBackwardData(cudnn_, &kOne, s.w->get(), P(nd, 0), yd, diff_[out], s.conv->get(),
                                                plan.algo[nd.index].bwd_data, workspace_.get(), workspace_.size(), beta,
                                                xd, diff_[in]));
        break;
      case Op::relu:
        cudnnCheck(cudnnActivationBackward(cudnn_, act_.get(), &kOne, yd, data_[out], yd, diff_[out], xd, data_[in], beta,
                                           xd, diff_[in]));
        break;
      case Op::maxpool:
      case Op::avgpool:
        cudnnCheck(cudnnPoolingBackward(cudnn_, s.pool->get(), &kOne, yd, data_[out], yd, diff_[out], xd, data_[in],
                                        beta, xd, diff_[in]));
        break;
      case Op::dropout:
        if (s.dropout_active)
          dropout_backward(diff_[out], diff_[in], s.mask.get(), n * nd.out.numel(),
                           static_cast<float>(1.0 / (1.0 - nd.p)), *beta != 0.f, stream_);
        else
          pass_grad(diff_[out], diff_[in], n * nd.out.numel(), beta);
        break;
      case Op::flatten:
        pass_grad(diff_[out], diff_[in], n * nd.out.numel(), beta);
        break;
      case Op::linear: {
        // dxᵀ (I×n) = Wᵀ (I×O) · dyᵀ (O×n)
        const int O = nd.out_channels, I = nd.in.c, N = as_int(n);
        cublasCheck(cublasSgemm(cublas_, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &kOne, P(nd, 0), I, diff_[out], O, beta,
                                diff_[in], I));
        break;
      }
      case Op::bn:
      case Op::add: break;
    }
  }

  std::unique_ptr<Model> cpu_;  // owns the graph and the host-side init
  const Graph* g_ = nullptr;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t staged_ev_ = nullptr, loss_ev_ = nullptr, order_ev_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  ActDesc act_;
  DevArray<float> params_, grads_;
  DevArray<char> workspace_;
  std::vector<NodeState> nodes_;
  std::vector<int> consumers_;
  std::vector<bool> alias_, needs_diff_;
  std::vector<char> written_;
  int64_t max_batch_ = 0;
  std::vector<DevArray<float>> store_;
  std::vector<float*> data_, diff_;
  DevArray<int32_t> d_labels_;
  DevArray<int64_t> d_ids_;
  DevArray<double> d_loss_, d_total_;
  DevArray<float> ones_;
  Pinned<float> h_images_, h_logits_;
  Pinned<int32_t> h_labels_;
  Pinned<int64_t> h_ids_;
  Pinned<double> h_total_;
  std::vector<std::unique_ptr<Plan>> plans_;
};

}  // namespace
}  // namespace nn::cuda

std::unique_ptr<DeviceModel> make_cuda_model(const std::string& name_or_spec, const SampleShape& input, int classes,
                                             int device) {
  return std::make_unique<nn::cuda::CudaNet>(make_model(name_or_spec, input, classes), device);
}

}  // namespace cnnscale
