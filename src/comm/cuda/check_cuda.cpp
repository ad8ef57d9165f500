// check_cuda.cpp — cudaCheck / ncclCheck / cudnnCheck / cublasCheck bodies (see check.hpp).
#include <cstdio>

#include "comm/check.hpp"
#include "util/log.hpp"

namespace cnnscale {

void cuda_check(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return;
  char where[512];
  std::snprintf(where, sizeof(where), "%s failed at %s:%d on rank %d: %s", call, file, line, log_rank(),
                cudaGetErrorString(rc));
  abort_job(where);
}

void nccl_check(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess) return;
  char where[512];
  std::snprintf(where, sizeof(where), "%s failed at %s:%d on rank %d: %s", call, file, line, log_rank(),
                ncclGetErrorString(rc));
  abort_job(where);
}

void cudnn_check(cudnnStatus_t rc, const char* call, const char* file, int line) {
  if (rc == CUDNN_STATUS_SUCCESS) return;
  char where[512];
  std::snprintf(where, sizeof(where), "%s failed at %s:%d on rank %d: %s", call, file, line, log_rank(),
                cudnnGetErrorString(rc));
  abort_job(where);
}

void cublas_check(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc == CUBLAS_STATUS_SUCCESS) return;
  char where[512];
  std::snprintf(where, sizeof(where), "%s failed at %s:%d on rank %d: %s", call, file, line, log_rank(),
                cublasGetStatusString(rc));
  abort_job(where);
}

}  // namespace cnnscale
