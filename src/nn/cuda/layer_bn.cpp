// layer_bn.cpp — batch-norm 2d (the node's momentum and eps: PyTorch's 0.1 and 1e-5 unless the model sets others; running_var updated
// with the unbiased variance; num_batches_tracked += 1 by a kernel, kernels.cu).
//  - cuDNN (the default): cudnnBatchNormalizationForwardTraining, ForwardInference
//    (evaluation), Backward (parameter and data gradients in one call), spatial mode. On a
//    tensor of the bf16 activation store (NetState::half) the same calls take the plan's
//    bf16 NHWC descriptors for x, y, dy and dx with the fp32 1×C×1×1 descriptor for scale,
//    bias and statistics. Measured on the H100 (2026-11-27): 473 of a 499 ms ResNet-50
//    step, cuDNN's legacy training kernels being NCHW/stride-generic.
//  - CNNSCALE_GPU_BN=own (NetState::bn_own): the store's batch norms (bf16, or fp32 with
//    the fp32 NHWC store) run our own NHWC kernels (batchnorm_nhwc.hpp), fused with the ReLU or the residual add + ReLU that
//    follow (NetState::bn_fusion, decided by CudaNet): the batch norm then writes the
//    ReLU's output, and its backward masks with it and writes the residual's gradient.
//    NOT YET RUN ON A GPU: opt-in until the kit's first run has checked and measured it.
//    --sync-bn (StepContext::sum_across_ranks): our kernels only, split where the
//    per-channel sums go over ranks (batchnorm_nhwc.hpp): forward [Σx | Σx² | count] and
//    backward [Σg | Σg·(x − mean)] in double, copied to the host (a stream
//    synchronisation), summed by the callback, copied back. NOT YET RUN ON A GPU.
// (CNNSCALE_GPU_BN_PERSISTENT, cuDNN's persistent NHWC mode, was removed: on the H100 its
// backward failed and training segfaulted; cuDNN documents that mode for HALF only.)
#include <functional>
#include <stdexcept>

#include "util/error.hpp"

#include "nn/cuda/batchnorm_nhwc.hpp"
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"
#include "util/cuda/event_wait.hpp"

namespace cnnscale::nn::cuda {
namespace {


class BatchNorm final : public Layer {
 public:
  BatchNorm(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.in.c, 1, 1)) {
    save_mean_.alloc(static_cast<size_t>(nd.in.c), s.stream);
    save_inv_var_.alloc(static_cast<size_t>(nd.in.c), s.stream);
  }

  ~BatchNorm() override {
    if (copied_) cudaEventDestroy(copied_);  // no check: a destructor must not end the job
  }

  // Our own kernels: their reduction workspace (the convolutions' shared one).
  size_t plan(const Plan& p) override {
    own_ = s_.bn_own && s_.is_nhwc(in());  // the same for every plan: a change replans all
    if (!own_) return 0;
    return bn::workspace_bytes(rows(p), nd_.in.c, s_.is_half(in()));
  }

