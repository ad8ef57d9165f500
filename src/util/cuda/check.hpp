// check.hpp — cudaCheck / cudnnCheck / cublasCheck: call the library and, on failure,
// print "cnnscale: error: <call> failed at file:line on rank r: <the library's own
// error string>" and end the job (util/error.hpp fatal_error: every rank aborts once
// bootstrap has started MPI). No MPI here, so a .cu file that includes this does not
// pull <mpi.h>. CUDA build only.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "util/error.hpp"

namespace cnnscale {

inline void cuda_check(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess) fatal_error(failed_call_message(call, file, line, cudaGetErrorString(rc)));
}

inline void cudnn_check(cudnnStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUDNN_STATUS_SUCCESS) fatal_error(failed_call_message(call, file, line, cudnnGetErrorString(rc)));
}

inline void cublas_check(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUBLAS_STATUS_SUCCESS) fatal_error(failed_call_message(call, file, line, cublasGetStatusString(rc)));
}

}  // namespace cnnscale

#define cudaCheck(call) ::cnnscale::cuda_check((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call) ::cnnscale::cudnn_check((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) ::cnnscale::cublas_check((call), #call, __FILE__, __LINE__)
