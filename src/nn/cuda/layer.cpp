// layer.cpp — NetState helpers and the dispatch over Op (see layer.hpp).
#include "nn/cuda/layer.hpp"

#include <climits>
#include <string>

namespace cnnscale::nn::cuda {

const float* NetState::beta_for(int t) {
  const bool acc = written[t];
  written[t] = 1;
  return acc ? &kOne : &kZero;
}

void NetState::pass_grad(const float* dy, float* dx, int64_t count, const float* beta) {
  if (*beta != 0.f) cublasCheck(cublasSaxpy(cublas, as_int(count), &kOne, dy, 1, dx, 1));
  else cudaCheck(cudaMemcpyAsync(dx, dy, static_cast<size_t>(count) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

void NetState::pass_grad16(const bf16_t* dy, bf16_t* dx, int64_t count, const float* beta) {
  if (*beta != 0.f) add_bf16(dx, dy, dx, count, stream);
  else cudaCheck(cudaMemcpyAsync(dx, dy, static_cast<size_t>(count) * sizeof(bf16_t), cudaMemcpyDeviceToDevice, stream));
}

int as_int(int64_t v) {
  if (v > INT32_MAX)
    fail("a tensor of ", v,
         " elements is beyond the 32-bit counts of cuBLAS/cuDNN; lower --batch-size or the "
         "model's sizes");
  return static_cast<int>(v);
}

void Layer::check_output(int64_t n, int on, int oc, int oh, int ow) const {
  if (on != n || oc != nd_.out.c || oh != nd_.out.h || ow != nd_.out.w)
    throw std::logic_error("cuDNN output shape differs from the graph's at node " + std::to_string(nd_.index));
}

std::unique_ptr<Layer> make_layer(const Node& nd, NetState& s) {
  switch (nd.op) {
    case Op::conv:
      // Grouped convolution has not run on a GPU (issue 49: cuDNN has it, through
      // cudnnSetConvolutionGroupCount; it stays off until a GPU run checks it).
      if (nd.groups > 1)
        fail("--device cuda: layer ", nd.index, " is a grouped convolution (groups ", nd.groups,
             "), which cnnscale's GPU model does not run yet; train this model with --device cpu");
      return make_conv(nd, s);
    case Op::relu: return make_relu(nd, s);
    case Op::act:
      fail("--device cuda: layer ", nd.index, " is a ", act_name(nd.act),
           " activation, which cnnscale's GPU model does not run yet; train this model with --device cpu");
    case Op::maxpool:
    case Op::avgpool:
      if (nd.ceil_mode)
        fail("--device cuda: layer ", nd.index, " is a max-pool with ceil_mode, which cnnscale's GPU model does not ",
             "run yet; train this model with --device cpu");
      return make_pool(nd, s);
    case Op::bn: return make_bn(nd, s);
    case Op::dropout: return make_dropout(nd, s);
    case Op::flatten: return make_flatten(nd, s);
    case Op::linear: return make_linear(nd, s);
    case Op::add: return make_add(nd, s);
    case Op::mul:
      fail("--device cuda: layer ", nd.index, " is a channel scale (squeeze-and-excitation), which cnnscale's GPU ",
           "model does not run yet; train this model with --device cpu");
    case Op::concat:
      fail("--device cuda: layer ", nd.index, " is a concatenation, which cnnscale's GPU model does not run yet; ",
           "train this model with --device cpu");
    case Op::stochastic_depth:
      fail("--device cuda: layer ", nd.index, " is a stochastic depth, which cnnscale's GPU model does not run yet; ",
           "train this model with --device cpu");
    case Op::layernorm:
    case Op::layer_scale:
    case Op::channel_slice:
    case Op::channel_shuffle:
    case Op::adaptive_avgpool:
    case Op::upsample:
    case Op::deconv:  // cuDNN has it (backward data of a convolution); off until a GPU run checks it
      fail("--device cuda: layer ", nd.index, " is a ", op_name(nd.op), ", which cnnscale's GPU model does not run yet; ",
           "train this model with --device cpu");
  }
  throw std::logic_error("GPU model: no layer for op of node " + std::to_string(nd.index));
}

}  // namespace cnnscale::nn::cuda
