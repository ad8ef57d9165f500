// layer_conv.cpp — conv2d on cuDNN: cudnnConvolutionForward / BackwardData /
// BackwardFilter / BackwardBias, cudnnAddTensor for the bias. Algorithms chosen once
// per distinct convolution problem (nn/conv_algo.hpp: direction, batch size, shapes,
// math) and shared through NetState::conv_algos: measured with
// cudnnFindConvolution*Algorithm under --cudnn-benchmark on (the default), else ranked
// by cudnnGet*Algorithm_v7; deterministic ones preferred, within the workspace cap; one
// workspace for all convolutions (NetState::workspace). A choice already in the cache
// (set_tuning's, from a checkpoint) is used as it is when cuDNN still accepts it.
// fp32: NCHW, math type per NetState::tf32: CUDNN_DEFAULT_MATH (TF32 allowed) or
// CUDNN_FMA_MATH (fp32); with TF32 on a GPU that has TF32 tensor cores (NetState::nhwc32)
// the bf16 path below with fp32 NHWC copies instead of bf16 ones (CUDNN_DEFAULT_MATH:
// cuDNN's TF32 kernels read NHWC). bf16 (NetState::bf16): x, W and dy are converted to bf16 NHWC
// (KRSC filters) into the shared scratch (kernels.hpp), the convolution runs on them
// with fp32 accumulation (cuDNN's pseudo-bf16 configuration, CUDNN_TENSOR_OP_MATH) and
// writes bf16 NHWC, widened back into the fp32 NCHW y, dx and dW. NHWC because cuDNN's
// bf16 tensor-core kernels read NHWC (with NCHW it would insert the transposes itself);
// the layout change rides on the conversion that bf16 needs anyway. The bias and its
// gradient stay fp32. With the bf16 activation store (NetState::half, the default under
// bf16) a bf16 input or output is that NHWC tensor itself: x, dy are read and y, dx
// written in place (dx into bf_a and summed when the input has an earlier gradient
// writer), the filter is converted once per forward into wbf_, and a bias is added to
// and reduced from the bf16 output by kernels (bias_add_nhwc_bf16, bias_grad_nhwc_bf16).
// The fp32 NHWC store (NetState::store32, TF32; not yet run on a GPU) is the same with fp32
// tensors: x, dy read and y, dx written in place (dx with cuDNN's beta when the input has
// an earlier gradient writer), the filter converted to fp32 KRSC per call as on the copies,
// the bias by cudnnAddTensor / cudnnConvolutionBackwardBias on the NHWC descriptors.
#include <algorithm>
#include <string>
#include <vector>

