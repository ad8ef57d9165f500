// batchnorm_nhwc.cu — see batchnorm_nhwc.hpp; the kernels and their launch sequence are in
// batchnorm_nhwc_impl.cuh (shared with the CPU emulator of tests/nn/test_bn_emulated.cpp),
// launched here with <<<>>>, each launch checked.
#include <utility>

#include "nn/cuda/batchnorm_nhwc_impl.cuh"
#include "util/cuda/check.hpp"

namespace cnnscale::nn::cuda::bn {
namespace {

struct CudaLaunch {
  template <class... P, class... A>
  static void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shared, cudaStream_t s, A&&... args) {
    kernel<<<grid, block, shared, s>>>(std::forward<A>(args)...);
    cudaCheck(cudaGetLastError());
  }
};

}  // namespace

size_t workspace_bytes(int64_t rows, int c, bool bf16) { return detail::workspace_bytes_impl(rows, c, bf16); }

template <class T>
void forward_train(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double momentum, double eps,
                   float* save_mean, float* save_invstd, bool relu, void* workspace, cudaStream_t s) {
  detail::forward_train_impl<CudaLaunch, T>(x, z, y, rows, c, st, momentum, eps, save_mean, save_invstd, relu,
                                            workspace, s);
}

template <class T>
void forward_eval(const T* x, const T* z, T* y, int64_t rows, int c, const Stats& st, double eps, bool relu,
                  void* workspace, cudaStream_t s) {
  detail::forward_eval_impl<CudaLaunch, T>(x, z, y, rows, c, st, eps, relu, workspace, s);
}

template <class T>
void backward(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, T* dz, bool dz_accumulate, int64_t rows,
              int c, const float* gamma, const float* save_mean, const float* save_invstd, float* dgamma, float* dbeta,
              bool relu, void* workspace, cudaStream_t s) {
  detail::backward_impl<CudaLaunch, T>(x, y, dy, dx, dx_accumulate, dz, dz_accumulate, rows, c, gamma, save_mean,
                                       save_invstd, dgamma, dbeta, relu, workspace, s);
}

template <class T>
void forward_local_sums(const T* x, int64_t rows, int c, void* workspace, double* sums, cudaStream_t s) {
  detail::forward_local_sums_impl<CudaLaunch, T>(x, rows, c, workspace, sums, s);
}

template <class T>
void forward_global(const T* x, const T* z, T* y, int64_t rows, int c, const double* sums, double n, const Stats& st,
                    double momentum, double eps, float* save_mean, float* save_invstd, bool relu, void* workspace,
                    cudaStream_t s) {
  detail::forward_global_impl<CudaLaunch, T>(x, z, y, rows, c, sums, n, st, momentum, eps, save_mean, save_invstd,
                                             relu, workspace, s);
}

template <class T>
void backward_local_sums(const T* x, const T* y, const T* dy, T* dz, bool dz_accumulate, int64_t rows, int c,
                         const float* save_mean, bool relu, void* workspace, double* local, cudaStream_t s) {
  detail::backward_local_sums_impl<CudaLaunch, T>(x, y, dy, dz, dz_accumulate, rows, c, save_mean, relu, workspace,
                                                  local, s);
}

template <class T>
void backward_global(const T* x, const T* y, const T* dy, T* dx, bool dx_accumulate, int64_t rows, int c,
                     const float* gamma, const float* save_mean, const float* save_invstd, const double* local,
                     const double* global, double n, float* dgamma, float* dbeta, bool relu, void* workspace,
                     cudaStream_t s) {
  detail::backward_global_impl<CudaLaunch, T>(x, y, dy, dx, dx_accumulate, rows, c, gamma, save_mean, save_invstd,
                                              local, global, n, dgamma, dbeta, relu, workspace, s);
}

#define CNNSCALE_BN_INSTANTIATE(T)                                                                                   \
  template void forward_train<T>(const T*, const T*, T*, int64_t, int, const Stats&, double, double, float*, float*, \
                                 bool, void*, cudaStream_t);                                                         \
  template void forward_eval<T>(const T*, const T*, T*, int64_t, int, const Stats&, double, bool, void*,             \
                                cudaStream_t);                                                                       \
  template void backward<T>(const T*, const T*, const T*, T*, bool, T*, bool, int64_t, int, const float*,            \
                            const float*, const float*, float*, float*, bool, void*, cudaStream_t);              \
  template void forward_local_sums<T>(const T*, int64_t, int, void*, double*, cudaStream_t);                        \
  template void forward_global<T>(const T*, const T*, T*, int64_t, int, const double*, double, const Stats&, double, \
                                  double, float*, float*, bool, void*, cudaStream_t);                               \
  template void backward_local_sums<T>(const T*, const T*, const T*, T*, bool, int64_t, int, const float*, bool,    \
                                       void*, double*, cudaStream_t);                                               \
  template void backward_global<T>(const T*, const T*, const T*, T*, bool, int64_t, int, const float*, const float*, \
                                   const float*, const double*, const double*, double, float*, float*, bool, void*, \
                                   cudaStream_t);
CNNSCALE_BN_INSTANTIATE(float)
CNNSCALE_BN_INSTANTIATE(bf16_t)
#undef CNNSCALE_BN_INSTANTIATE

}  // namespace cnnscale::nn::cuda::bn
