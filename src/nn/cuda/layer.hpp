// layer.hpp — the GPU model's layers: one Layer per graph node, one file per op
// (layer_<op>.cpp, as the CPU model's nn/layer_*.cpp), driven by CudaNet
// (cuda_model.cpp), which owns what they share (NetState): the library handles, the flat
// parameter and gradient buffers, the activations of the current batch and the
// convolution workspace.
//
// Activations are NCHW fp32, except under bf16 those of the activation store (below). A
// tensor read by several nodes gets its gradient written by the first reader in backward
// order (beta 0) and accumulated by the others (beta 1): NetState::beta_for.
//
// bf16 (NetState::bf16, --precision bf16): convolutions and linear layers compute on
// bf16 operands with fp32 accumulation, as the CPU model's oneDNN bf16 primitives;
// linear layers write fp32 results as the CPU does, convolutions bf16 ones (cuDNN's
// bf16 convolutions write bf16, as under PyTorch's autocast).
//  - The bf16 activation store (NetState::half, the default; issue 30): the tensors
//    nn::gpu_bf16_tensors marks (from each convolution's output through batch-norm, relu,
//    the pools and residual adds, up to flatten) are kept as bf16 NHWC, data and
//    gradient alike, half the bytes of fp32: a convolution reads x and dy and writes y
//    and dx there directly; batch-norm and the pools run cuDNN on bf16 NHWC descriptors
//    (fp32 scale, bias and statistics: cuDNN's pseudo-bf16 configuration); relu and add
//    are kernels (kernels.hpp) that compute in fp32 and round once; a convolution's fp32
//    bias is added to its bf16 output by a kernel (a second rounding, as PyTorch's
//    separate bias add under autocast); flatten widens to fp32 C·H·W for the classifier. A tensor read twice sums its
//    gradients in fp32, rounded once (cuDNN's beta = 1 for batch-norm and the pools, the
//    kernels' accumulate otherwise). A convolution converts its fp32 filter to bf16 KRSC
//    once per forward (Conv's own copy, reused by its backward).
//  - CNNSCALE_GPU_BF16_STORE=0: every activation stays fp32 NCHW and each convolution
//    converts x, W and dy to bf16 NHWC copies per call and widens y, dx back (the design
//    before issue 30; for comparisons).
// The copies and the conversions' results live in three scratch buffers shared by all
// layers (bf_a: the input side, x or dx; bf_b: the output side, y or dy; bf_w: a filter
// or its gradient), sized by Layer::bf16_need.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/conv_algo.hpp"
#include "nn/cuda/device_array.hpp"
#include "nn/cuda/kernels.hpp"
#include "nn/graph.hpp"
#include "nn/model.hpp"

namespace cnnscale::nn::cuda {

constexpr float kOne = 1.f, kZero = 0.f;

// The bf16 scratch elements a layer needs for a batch of n (NetState::bf_*).
struct Bf16Need {
  int64_t a = 0, b = 0, w = 0;
};

// What the layers of one CudaNet share; owned by the CudaNet.
struct NetState {
  const Graph* g = nullptr;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  bool tf32 = true;               // TF32 tensor-core math for convolutions and matmuls (--tf32)
  bool cudnn_benchmark = true;    // measure convolution algorithms (--cudnn-benchmark), else heuristics
  // The convolution algorithm per distinct problem (ConvProblem::key): chosen by the
  // first layer that plans it and shared by identical ones, or set by set_tuning().
  ConvTuning conv_algos;
  DevArray<float> params, grads;  // flat, param_count()
  // Per tensor id (0 = input, k+1 = output of node k), for up to max_batch samples:
  std::vector<float*> data, diff;
  std::vector<bool> alias;       // a flatten output that shares its input's buffers
  std::vector<bool> needs_diff;  // false for the network input
  std::vector<int> readers;      // per tensor: how many nodes read it
  std::vector<char> written;     // this backward: the gradient has its first writer
  DevArray<float> ones;          // max_batch ones (linear bias)
  const int64_t* sample_ids = nullptr;  // the batch's global sample ids (dropout; the current input slot)
  DevArray<char> workspace;      // convolutions
  bool bf16 = false;             // --precision bf16 (CudaNet::prepare)
  // The activation store (above): per tensor id, 1 = kept NHWC between layers, in bf16
  // (data and diff point at bf16 elements then: hdata/hdiff) or, with store32, in fp32;
  // empty without it (fp32 NCHW, or the store off).
  std::vector<char> half;
  // The fp32 NHWC store (issue 37 item 2; CNNSCALE_GPU_NHWC_STORE=1 under TF32, with
  // nhwc32; NOT YET RUN ON A GPU): the same tensors kept NHWC in fp32, so the TF32
  // convolutions read and write them without the per-call layout copies.
  bool store32 = false;
  bool is_nhwc(int t) const { return !half.empty() && half[static_cast<size_t>(t)]; }  // either store
  bool is_half(int t) const { return !store32 && is_nhwc(t); }                         // the bf16 store's
  bool nhwc_store() const { return !half.empty(); }
  bool bf16_store() const { return !half.empty() && !store32; }  // only ever under bf16
  // CNNSCALE_GPU_BN=own (layer_bn.cpp, batchnorm_nhwc.hpp): the batch norms of the store's
  // tensors run our own NHWC kernels, fused with the ReLU or the residual add + ReLU after
  // them (bn_fusion); otherwise cuDNN. Read by CudaNet::prepare; a change replans.
  bool bn_own = false;
  // Per node, with bn_own: what a batch norm writes instead of its own output — `out`,
  // the tensor it writes (the ReLU's output when fused; -1: its own), `z` the residual it
  // adds before the ReLU (-1: none) — and, per node, whether a fused batch norm does the
  // node's work (the relu and add it absorbed; CudaNet runs neither pass of theirs).
  using BnFusion = nn::BnFusion;     // nn/graph.hpp plan_gpu_fusion
  std::vector<BnFusion> bn_fusion;  // empty without bn_own
  std::vector<char> absorbed;       // empty without bn_own
  // Per tensor id: never written nor read because a fused batch norm writes past it (its
  // own output, an absorbed add's): no buffers (CudaNet::ensure_capacity); empty: none.
  std::vector<char> dead;
  bool is_dead(int t) const { return !dead.empty() && dead[static_cast<size_t>(t)]; }
  bf16_t* hdata(int t) const { return reinterpret_cast<bf16_t*>(data[static_cast<size_t>(t)]); }
  bf16_t* hdiff(int t) const { return reinterpret_cast<bf16_t*>(diff[static_cast<size_t>(t)]); }
  DevArray<bf16_t> bf_a, bf_b, bf_w;  // bf16 scratch (see above), allocated only under bf16
  // fp32 with TF32 on a GPU with tensor cores (compute capability >= 8; CudaNet::prepare):
  // convolutions run on fp32 NHWC copies (nh_a, nh_b, nh_w: the roles of bf_a, bf_b,
  // bf_w, the same element counts), because cuDNN's TF32 tensor-core kernels read NHWC:
  // on NCHW data the TF32 step was barely faster than full fp32 (first GPU run, H200:
  // ResNet-50 convolutions 143 ms of a 184 ms step). bf_b_holds tracks nh_b's dy then.
  bool nhwc32 = false;
  DevArray<float> nh_a, nh_b, nh_w;
  // The fp32 tensor whose bf16 copy bf_b holds (a layer's dy: backward_params converts
  // it, backward_data of the same layer reuses it); CudaNet resets it before each layer's
  // backward_params, so nothing else's copy is ever taken for it.
  const float* bf_b_holds = nullptr;
  // True when bf_b does not hold dy's copy yet (the caller converts dy into bf_b now);
  // from then on it does.
  bool bf_b_needs(const float* dy) {
    if (bf_b_holds == dy) return false;
    bf_b_holds = dy;
    return true;
  }

