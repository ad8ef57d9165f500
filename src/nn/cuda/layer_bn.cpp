// layer_bn.cpp — batch-norm 2d on cuDNN (spatial): cudnnBatchNormalizationForwardTraining
// (momentum 0.1, eps 1e-5 as PyTorch; cuDNN updates running_var with the unbiased
// variance), ForwardInference (evaluation), Backward (parameter and data gradients in
// one call); num_batches_tracked += 1 by a kernel (kernels.cu). On a tensor of the bf16
// activation store (NetState::half) the same calls take the plan's bf16 NHWC descriptors
// for x, y, dy and dx with the fp32 1×C×1×1 descriptor for scale, bias and statistics
// (cuDNN's pseudo-bf16 batch-norm: fp32 arithmetic, bf16 loads and stores).
#include <stdexcept>

#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;  // PyTorch's defaults, as the CPU model

class BatchNorm final : public Layer {
 public:
  BatchNorm(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.in.c, 1, 1)) {
    save_mean_.alloc(static_cast<size_t>(nd.in.c), s.stream);
    save_inv_var_.alloc(static_cast<size_t>(nd.in.c), s.stream);
  }

  // Parameters: weight, bias, running_mean, running_var, num_batches_tracked.
  void forward(const Plan& p, const StepContext& ctx, bool eval) override {
    const float* x = s_.data[in()];
    float* y = s_.data[out()];
    if (!eval) {
      if (!ctx.training) throw std::logic_error("batch-norm: forward_backward needs StepContext::training");
      // --sync-bn is CPU-only (the Trainer refuses it for a device model with a UserError).
      if (ctx.sum_across_ranks) throw std::logic_error("batch-norm: global statistics are not implemented on the GPU");
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
    cudnnCheck(cudnnBatchNormalizationBackward(s_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, beta, &kOne, &kZero, xd(p),
                                               s_.data[in()], yd(p), s_.diff[out()], xd(p), s_.diff[in()], chan_->get(),
                                               s_.P(nd_, 0), s_.G(nd_, 0), s_.G(nd_, 1), kBnEps, save_mean_.get(),
                                               save_inv_var_.get()));
  }

  void backward_data(const Plan& /*p*/) override {}  // done in backward_params

 private:
  std::unique_ptr<TensorDesc> chan_;          // 1×C×1×1: scale, bias, running statistics
  DevArray<float> save_mean_, save_inv_var_;  // training forward → backward
};

}  // namespace

std::unique_ptr<Layer> make_bn(const Node& nd, NetState& s) { return std::make_unique<BatchNorm>(nd, s); }

}  // namespace cnnscale::nn::cuda
