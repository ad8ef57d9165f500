// layer_conv.cpp — conv2d on cuDNN: cudnnConvolutionForward / BackwardData /
// BackwardFilter / BackwardBias, cudnnAddTensor for the bias. Algorithms from
// cudnnGet*Algorithm_v7 (deterministic ones preferred), chosen once per batch size,
// within one workspace for all convolutions (NetState::workspace). Math type per
// NetState::tf32: CUDNN_DEFAULT_MATH (TF32 allowed) or CUDNN_FMA_MATH (full fp32).
#include <algorithm>
#include <string>
#include <vector>

#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

constexpr size_t kMaxConvWorkspace = size_t{512} << 20;

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
  fail("cuDNN offers no usable ", what, " algorithm for this convolution within the ", kMaxConvWorkspace >> 20,
       " MiB workspace cap; lower --batch-size or change the layer's shape");
}

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
};

class Conv final : public Layer {
 public:
  Conv(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.out_channels, 1, 1)) {
    cudnnCheck(cudnnSetFilter4dDescriptor(w_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd.out_channels, nd.in.c,
                                          nd.kernel, nd.kernel));
    cudnnCheck(cudnnSetConvolution2dDescriptor(conv_.get(), nd.pad, nd.pad, nd.stride, nd.stride, 1, 1,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // fp32 data: CUDNN_DEFAULT_MATH lets cuDNN pick TF32 tensor-core kernels (Ampere and
    // later), as PyTorch's torch.backends.cudnn.allow_tf32 = True (its default);
    // CUDNN_FMA_MATH keeps full fp32 (--tf32 off).
    cudnnCheck(cudnnSetConvolutionMathType(conv_.get(), s.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  }

  size_t plan(const Plan& p) override {
    const cudnnTensorDescriptor_t x = xd(p), y = yd(p);
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(cudnnGetConvolution2dForwardOutputDim(conv_.get(), x, w_.get(), &on, &oc, &oh, &ow));
    check_output(p.n, on, oc, oh, ow);
    if (algos_.size() <= static_cast<size_t>(p.index)) algos_.resize(static_cast<size_t>(p.index) + 1);
    ConvAlgos& a = algos_[static_cast<size_t>(p.index)];
    size_t ws = 0, bytes = 0;
    int got = 0;
    {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      cudnnCheck(cudnnGetConvolutionForwardAlgorithm_v7(s_.cudnn, x, w_.get(), conv_.get(), y,
                                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
      a.fwd = choose(perf, got, "forward").algo;
      cudnnCheck(cudnnGetConvolutionForwardWorkspaceSize(s_.cudnn, x, w_.get(), conv_.get(), y, a.fwd, &bytes));
      ws = std::max(ws, bytes);
    }
    {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s_.cudnn, x, y, conv_.get(), w_.get(),
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
      a.bwd_filter = choose(perf, got, "backward-filter").algo;
      cudnnCheck(
          cudnnGetConvolutionBackwardFilterWorkspaceSize(s_.cudnn, x, y, conv_.get(), w_.get(), a.bwd_filter, &bytes));
      ws = std::max(ws, bytes);
    }
    if (s_.needs_diff[in()]) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(s_.cudnn, w_.get(), y, conv_.get(), x,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
      a.bwd_data = choose(perf, got, "backward-data").algo;
      cudnnCheck(
          cudnnGetConvolutionBackwardDataWorkspaceSize(s_.cudnn, w_.get(), y, conv_.get(), x, a.bwd_data, &bytes));
      ws = std::max(ws, bytes);
    }
    return ws;
  }

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    float* y = s_.data[out()];
    cudnnCheck(cudnnConvolutionForward(s_.cudnn, &kOne, xd(p), s_.data[in()], w_.get(), s_.P(nd_, 0), conv_.get(),
                                       algos(p).fwd, s_.workspace.get(), s_.workspace.size(), &kZero, yd(p), y));
    if (nd_.params.size() > 1) cudnnCheck(cudnnAddTensor(s_.cudnn, &kOne, chan_->get(), s_.P(nd_, 1), &kOne, yd(p), y));
  }

  void backward_params(const Plan& p) override {
    cudnnCheck(cudnnConvolutionBackwardFilter(s_.cudnn, &kOne, xd(p), s_.data[in()], yd(p), s_.diff[out()], conv_.get(),
                                              algos(p).bwd_filter, s_.workspace.get(), s_.workspace.size(), &kZero,
                                              w_.get(), s_.G(nd_, 0)));
    if (nd_.params.size() > 1)
      cudnnCheck(
          cudnnConvolutionBackwardBias(s_.cudnn, &kOne, yd(p), s_.diff[out()], &kZero, chan_->get(), s_.G(nd_, 1)));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    cudnnCheck(cudnnConvolutionBackwardData(s_.cudnn, &kOne, w_.get(), s_.P(nd_, 0), yd(p), s_.diff[out()], conv_.get(),
                                            algos(p).bwd_data, s_.workspace.get(), s_.workspace.size(), beta, xd(p),
                                            s_.diff[in()]));
  }

 private:
  const ConvAlgos& algos(const Plan& p) const { return algos_[static_cast<size_t>(p.index)]; }

  FilterDesc w_;
  ConvDesc conv_;
  std::unique_ptr<TensorDesc> chan_;  // bias: 1×C×1×1
  std::vector<ConvAlgos> algos_;      // per plan
};

}  // namespace

std::unique_ptr<Layer> make_conv(const Node& nd, NetState& s) { return std::make_unique<Conv>(nd, s); }

}  // namespace cnnscale::nn::cuda