#include "nn/cuda/layer.hpp"
#include "util/cuda/check.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace cnnscale::nn::cuda {
namespace {

// Winograd convolutions (fused and not).
bool winograd(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool winograd(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool winograd(cudnnConvolutionBwdFilterAlgo_t a) { return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED; }

// cuDNN's candidates in conv_algo's terms, in the order cuDNN lists them, with the math
// type each was run with (which of them may run: Conv::refused).
template <class Perf>
std::vector<AlgoResult> results(const Perf* perf, int count) {
  std::vector<AlgoResult> r;
  for (int i = 0; i < count; ++i) {
    AlgoResult a{static_cast<int>(perf[i].algo), perf[i].status == CUDNN_STATUS_SUCCESS, perf[i].time, perf[i].memory,
                 perf[i].determinism == CUDNN_DETERMINISTIC};
    a.math_type = static_cast<int>(perf[i].mathType);
    r.push_back(a);
  }
  return r;
}

struct ConvAlgos {
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  std::unique_ptr<TensorDesc> xb, yb;  // NHWC: the bf16 or fp32 NHWC input and output (a precision change replans)
  // One convolution descriptor per direction, each with the math type its algorithm was
  // chosen with (cudnnFind times an algorithm per math type).
  std::unique_ptr<ConvDesc> cfwd, cbwd_data, cbwd_filter;
};

class Conv final : public Layer {
 public:
  Conv(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.out_channels, 1, 1)) {
    cudnnCheck(cudnnSetFilter4dDescriptor(w_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nd.out_channels, nd.in.c,
                                          nd.kernel, nd.kernel));
    // bf16: bf16 KRSC filters, fp32 compute (cuDNN's pseudo-bf16 configuration), tensor cores.
    cudnnCheck(cudnnSetFilter4dDescriptor(wb_.get(), CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, nd.out_channels, nd.in.c,
                                          nd.kernel, nd.kernel));
    // TF32 on NHWC copies (NetState::nhwc32): fp32 KRSC filters.
    cudnnCheck(cudnnSetFilter4dDescriptor(wn_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, nd.out_channels, nd.in.c,
                                          nd.kernel, nd.kernel));
  }

  // bf_a: x's copy when the input is fp32, or dx when the input is bf16 with another
  // reader (summed into its gradient); bf_b: y or dy when the output is fp32; bf_w: dW.
  Bf16Need bf16_need(int64_t n) const override {
    const bool a = !s_.is_nhwc(in()) || (s_.is_half(in()) && s_.readers[static_cast<size_t>(in())] > 1);
    return {a ? n * nd_.in.numel() : 0, s_.is_nhwc(out()) ? 0 : n * nd_.out.numel(), filter_count()};
  }

  size_t plan(const Plan& p) override {
    if (algos_.size() <= static_cast<size_t>(p.index)) algos_.resize(static_cast<size_t>(p.index) + 1);
    ConvAlgos& a = algos_[static_cast<size_t>(p.index)];
    if (nhwc()) {
      a.xb = tensor_desc(p.n, nd_.in.c, nd_.in.h, nd_.in.w, CUDNN_TENSOR_NHWC, nhwc_type());
      a.yb = tensor_desc(p.n, nd_.out.c, nd_.out.h, nd_.out.w, CUDNN_TENSOR_NHWC, nhwc_type());
    }
    if (s_.bf16_store() && wbf_.size() < static_cast<size_t>(filter_count())) {
      cudaCheck(cudaStreamSynchronize(s_.stream));
      wbf_.alloc(static_cast<size_t>(filter_count()), s_.stream);
      if (nd_.params.size() > 1) bias_partial_.alloc(static_cast<size_t>(kBiasChunks) * nd_.out_channels, s_.stream);
    }
    const cudnnTensorDescriptor_t x = nhwc() ? a.xb->get() : xd(p), y = nhwc() ? a.yb->get() : yd(p);
    a.cfwd = conv_desc();
    a.cbwd_data = conv_desc();
    a.cbwd_filter = conv_desc();
    int on = 0, oc = 0, oh = 0, ow = 0;
    cudnnCheck(cudnnGetConvolution2dForwardOutputDim(a.cfwd->get(), x, filter(), &on, &oc, &oh, &ow));
    check_output(p.n, on, oc, oh, ow);
    ConvProblem prob;
    prob.n = p.n;
    prob.c = nd_.in.c;
    prob.h = nd_.in.h;
    prob.w = nd_.in.w;
    prob.k = nd_.out_channels;
    prob.kernel = nd_.kernel;
    prob.pad = nd_.pad;
    prob.stride = nd_.stride;
    prob.math = s_.bf16 ? ConvMath::bf16 : s_.nhwc32 ? ConvMath::tf32_nhwc : s_.tf32 ? ConvMath::tf32 : ConvMath::fma;
    size_t ws = 0;
    const cudnnHandle_t h = s_.cudnn;
    const cudnnFilterDescriptor_t w = filter();
    cudnnConvolutionDescriptor_t c = a.cfwd->get();
    prob.dir = ConvDir::forward;
    a.fwd = static_cast<cudnnConvolutionFwdAlgo_t>(algo_for(c,
        prob,
        [&](bool measure) {
          cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
          int got = 0;
          if (measure)
            cudnnCheck(cudnnFindConvolutionForwardAlgorithm(h, x, w, c, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
          else
            cudnnCheck(
                cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
          return results(perf, got);
        },
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                                                         bytes);
        },
        [](int a) { return winograd(static_cast<cudnnConvolutionFwdAlgo_t>(a)); },
        ws));
    prob.dir = ConvDir::backward_filter;
    c = a.cbwd_filter->get();
    a.bwd_filter = static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo_for(c,
        prob,
        [&](bool measure) {
          cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          int got = 0;
          if (measure)
            cudnnCheck(cudnnFindConvolutionBackwardFilterAlgorithm(h, x, y, c, w,
                                                                   CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
          else
            cudnnCheck(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, y, c, w,
                                                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf));
          return results(perf, got);
        },
        [&](int algo, size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              h, x, y, c, w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
        },
        [](int a) { return winograd(static_cast<cudnnConvolutionBwdFilterAlgo_t>(a)); },
        ws));
    if (s_.needs_diff[in()]) {
      prob.dir = ConvDir::backward_data;
      c = a.cbwd_data->get();
      a.bwd_data = static_cast<cudnnConvolutionBwdDataAlgo_t>(algo_for(c,
          prob,
          [&](bool measure) {
            cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            int got = 0;
            if (measure)
              cudnnCheck(cudnnFindConvolutionBackwardDataAlgorithm(h, w, y, c, x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                   &got, perf));
            else
              cudnnCheck(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, y, c, x,
                                                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf));
            return results(perf, got);
          },
          [&](int algo, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(
                h, w, y, c, x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), bytes);
          },
          [](int a) { return winograd(static_cast<cudnnConvolutionBwdDataAlgo_t>(a)); },
          ws));
    }
    return ws;
  }

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    const ConvAlgos& a = algos(p);
    float* y = s_.data[out()];
    if (nhwc()) {
      const void* w = sw();
      if (s_.bf16_store()) {  // this layer's bf16 filter, for the backward too
        to_bf16_nhwc(s_.P(nd_, 0), wbf_.get(), nd_.out_channels, nd_.in.c, kk(), s_.stream);
        w = wbf_.get();
      } else {
        to_nhwc(s_.P(nd_, 0), sw(), nd_.out_channels, nd_.in.c, kk());
      }
      void* yb = s_.is_nhwc(out()) ? static_cast<void*>(y) : sb();
      cudnnCheck(cudnnConvolutionForward(s_.cudnn, &kOne, a.xb->get(), x_nhwc(p), filter(), w, a.cfwd->get(), a.fwd,
                                         s_.workspace.get(), s_.workspace.size(), &kZero, a.yb->get(), yb));
      if (s_.is_half(out())) {
        if (nd_.params.size() > 1) bias_add_nhwc_bf16(s_.hdata(out()), s_.P(nd_, 1), p.n * hw_out(), nd_.out.c, s_.stream);
        return;
      }
      if (s_.is_nhwc(out())) {  // fp32 NHWC store: the bias broadcast over the NHWC descriptor
        if (nd_.params.size() > 1)
          cudnnCheck(cudnnAddTensor(s_.cudnn, &kOne, chan_->get(), s_.P(nd_, 1), &kOne, yd(p), y));
        return;
      }
      from_nhwc(sb(), y, p.n, nd_.out.c, hw_out(), false);
    } else {
      cudnnCheck(cudnnConvolutionForward(s_.cudnn, &kOne, xd(p), s_.data[in()], w_.get(), s_.P(nd_, 0), a.cfwd->get(),
                                         a.fwd, s_.workspace.get(), s_.workspace.size(), &kZero, yd(p), y));
    }
    if (nd_.params.size() > 1) cudnnCheck(cudnnAddTensor(s_.cudnn, &kOne, chan_->get(), s_.P(nd_, 1), &kOne, yd(p), y));
  }

