// layer_flatten.cpp — flatten: no op when the output aliases the input (NetState::alias:
// the input has no other reader), else a copy; backward passes the gradient through. A
// bf16 NHWC input (the activation store, NetState::half) is widened into the fp32 output
// in PyTorch's C·H·W order (from_bf16_nhwc), and the gradient goes back the other way
// (to_bf16_nhwc, summing in fp32 where the input has another reader). An fp32 NHWC input
// (NetState::store32) the same without rounding (from_nhwc / to_nhwc).
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Flatten final : public Layer {
 public:
  using Layer::Layer;

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    if (s_.is_half(in()))
      return from_bf16_nhwc(s_.hdata(in()), s_.data[out()], p.n, nd_.in.c, hw(), false, s_.stream);
    if (s_.is_nhwc(in())) return from_nhwc(s_.data[in()], s_.data[out()], p.n, nd_.in.c, hw(), false, s_.stream);
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
    if (s_.is_half(in()))
      return to_bf16_nhwc(s_.diff[out()], s_.hdiff(in()), p.n, nd_.in.c, hw(), s_.stream,
                          *s_.beta_for(in()) != 0.f);
    if (s_.is_nhwc(in()))
      return to_nhwc(s_.diff[out()], s_.diff[in()], p.n, nd_.in.c, hw(), s_.stream, *s_.beta_for(in()) != 0.f);
    s_.pass_grad(s_.diff[out()], s_.diff[in()], p.n * nd_.out.numel(), s_.beta_for(in()));
  }

 private:
  int64_t hw() const { return int64_t{nd_.in.h} * nd_.in.w; }
};

}  // namespace

std::unique_ptr<Layer> make_flatten(const Node& nd, NetState& s) { return std::make_unique<Flatten>(nd, s); }

}  // namespace cnnscale::nn::cuda