  float* P(const Node& nd, int k) const { return params.get() + g->params[nd.params[k]].info.offset; }
  float* G(const Node& nd, int k) const { return grads.get() + g->params[nd.params[k]].info.offset; }
  // beta for the gradient of tensor t: 0 for its first writer in backward order, then 1.
  const float* beta_for(int t);
  // dx (=|+=) dy over count floats, as beta says.
  void pass_grad(const float* dy, float* dx, int64_t count, const float* beta);
  // The same for bf16 tensors (the sum in fp32, rounded once).
  void pass_grad16(const bf16_t* dy, bf16_t* dx, int64_t count, const float* beta);
};

// A 32-bit count for cuBLAS/cuDNN; throws when the tensor is too large.
int as_int(int64_t v);

// Per batch size n: a descriptor per tensor (fp32 NCHW, or bf16 NHWC for the activation
// store's tensors: NetState::half) and an index for the layers' own per-plan state (the
// convolution algorithms).
struct Plan {
  int index = 0;
  int64_t n = 0;
  std::vector<std::unique_ptr<TensorDesc>> t;  // per tensor id
};

class Layer {
 public:
  Layer(const Node& nd, NetState& s) : nd_(nd), s_(s) {}
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  virtual ~Layer() = default;
  // Buffers for batches of up to max_batch samples (dropout masks).
  virtual void reserve(int64_t /*max_batch*/) {}
  // bf16 scratch for batches of up to max_batch samples (convolutions and linear layers).
  virtual Bf16Need bf16_need(int64_t /*max_batch*/) const { return {}; }
  // A new plan: checks cuDNN's output shape against the graph's, chooses algorithms.
  // Returns the workspace bytes the layer needs.
  virtual size_t plan(const Plan& /*p*/) { return 0; }
  // eval: dropout off and batch-norm on running statistics (forward_eval); otherwise
  // dropout follows ctx.training and batch-norm uses (and updates) batch statistics.
  virtual void forward(const Plan& p, const StepContext& ctx, bool eval) = 0;
  // Parameter gradients (final once enqueued; batch-norm also does its data gradient).
  virtual void backward_params(const Plan& /*p*/) {}
  // Input gradient(s).
  virtual void backward_data(const Plan& p) = 0;

 protected:
  int in() const { return nd_.inputs[0]; }
  int out() const { return nd_.index + 1; }
  cudnnTensorDescriptor_t xd(const Plan& p) const { return p.t[in()]->get(); }
  cudnnTensorDescriptor_t yd(const Plan& p) const { return p.t[out()]->get(); }
  // Throws when cuDNN's output shape (from a Get*ForwardOutputDim) differs from the graph's.
  void check_output(int64_t n, int on, int oc, int oh, int ow) const;

  const Node& nd_;
  NetState& s_;
};

// One factory per op (layer_<op>.cpp) and the dispatch over Op (layer.cpp).
std::unique_ptr<Layer> make_conv(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_relu(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_pool(const Node& nd, NetState& s);  // maxpool, avgpool
std::unique_ptr<Layer> make_bn(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_dropout(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_flatten(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_linear(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_add(const Node& nd, NetState& s);
std::unique_ptr<Layer> make_layer(const Node& nd, NetState& s);

}  // namespace cnnscale::nn::cuda
