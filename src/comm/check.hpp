// check.hpp — mpiCheck / ncclCheck / cudaCheck / cudnnCheck / cublasCheck: call a library, and on failure print
// "cnnscale: error: <call> failed at file:line: <the library's own error string>",
// then abort the whole job (MPI_Abort) so that no rank is left waiting.
#pragma once
#include <mpi.h>

#include <string>

namespace cnnscale {

[[noreturn]] void abort_job(const std::string& message, int status = 3);

void mpi_check(int rc, const char* call, const char* file, int line);

}  // namespace cnnscale

#define mpiCheck(call) ::cnnscale::mpi_check((call), #call, __FILE__, __LINE__)

#ifdef CNNSCALE_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>
namespace cnnscale {
void cuda_check(cudaError_t rc, const char* call, const char* file, int line);
void nccl_check(ncclResult_t rc, const char* call, const char* file, int line);
void cudnn_check(cudnnStatus_t rc, const char* call, const char* file, int line);
void cublas_check(cublasStatus_t rc, const char* call, const char* file, int line);
}  // namespace cnnscale
#define cudaCheck(call) ::cnnscale::cuda_check((call), #call, __FILE__, __LINE__)
#define ncclCheck(call) ::cnnscale::nccl_check((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call) ::cnnscale::cudnn_check((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) ::cnnscale::cublas_check((call), #call, __FILE__, __LINE__)
#endif
