// layer_pool.cpp — max-pool and average-pool (also global average pool) on cuDNN:
// cudnnPoolingForward / Backward (max: CUDNN_POOLING_MAX_DETERMINISTIC, padding never
// wins, as PyTorch's -inf; average counts the padded window), an h×w window for gap on
// non-square inputs, floor output size — checked against the graph's shapes when a plan
// is built. NaNs propagate (CUDNN_PROPAGATE_NAN), as in PyTorch's max_pool2d. On a
// tensor of the bf16 activation store (NetState::half) the plan's descriptors are bf16
// NHWC (cuDNN's NHWC pooling kernels).
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Pool final : public Layer {
 public:
  Pool(const Node& nd, NetState& s) : Layer(nd, s) {
    cudnnCheck(cudnnSetPooling2dDescriptor(
        pool_.get(),
        nd.op == Op::maxpool ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
        CUDNN_PROPAGATE_NAN, nd.kernel, nd.kernel_w ? nd.kernel_w : nd.kernel, nd.pad, nd.pad, nd.stride,
        nd.stride));
  }

  size_t plan(const Plan& p) override {
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(cudnnGetPooling2dForwardOutputDim(pool_.get(), xd(p), &on, &oc, &oh, &ow));
    check_output(p.n, on, oc, oh, ow);
    return 0;
  }

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    cudnnCheck(cudnnPoolingForward(s_.cudnn, pool_.get(), &kOne, xd(p), s_.data[in()], &kZero, yd(p), s_.data[out()]));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    cudnnCheck(cudnnPoolingBackward(s_.cudnn, pool_.get(), &kOne, yd(p), s_.data[out()], yd(p), s_.diff[out()], xd(p),
                                    s_.data[in()], beta, xd(p), s_.diff[in()]));
  }

 private:
  PoolDesc pool_;
};

}  // namespace

std::unique_ptr<Layer> make_pool(const Node& nd, NetState& s) { return std::make_unique<Pool>(nd, s); }

}  // namespace cnnscale::nn::cuda