  // Parameters: weight, bias, running_mean, running_var, num_batches_tracked.
  void forward(const Plan& p, const StepContext& ctx, bool eval) override {
    if (!eval) {
      if (!ctx.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
      // --sync-bn: our kernels only (the Trainer asks Model::supports_sync_bn first).
      if (ctx.sum_across_ranks && !own_)
        fail("--sync-bn on the GPU: batch norm ", nd_.index, " reads an fp32 NCHW tensor, which cuDNN normalises "
             "per rank; global statistics need our batch norm on the NHWC activations (CNNSCALE_GPU_BN=own with "
             "--precision bf16, or TF32 with CNNSCALE_GPU_NHWC_STORE=1)");
    }
    synced_ = !eval && own_ && static_cast<bool>(ctx.sum_across_ranks);
    if (synced_) sum_ = &ctx.sum_across_ranks, while_waiting_ = &ctx.while_waiting;
    if (own_) {
      if (s_.is_half(in())) own_forward<bf16_t>(p, eval);
      else own_forward<float>(p, eval);
      if (!eval) increment(s_.P(nd_, 4), s_.stream);
      return;
    }
    const float* x = s_.data[in()];
    float* y = s_.data[out()];
    if (!eval) {
      cudnnCheck(cudnnBatchNormalizationForwardTraining(
          s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd(p), x, yd(p), y, chan_->get(), s_.P(nd_, 0),
          s_.P(nd_, 1), nd_.momentum, s_.P(nd_, 2), s_.P(nd_, 3), nd_.eps, save_mean_.get(), save_inv_var_.get()));
      increment(s_.P(nd_, 4), s_.stream);
    } else {
      cudnnCheck(cudnnBatchNormalizationForwardInference(s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd(p), x,
                                                         yd(p), y, chan_->get(), s_.P(nd_, 0), s_.P(nd_, 1),
                                                         s_.P(nd_, 2), s_.P(nd_, 3), nd_.eps));
    }
  }

  // The data gradient too (always written: the input's diff buffer exists even for the
  // network input), and a fused residual's.
  void backward_params(const Plan& p) override {
    const float* beta = s_.beta_for(in());
    if (own_) {
      if (s_.is_half(in())) own_backward<bf16_t>(p, *beta != 0.f);
      else own_backward<float>(p, *beta != 0.f);
      return;
    }
    cudnnCheck(cudnnBatchNormalizationBackward(s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, beta, &kOne, &kZero, xd(p),
                                               s_.data[in()], yd(p), s_.diff[out()], xd(p), s_.diff[in()], chan_->get(),
                                               s_.P(nd_, 0), s_.G(nd_, 0), s_.G(nd_, 1), nd_.eps, save_mean_.get(),
                                               save_inv_var_.get()));
  }

  void backward_data(const Plan& /*p*/) override {}  // done in backward_params

 private:
  // Our kernels on the store's element type T (bf16, or fp32 with NetState::store32).
  template <class T>
  static T* as(float* p) {
    return reinterpret_cast<T*>(p);
  }
  template <class T>
  void own_forward(const Plan& p, bool eval) {
    const NetState::BnFusion f = fusion();
    const T* x = as<T>(s_.data[in()]);
    const T* z = f.z >= 0 ? as<T>(s_.data[f.z]) : nullptr;
    T* y = as<T>(s_.data[f.out]);
    if (eval)
      bn::forward_eval(x, z, y, rows(p), nd_.in.c, stats(), nd_.eps, f.relu, s_.workspace.get(), s_.stream);
    else if (!synced_)
      bn::forward_train(x, z, y, rows(p), nd_.in.c, stats(), nd_.momentum, nd_.eps, save_mean_.get(),
                        save_inv_var_.get(), f.relu, s_.workspace.get(), s_.stream);
    else {
      const size_t C = static_cast<size_t>(nd_.in.c);
      bn::forward_local_sums(x, rows(p), nd_.in.c, s_.workspace.get(), sums_.get(), s_.stream);
      double* msg = to_host(sums_.get(), 2 * C, 2 * C + 1);
      msg[2 * C] = static_cast<double>(rows(p));
      (*sum_)(msg, 2 * C + 1);
      n_total_ = msg[2 * C];
      cudaCheck(cudaMemcpyAsync(global_.get(), msg, 2 * C * sizeof(double), cudaMemcpyHostToDevice, s_.stream));
      bn::forward_global(x, z, y, rows(p), nd_.in.c, global_.get(), n_total_, stats(), nd_.momentum, nd_.eps,
                         save_mean_.get(), save_inv_var_.get(), f.relu, s_.workspace.get(), s_.stream);
    }
  }
  // n doubles of dev to the pinned message buffer (room for `room`), then a host wait for
  // the copy: polled, never inside CUDA (the model's queue may wait for the previous
  // step's NCCL sums, whose failure no CUDA call reports), StepContext::while_waiting
  // between polls, as the model's loss wait (cuda_model.cpp).
  double* to_host(const double* dev, size_t n, size_t room) {
    if (!msg_.get() || msg_room_ < room) {
      drain();  // no copy from the old one in flight
      msg_.alloc(room);
      msg_room_ = room;
    }
    cudaCheck(cudaMemcpyAsync(msg_.get(), dev, n * sizeof(double), cudaMemcpyDeviceToHost, s_.stream));
    drain();
    return msg_.get();
  }
  void drain() {
    if (!copied_) cudaCheck(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    cudaCheck(cudaEventRecord(copied_, s_.stream));
    wait_event_polling(copied_, [&] {
      if (while_waiting_ && *while_waiting_) (*while_waiting_)();
    });
  }
  template <class T>
  void own_backward(const Plan& p, bool dx_accumulate) {
    const NetState::BnFusion f = fusion();
    T* dz = f.z >= 0 ? as<T>(s_.diff[f.z]) : nullptr;
    const bool dz_accumulate = f.z >= 0 && *s_.beta_for(f.z) != 0.f;
    if (synced_) {
      const size_t C = static_cast<size_t>(nd_.in.c);
      const T* x = as<T>(s_.data[in()]);
      const T* y = f.relu ? as<T>(s_.data[f.out]) : nullptr;
      const T* dy = as<T>(s_.diff[f.out]);
      bn::backward_local_sums(x, y, dy, dz, dz_accumulate, rows(p), nd_.in.c, save_mean_.get(), f.relu,
                              s_.workspace.get(), sums_.get(), s_.stream);
      double* msg = to_host(sums_.get(), 2 * C, 2 * C + 1);
      (*sum_)(msg, 2 * C);
      cudaCheck(cudaMemcpyAsync(global_.get(), msg, 2 * C * sizeof(double), cudaMemcpyHostToDevice, s_.stream));
      bn::backward_global(x, y, dy, as<T>(s_.diff[in()]), dx_accumulate, rows(p), nd_.in.c, s_.P(nd_, 0),
                          save_mean_.get(), save_inv_var_.get(), sums_.get(), global_.get(), n_total_, s_.G(nd_, 0),
                          s_.G(nd_, 1), f.relu, s_.workspace.get(), s_.stream);
      return;
    }
    bn::backward(as<T>(s_.data[in()]), f.relu ? as<T>(s_.data[f.out]) : nullptr, as<T>(s_.diff[f.out]),
                 as<T>(s_.diff[in()]), dx_accumulate, dz, dz_accumulate, rows(p), nd_.in.c, s_.P(nd_, 0),
                 save_mean_.get(), save_inv_var_.get(), s_.G(nd_, 0), s_.G(nd_, 1), f.relu, s_.workspace.get(),
                 s_.stream);
  }
  int64_t rows(const Plan& p) const { return p.n * nd_.in.h * nd_.in.w; }
  bn::Stats stats() const { return {s_.P(nd_, 0), s_.P(nd_, 1), s_.P(nd_, 2), s_.P(nd_, 3)}; }
  // What this layer writes (NetState::bn_fusion); unfused: its own output, no ReLU.
  NetState::BnFusion fusion() const {
    NetState::BnFusion f;
    if (!s_.bn_fusion.empty()) f = s_.bn_fusion[static_cast<size_t>(nd_.index)];
    if (f.out < 0) f.out = out();
    return f;
  }

  std::unique_ptr<TensorDesc> chan_;          // 1×C×1×1: scale, bias, running statistics
  DevArray<float> save_mean_, save_inv_var_;  // training forward → backward (ours: 1/sqrt(var+eps) too)
  bool own_ = false;                          // our own NHWC kernels (plan())
  // --sync-bn (this step's forward had StepContext::sum_across_ranks): the callback, kept
  // for the backward; this rank's sums (device), the global ones (device), the message
  // buffer (pinned) and the global count.
  bool synced_ = false;
  const std::function<void(double*, size_t)>* sum_ = nullptr;
  const std::function<void()>* while_waiting_ = nullptr;
  cudaEvent_t copied_ = nullptr;  // to_host's wait
  DevArray<double> sums_ = sized(2), global_ = sized(2);
  Pinned<double> msg_;
  size_t msg_room_ = 0;
  double n_total_ = 0;
  DevArray<double> sized(int per_channel) const {
    DevArray<double> a;
    a.alloc(static_cast<size_t>(per_channel) * static_cast<size_t>(nd_.in.c), s_.stream);
    return a;
  }
};

}  // namespace

std::unique_ptr<Layer> make_bn(const Node& nd, NetState& s) { return std::make_unique<BatchNorm>(nd, s); }

}  // namespace cnnscale::nn::cuda