  void backward_params(const Plan& p) override {
    const ConvAlgos& a = algos(p);
    if (nhwc()) {
      const void* x = x_nhwc(p);
      cudnnCheck(cudnnConvolutionBackwardFilter(s_.cudnn, &kOne, a.xb->get(), x, a.yb->get(), dy_nhwc(p),
                                                a.cbwd_filter->get(), a.bwd_filter, s_.workspace.get(),
                                                s_.workspace.size(), &kZero, filter(), sw()));
      from_nhwc(sw(), s_.G(nd_, 0), nd_.out_channels, nd_.in.c, kk(), false);
      if (s_.is_half(out())) {
        if (nd_.params.size() > 1)
          bias_grad_nhwc_bf16(s_.hdiff(out()), s_.G(nd_, 1), p.n * hw_out(), nd_.out.c, bias_partial_.get(),
                              s_.stream);
        return;
      }
      // fp32 NHWC store: falls through to cudnnConvolutionBackwardBias on the NHWC descriptor.
    } else {
      cudnnCheck(cudnnConvolutionBackwardFilter(s_.cudnn, &kOne, xd(p), s_.data[in()], yd(p), s_.diff[out()],
                                                a.cbwd_filter->get(), a.bwd_filter, s_.workspace.get(), s_.workspace.size(),
                                                &kZero, w_.get(), s_.G(nd_, 0)));
    }
    if (nd_.params.size() > 1)
      cudnnCheck(
          cudnnConvolutionBackwardBias(s_.cudnn, &kOne, yd(p), s_.diff[out()], &kZero, chan_->get(), s_.G(nd_, 1)));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const ConvAlgos& a = algos(p);
    const float* beta = s_.beta_for(in());
    if (nhwc()) {
      const void* dy = dy_nhwc(p);
      const void* w = sw();
      if (s_.bf16_store()) w = wbf_.get();  // converted by this step's forward
      else to_nhwc(s_.P(nd_, 0), sw(), nd_.out_channels, nd_.in.c, kk());
      // fp32 NHWC store: dx straight into the input's gradient, blended by cuDNN's beta.
      if (s_.is_nhwc(in()) && !s_.is_half(in())) {
        cudnnCheck(cudnnConvolutionBackwardData(s_.cudnn, &kOne, filter(), w, a.yb->get(), dy, a.cbwd_data->get(),
                                                a.bwd_data, s_.workspace.get(), s_.workspace.size(), beta,
                                                a.xb->get(), s_.diff[in()]));
        return;
      }
      // dx straight into a bf16 input's gradient when it is the first writer; else into
      // bf_a, then summed into it (fp32, one rounding) or widened into the fp32 one.
      const bool direct = s_.is_half(in()) && *beta == 0.f;
      cudnnCheck(cudnnConvolutionBackwardData(s_.cudnn, &kOne, filter(), w, a.yb->get(), dy, a.cbwd_data->get(),
                                              a.bwd_data, s_.workspace.get(), s_.workspace.size(), &kZero,
                                              a.xb->get(), direct ? static_cast<void*>(s_.hdiff(in())) : sa()));
      if (direct) return;
      if (s_.is_half(in())) add_bf16(s_.hdiff(in()), s_.bf_a.get(), s_.hdiff(in()), p.n * nd_.in.numel(), s_.stream);
      else from_nhwc(sa(), s_.diff[in()], p.n, nd_.in.c, hw_in(), *beta != 0.f);
      return;
    }
    cudnnCheck(cudnnConvolutionBackwardData(s_.cudnn, &kOne, w_.get(), s_.P(nd_, 0), yd(p), s_.diff[out()],
                                            a.cbwd_data->get(), a.bwd_data, s_.workspace.get(), s_.workspace.size(), beta, xd(p),
                                            s_.diff[in()]));
  }

