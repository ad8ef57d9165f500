// layer_relu.cpp — ReLU on cuDNN: cudnnActivationForward / Backward. (The CPU model
// fuses conv→ReLU; the GPU model does not.) CUDNN_PROPAGATE_NAN: a NaN passes through
// to the loss, where --on-nan sees it, as in PyTorch (oneDNN's ReLU on the CPU does not).
// On a tensor of the bf16 activation store (NetState::half) kernels do the same on bf16
// (kernels.hpp: relu_forward_bf16 / relu_backward_bf16).
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Relu final : public Layer {
 public:
  Relu(const Node& nd, NetState& s) : Layer(nd, s) {
    cudnnCheck(cudnnSetActivationDescriptor(act_.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
  }

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    if (s_.is_half(in())) return relu_forward_bf16(s_.hdata(in()), s_.hdata(out()), count(p), s_.stream);
    cudnnCheck(
        cudnnActivationForward(s_.cudnn, act_.get(), &kOne, xd(p), s_.data[in()], &kZero, yd(p), s_.data[out()]));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    if (s_.is_half(in()))
      return relu_backward_bf16(s_.hdata(out()), s_.hdiff(out()), s_.hdiff(in()), count(p), *beta != 0.f, s_.stream);
    cudnnCheck(cudnnActivationBackward(s_.cudnn, act_.get(), &kOne, yd(p), s_.data[out()], yd(p), s_.diff[out()], xd(p),
                                       s_.data[in()], beta, xd(p), s_.diff[in()]));
  }

 private:
  int64_t count(const Plan& p) const { return p.n * nd_.out.numel(); }

  ActDesc act_;
};

}  // namespace

std::unique_ptr<Layer> make_relu(const Node& nd, NetState& s) { return std::make_unique<Relu>(nd, s); }

}  // namespace cnnscale::nn::cuda
