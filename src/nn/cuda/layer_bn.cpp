// layer_bn.cpp — batch-norm 2d on cuDNN (spatial): cudnnBatchNormalizationForwardTraining
// (momentum 0.1, eps 1e-5 as PyTorch; cuDNN updates running_var with the unbiased
// variance), ForwardInference (evaluation), Backward (parameter and data gradients in
// one call); num_batches_tracked += 1 by a kernel (kernels.cu). On a tensor of the bf16
// activation store (NetState::half) the same calls take the plan's bf16 NHWC descriptors
// for x, y, dy and dx with the fp32 1×C×1×1 descriptor for scale, bias and statistics
// (cuDNN's pseudo-bf16 batch-norm: fp32 arithmetic, bf16 loads and stores).
// CNNSCALE_GPU_BN_PERSISTENT=1 runs those bf16 NHWC layers through the Ex calls in
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT mode (cuDNN's NHWC kernels, as PyTorch's cuDNN batch
// norm on channels_last; a per-layer reserve space from forward to backward, the shared
// workspace), which cuDNN documents as deterministic but able to overflow to Inf/NaN on
// inputs of a large range: off by default until a GPU run has measured it (the kit's
// bf16bnp). Only where the batch-norm is its input's one reader (its data gradient is
// then always written, never blended: PyTorch never blends either).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;  // PyTorch's defaults, as the CPU model
constexpr cudnnBatchNormMode_t kPersistent = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

class BatchNorm final : public Layer {
 public:
  BatchNorm(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.in.c, 1, 1)) {
    save_mean_.alloc(static_cast<size_t>(nd.in.c), s.stream);
    save_inv_var_.alloc(static_cast<size_t>(nd.in.c), s.stream);
  }

  // The persistent Ex path (above): its workspace and this plan's reserve space.
  size_t plan(const Plan& p) override {
    // The same for every plan: a change of NetState::bn_persistent or of the types replans all.
    persistent_ = s_.bn_persistent && s_.is_half(in()) && s_.readers[static_cast<size_t>(in())] == 1;
    if (reserve_bytes_.size() <= static_cast<size_t>(p.index)) reserve_bytes_.resize(static_cast<size_t>(p.index) + 1);
    if (!persistent_) return 0;
    size_t fw = 0, bw = 0, rs = 0;
    cudnnCheck(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        s_.cudnn, kPersistent, CUDNN_BATCHNORM_OPS_BN, xd(p), nullptr, yd(p), chan_->get(), nullptr, &fw));
    cudnnCheck(cudnnGetBatchNormalizationBackwardExWorkspaceSize(s_.cudnn, kPersistent, CUDNN_BATCHNORM_OPS_BN, xd(p),
                                                                 yd(p), yd(p), nullptr, xd(p), chan_->get(), nullptr,
                                                                 &bw));
    cudnnCheck(
        cudnnGetBatchNormalizationTrainingExReserveSpaceSize(s_.cudnn, kPersistent, CUDNN_BATCHNORM_OPS_BN, nullptr,
                                                             xd(p), &rs));
    if (rs > reserve_.size()) {
      cudaCheck(cudaStreamSynchronize(s_.stream));  // no step still uses the old one
      reserve_.alloc(rs, s_.stream);
    }
    reserve_bytes_[static_cast<size_t>(p.index)] = rs;
    return std::max(fw, bw);
  }

  // Parameters: weight, bias, running_mean, running_var, num_batches_tracked.
  void forward(const Plan& p, const StepContext& ctx, bool eval) override {
    const float* x = s_.data[in()];
    float* y = s_.data[out()];
    if (!eval) {
      if (!ctx.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
      // --sync-bn is CPU-only (the Trainer refuses it for a device model with a UserError).
      if (ctx.sum_across_ranks) throw std::logic_error("batch-norm: global statistics are not implemented on the GPU");
      if (persistent_) {
        cudnnCheck(cudnnBatchNormalizationForwardTrainingEx(
            s_.cudnn, kPersistent, CUDNN_BATCHNORM_OPS_BN, &kOne, &kZero, xd(p), x, nullptr, nullptr, yd(p), y,
            chan_->get(), s_.P(nd_, 0), s_.P(nd_, 1), kBnMomentum, s_.P(nd_, 2), s_.P(nd_, 3), kBnEps,
            save_mean_.get(), save_inv_var_.get(), nullptr, s_.workspace.get(), s_.workspace.size(), reserve_.get(),
            reserve_bytes_[static_cast<size_t>(p.index)]));
        increment(s_.P(nd_, 4), s_.stream);
        return;
      }
      cudnnCheck(cudnnBatchNormalizationForwardTraining(
          s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd(p), x, yd(p), y, chan_->get(), s_.P(nd_, 0),
          s_.P(nd_, 1), kBnMomentum, s_.P(nd_, 2), s_.P(nd_, 3), kBnEps, save_mean_.get(), save_inv_var_.get()));
      increment(s_.P(nd_, 4), s_.stream);
    } else {
      cudnnCheck(cudnnBatchNormalizationForwardInference(s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xd(p), x,
                                                         yd(p), y, chan_->get(), s_.P(nd_, 0), s_.P(nd_, 1),
                                                         s_.P(nd_, 2), s_.P(nd_, 3), kBnEps));
    }
  }

  // The data gradient too (always written: the input's diff buffer exists even for the
  // network input).
  void backward_params(const Plan& p) override {
    const float* beta = s_.beta_for(in());
    if (persistent_) {
      cudnnCheck(cudnnBatchNormalizationBackwardEx(
          s_.cudnn, kPersistent, CUDNN_BATCHNORM_OPS_BN, &kOne, beta, &kOne, &kZero, xd(p), s_.data[in()], nullptr,
          nullptr, yd(p), s_.diff[out()], nullptr, nullptr, xd(p), s_.diff[in()], chan_->get(), s_.P(nd_, 0), nullptr,
          s_.G(nd_, 0), s_.G(nd_, 1), kBnEps, save_mean_.get(), save_inv_var_.get(), nullptr, s_.workspace.get(),
          s_.workspace.size(), reserve_.get(), reserve_bytes_[static_cast<size_t>(p.index)]));
      return;
    }
    cudnnCheck(cudnnBatchNormalizationBackward(s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, beta, &kOne, &kZero, xd(p),
                                               s_.data[in()], yd(p), s_.diff[out()], xd(p), s_.diff[in()], chan_->get(),
                                               s_.P(nd_, 0), s_.G(nd_, 0), s_.G(nd_, 1), kBnEps, save_mean_.get(),
                                               save_inv_var_.get()));
  }

  void backward_data(const Plan& /*p*/) override {}  // done in backward_params

 private:
  std::unique_ptr<TensorDesc> chan_;          // 1×C×1×1: scale, bias, running statistics
  DevArray<float> save_mean_, save_inv_var_;  // training forward → backward
  bool persistent_ = false;                   // the Ex path in CUDNN_BATCHNORM_SPATIAL_PERSISTENT (plan())
  DevArray<char> reserve_;                    // its reserve space, training forward → backward
  std::vector<size_t> reserve_bytes_;         // per plan
};

}  // namespace

std::unique_ptr<Layer> make_bn(const Node& nd, NetState& s) { return std::make_unique<BatchNorm>(nd, s); }

}  // namespace cnnscale::nn::cuda