 private:
  // The algorithm for prob: the cached choice (an identical convolution planned before,
  // or set_tuning's) when cuDNN accepts it within the cap, else chosen now from
  // candidates(measure) and cached. The direction's descriptor d gets the choice's math
  // type (the base one where a record has none). Adds its workspace to ws (the maximum).
  // What may not run, a cuDNN candidate or a recorded choice alike: a down-conversion of
  // fp32 data to fp16 tensor cores (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: beyond what
  // --tf32 allows), and under full fp32 (--tf32 off: the mode for comparing GPU and CPU
  // numerics like for like) Winograd (winograd(algo)): timed in, it put gradients 2e-2
  // (relative to their largest) away from the CPU's where GEMM-based algorithms stay near
  // 1e-4 (H200, cuDNN 9.19: WINOGRAD_NONFUSED forward on a 5×5 convolution, the third GPU
  // run). A record (a checkpoint's) is refused too when its math type is not FMA under
  // --tf32 off.
  template <class Winograd>
  bool refused(int algo, int math_type, Winograd winograd) const {
    return math_type == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || (base_math() == CUDNN_FMA_MATH && winograd(algo));
  }

  template <class Candidates, class Workspace, class Winograd>
  int algo_for(cudnnConvolutionDescriptor_t d, const ConvProblem& prob, Candidates candidates, Workspace workspace,
               Winograd winograd, size_t& ws) {
    const std::string key = prob.key();
    const bool fma = base_math() == CUDNN_FMA_MATH;
    if (auto it = s_.conv_algos.find(key); it != s_.conv_algos.end()) {
      const ConvChoice c = it->second;
      const bool loosens =
          refused(c.algo, c.math_type, winograd) || (fma && c.math_type >= 0 && c.math_type != CUDNN_FMA_MATH);
      size_t bytes = 0;
      cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
      if (!loosens) {
        set_math(d, c);
        st = workspace(c.algo, &bytes);
        if (st == CUDNN_STATUS_SUCCESS && bytes <= kMaxConvWorkspace) {
          ws = std::max(ws, bytes);
          return c.algo;
        }
      }
      set_math(d, ConvChoice(0, -1));
      log_warn("the recorded cuDNN " + std::string(conv_dir_name(prob.dir)) + " algorithm " + std::to_string(c.algo) +
               " for '" + key + "' cannot run here (" +
               (loosens ? std::string("its math is not full fp32 or not allowed here")
                : st == CUDNN_STATUS_SUCCESS ? std::string("workspace over the cap")
                                             : std::string(cudnnGetErrorString(st)) +
                                                   "; another GPU type or cuDNN version?") +
               "): choosing anew, so this run's bits may differ from the run that recorded it");
      s_.conv_algos.erase(it);
    }
    std::vector<AlgoResult> r = candidates(s_.cudnn_benchmark);
    for (AlgoResult& x : r)
      if (refused(x.algo, x.math_type, winograd)) x.ok = false;
    const ConvChoice choice = s_.cudnn_benchmark ? pick_fastest(r, kMaxConvWorkspace, conv_dir_name(prob.dir))
                                                 : pick_ranked(r, kMaxConvWorkspace, conv_dir_name(prob.dir));
    set_math(d, choice);
    size_t bytes = 0;
    cudnnCheck(workspace(choice.algo, &bytes));
    ws = std::max(ws, bytes);
    s_.conv_algos[key] = choice;
    return choice.algo;
  }

