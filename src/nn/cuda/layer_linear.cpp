// layer_linear.cpp — linear on cuBLAS, PyTorch's out×in weight layout: y = x·Wᵀ + b
// (cublasSgemm, then the bias added in fp32 by cudnnAddTensor: a rank-1 gemm would go
// through TF32 under --tf32 on), dW and dx by cublasSgemm, db by cublasSgemv with a
// ones vector. TF32 per the handle's math mode (CudaNet). bf16 (NetState::bf16):
// x, W and dy converted to bf16 (kernels.hpp) and multiplied by cublasGemmEx with
// fp32 accumulation and fp32 results (CUBLAS_COMPUTE_32F, C in CUDA_R_32F), as the
// CPU model's oneDNN bf16 inner product; the bias and db stay fp32.
#include "nn/cuda/layer.hpp"

namespace cnnscale::nn::cuda {
namespace {

// C (m×n, fp32, column-major) = A(op) · B(op) + beta·C with bf16 A and B.
void gemm_bf16(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const bf16_t* A,
               int lda, const bf16_t* B, int ldb, const float* beta, float* C, int ldc) {
  cublasCheck(cublasGemmEx(h, ta, tb, m, n, k, &kOne, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb, beta, C, CUDA_R_32F,
                           ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

class Linear final : public Layer {
 public:
  Linear(const Node& nd, NetState& s) : Layer(nd, s), chan_(tensor_desc(1, nd.out_channels, 1, 1)) {}

  Bf16Need bf16_need(int64_t n) const override {
    return {n * nd_.in.c, n * nd_.out_channels, int64_t{nd_.out_channels} * nd_.in.c};
  }

  void forward(const Plan& p, const StepContext& /*ctx*/, bool /*eval*/) override {
    // Column-major view: yᵀ (O×n) = W (O×I, stored as Wᵀ I×O) · xᵀ (I×n), then + b per
    // row of yᵀ: the n×O output is an n×O×1×1 NCHW tensor with the bias per channel.
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    float* y = s_.data[out()];
    if (s_.bf16) {
      to_bf16(s_.P(nd_, 0), s_.bf_w.get(), int64_t{O} * I, s_.stream);
      to_bf16(s_.data[in()], s_.bf_a.get(), p.n * I, s_.stream);
      gemm_bf16(s_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, s_.bf_w.get(), I, s_.bf_a.get(), I, &kZero, y, O);
    } else {
      cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, &kOne, s_.P(nd_, 0), I, s_.data[in()], I,
                              &kZero, y, O));
    }
    cudnnCheck(cudnnAddTensor(s_.cudnn, &kOne, chan_->get(), s_.P(nd_, 1), &kOne, yd(p), y));
  }

  void backward_params(const Plan& p) override {
    // dWᵀ (I×O) = xᵀ (I×n) · dy (n×O);  db (O) = dyᵀ (O×n) · 1
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    if (s_.bf16) {
      to_bf16(s_.data[in()], s_.bf_a.get(), p.n * I, s_.stream);
      dy_bf16(p);
      gemm_bf16(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, s_.bf_a.get(), I, s_.bf_b.get(), O, &kZero,
                s_.G(nd_, 0), I);
    } else {
      cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, &kOne, s_.data[in()], I, s_.diff[out()], O,
                              &kZero, s_.G(nd_, 0), I));
    }
    cublasCheck(
        cublasSgemv(s_.cublas, CUBLAS_OP_N, O, N, &kOne, s_.diff[out()], O, s_.ones.get(), 1, &kZero, s_.G(nd_, 1), 1));
  }

  void backward_data(const Plan& p) override {
    if (!s_.needs_diff[in()]) return;
    const float* beta = s_.beta_for(in());
    // dxᵀ (I×n) = Wᵀ (I×O) · dyᵀ (O×n)
    const int O = nd_.out_channels, I = nd_.in.c, N = as_int(p.n);
    if (s_.bf16) {
      dy_bf16(p);
      to_bf16(s_.P(nd_, 0), s_.bf_w.get(), int64_t{O} * I, s_.stream);
      gemm_bf16(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, s_.bf_w.get(), I, s_.bf_b.get(), O, beta, s_.diff[in()],
                I);
      return;
    }
    cublasCheck(cublasSgemm(s_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, &kOne, s_.P(nd_, 0), I, s_.diff[out()], O,
                            beta, s_.diff[in()], I));
  }

 private:
  // bf_b = bf16 dy (converted once per layer: NetState::bf_b_needs).
  void dy_bf16(const Plan& p) {
    if (s_.bf_b_needs(s_.diff[out()])) to_bf16(s_.diff[out()], s_.bf_b.get(), p.n * nd_.out_channels, s_.stream);
  }

  std::unique_ptr<TensorDesc> chan_;  // the bias: 1×O×1×1
};

}  // namespace

std::unique_ptr<Layer> make_linear(const Node& nd, NetState& s) { return std::make_unique<Linear>(nd, s); }

}  // namespace cnnscale::nn::cuda
