// layer_flatten.cpp — flatten: no op when the output aliases the input (NetState::alias:
// the input has no other reader), else a copy; backward passes the gradient through.
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Flatten final : public Layer {
 public:
  using Layer::Layer;

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    if (!s_.alias[out()])
      cudaCheck(cudaMemcpyAsync(s_.data[out()], s_.data[in()],
                                static_cast<size_t>(p.n * nd_.out.numel()) * sizeof(float), cudaMemcpyDeviceToDevice,
                                s_.stream));
  }

  void backward_data(const Plan& p) override {
    if (s_.alias[out()]) {
      s_.written[in()] = s_.written[out()];  // same buffer
      return;
    }
    if (!s_.needs_diff[in()]) return;
    s_.pass_grad(s_.diff[out()], s_.diff[in()], p.n * nd_.out.numel(), s_.beta_for(in()));
  }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const Node& nd, NetState& s) { return std::make_unique<Flatten>(nd, s); }

}  // namespace cnnscale::nn::cuda
