// layer_dropout.cpp — dropout by a kernel (kernels.cu): the mask is nn::dropout_keep of
// nn/dropout_mask.hpp, keyed by (seed, step, layer, sample id), so it is bitwise the
// CPU model's. Off (a copy) in evaluation, when not training, or for p = 0.
#include "nn/cuda/kernels.hpp"
#include "nn/cuda/layer.hpp"
#include "nn/dropout_mask.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Dropout final : public Layer {
 public:
  using Layer::Layer;

  void reserve(int64_t max_batch) override { mask_.alloc(static_cast<size_t>(max_batch * nd_.out.numel()), s_.stream); }

  void forward(const Plan& p, const StepContext& ctx, bool eval) override {
    const float* x = s_.data[in()];
    float* y = s_.data[out()];
    active_ = !eval && ctx.training && nd_.p > 0;
    if (active_) {
      dropout_forward(x, y, mask_.get(), p.n, nd_.out.numel(), ctx.seed, ctx.step, nd_.index, s_.sample_ids,
                      dropout_threshold(nd_.p), scale(), s_.stream);
    } else {
      cudaCheck(cudaMemcpyAsync(y, x, static_cast<size_t>(p.n * nd_.out.numel()) * sizeof(float),
                                cudaMemcpyDeviceToDevice, s_.stream));
    }
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    const int64_t count = p.n * nd_.out.numel();
    if (active_) dropout_backward(s_.diff[out()], s_.diff[in()], mask_.get(), count, scale(), *beta != 0.f, s_.stream);
    else s_.pass_grad(s_.diff[out()], s_.diff[in()], count, beta);
  }

 private:
  float scale() const { return static_cast<float>(1.0 / (1.0 - nd_.p)); }

  DevArray<uint8_t> mask_;  // max_batch × numel
  bool active_ = false;     // the last forward dropped (its backward applies the mask)
};

}  // namespace

std::unique_ptr<Layer> make_dropout(const Node& nd, NetState& s) { return std::make_unique<Dropout>(nd, s); }

}  // namespace cnnscale::nn::cuda
