// layer_add.cpp — residual add: cudaMemcpyAsync + cublasSaxpy; backward copies or
// accumulates the output gradient into each input's. On bf16 tensors (the activation
// store, NetState::half) a kernel adds in fp32 and rounds once (kernels.hpp: add_bf16).
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Add final : public Layer {
 public:
  using Layer::Layer;

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    const int64_t count = p.n * nd_.out.numel();
    if (s_.is_half(out()))
      return add_bf16(s_.hdata(nd_.inputs[0]), s_.hdata(nd_.inputs[1]), s_.hdata(out()), count, s_.stream);
    float* y = s_.data[out()];
    cudaCheck(cudaMemcpyAsync(y, s_.data[in()], static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice,
                              s_.stream));
    cublasCheck(cublasSaxpy(s_.cublas, as_int(count), &kOne, s_.data[nd_.inputs[1]], 1, y, 1));
  }

  void backward_data(const Plan& p) override {
    const int64_t count = p.n * nd_.out.numel();
    for (int t : nd_.inputs) {
      if (!s_.needs_diff[t]) continue;
      if (s_.is_half(out())) s_.pass_grad16(s_.hdiff(out()), s_.hdiff(t), count, s_.beta_for(t));
      else s_.pass_grad(s_.diff[out()], s_.diff[t], count, s_.beta_for(t));
    }
  }
};

}  // namespace

std::unique_ptr<Layer> make_add(const Node& nd, NetState& s) { return std::make_unique<Add>(nd, s); }

}  // namespace cnnscale::nn::cuda