  // The base math of this precision: bf16 tensor ops; fp32 data: CUDNN_DEFAULT_MATH lets
  // cuDNN pick TF32 tensor-core kernels (Ampere and later), as PyTorch's
  // torch.backends.cudnn.allow_tf32 = True (its default); CUDNN_FMA_MATH keeps full fp32
  // (--tf32 off).
  cudnnMathType_t base_math() const {
    return s_.bf16 ? CUDNN_TENSOR_OP_MATH : s_.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }
  // The NHWC path: bf16 copies (--precision bf16) or fp32 ones (TF32, NetState::nhwc32).
  bool nhwc() const { return s_.bf16 || s_.nhwc32; }
  cudnnDataType_t nhwc_type() const { return s_.bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }
  void* sa() const { return s_.bf16 ? static_cast<void*>(s_.bf_a.get()) : static_cast<void*>(s_.nh_a.get()); }
  void* sb() const { return s_.bf16 ? static_cast<void*>(s_.bf_b.get()) : static_cast<void*>(s_.nh_b.get()); }
  void* sw() const { return s_.bf16 ? static_cast<void*>(s_.bf_w.get()) : static_cast<void*>(s_.nh_w.get()); }
  // NCHW fp32 → the NHWC copy (rounded to bf16 under bf16), and back (widened).
  void to_nhwc(const float* x, void* y, int64_t n, int64_t c, int64_t hw) const {
    if (s_.bf16) to_bf16_nhwc(x, static_cast<bf16_t*>(y), n, c, hw, s_.stream);
    else cuda::to_nhwc(x, static_cast<float*>(y), n, c, hw, s_.stream);
  }
  void from_nhwc(const void* x, float* y, int64_t n, int64_t c, int64_t hw, bool accumulate) const {
    if (s_.bf16) from_bf16_nhwc(static_cast<const bf16_t*>(x), y, n, c, hw, accumulate, s_.stream);
    else cuda::from_nhwc(static_cast<const float*>(x), y, n, c, hw, accumulate, s_.stream);
  }
  // d's math type: the choice's, or the base one where it has none.
  void set_math(cudnnConvolutionDescriptor_t d, const ConvChoice& c) const {
    cudnnCheck(cudnnSetConvolutionMathType(d, c.math_type >= 0 ? static_cast<cudnnMathType_t>(c.math_type)
                                                                : base_math()));
  }
  // A convolution descriptor of this layer (padding, stride, fp32 compute) with the base math.
  std::unique_ptr<ConvDesc> conv_desc() const {
    auto d = std::make_unique<ConvDesc>();
    cudnnCheck(cudnnSetConvolution2dDescriptor(d->get(), nd_.pad, nd_.pad, nd_.stride, nd_.stride, 1, 1,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    cudnnCheck(cudnnSetConvolutionMathType(d->get(), base_math()));
    return d;
  }

  const ConvAlgos& algos(const Plan& p) const { return algos_[static_cast<size_t>(p.index)]; }
  cudnnFilterDescriptor_t filter() const { return s_.bf16 ? wb_.get() : s_.nhwc32 ? wn_.get() : w_.get(); }
  int64_t hw_in() const { return int64_t{nd_.in.h} * nd_.in.w; }
  int64_t hw_out() const { return int64_t{nd_.out.h} * nd_.out.w; }
  int64_t kk() const { return int64_t{nd_.kernel} * nd_.kernel; }
  int64_t filter_count() const { return int64_t{nd_.out_channels} * nd_.in.c * kk(); }
  // NHWC dy: a store output's own gradient, else sb() (converted once per layer:
  // NetState::bf_b_needs).
  const void* dy_nhwc(const Plan& p) {
    if (s_.is_nhwc(out())) return s_.diff[out()];
    if (s_.bf_b_needs(s_.diff[out()])) to_nhwc(s_.diff[out()], sb(), p.n, nd_.out.c, hw_out());
    return sb();
  }
  // NHWC x: a store input itself, else its copy in sa() (converted now).
  const void* x_nhwc(const Plan& p) {
    if (s_.is_nhwc(in())) return s_.data[in()];
    to_nhwc(s_.data[in()], sa(), p.n, nd_.in.c, hw_in());
    return sa();
  }

  FilterDesc w_, wb_, wn_;  // fp32 KCRS; bf16 KRSC; fp32 KRSC
  DevArray<bf16_t> wbf_;    // the bf16 activation store: this step's bf16 KRSC filter (forward → backward)
  DevArray<float> bias_partial_;  // bias_grad_nhwc_bf16's kBiasChunks × out_channels partial sums
  std::unique_ptr<TensorDesc> chan_;  // bias: 1×C×1×1
  std::vector<ConvAlgos> algos_;      // per plan
};

}  // namespace

std::unique_ptr<Layer> make_conv(const Node& nd, NetState& s) { return std::make_unique<Conv>(nd, s); }

}  // namespace cnnscale::nn::cuda
