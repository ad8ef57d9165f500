// layer_linear.cpp — linear on cuBLAS, PyTorch's out×in weight layout: y = x·Wᵀ + b
// (cublasSgemm, the bias as a rank-1 gemm with a ones vector), dW and dx by cublasSgemm,
// db by cublasSgemv. CUBLAS_DEFAULT_MATH on the handle: no TF32.
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

class Linear final : public Layer {
 public:
  using Layer::Layer;

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    // Column-major view: yᵀ (O×n) = b·1ᵀ + W (O×I, stored as Wᵀ I×O) · xᵀ (I×n).
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    float* y = s_.data[out()];
    cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, O, N, 1, &kOne, s_.P(nd_, 1), O, s_.ones.get(), 1,
                            &kZero, y, O));
    cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &kOne, s_.P(nd_, 0), I, s_.data[in()], I,
                            &kOne, y, O));
  }

  void backward_params(const Plan& p) override {
    // dWᵀ (I×O) = xᵀ (I×n) · dy (n×O);  db (O) = dyᵀ (O×n) · 1
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &kOne, s_.data[in()], I, s_.diff[out()], O,
                            &kZero, s_.G(nd_, 0), I));
    cublasCheck(
        cublasSgemv(s_.cublas, CUBLAS_OP_N, O, N, &kOne, s_.diff[out()], O, s_.ones.get(), 1, &kZero, s_.G(nd_, 1), 1));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    // dxᵀ (I×n) = Wᵀ (I×O) · dyᵀ (O×n)
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &kOne, s_.P(nd_, 0), I, s_.diff[out()], O,
                            beta, s_.diff[in()], I));
  }
};

}  // namespace

std::unique_ptr<Layer> make_linear(const Node& nd, NetState& s) { return std::make_unique<Linear>(nd, s); }

}  // namespace cnnscale::nn::cuda
