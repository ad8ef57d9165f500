// check.hpp — cudaCheck / cudnnCheck / cublasCheck: call the library and, on failure,
// print "cnnscale: error: <call> failed at file:line on rank r: <the library's own
// error string>" and end the job (util/error.hpp fatal_error: every rank aborts once
// bootstrap has started MPI). No MPI here, so a .cu file that includes this does not
// pull <mpi.h>. CUDA build only.
//
// One exception: while a CaptureScope is open on the calling thread (the GPU model
// capturing its step into a CUDA graph, nn/cuda/step_graph.hpp), a failed call throws
// CaptureFailed instead, so that the caller ends the capture and runs the step without a
// graph: a call CUDA cannot capture must not end a job that runs fine without one.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

#include "util/error.hpp"

namespace cnnscale {

// The message a failed call would have ended the job with (failed_call_message).
struct CaptureFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Open for one thread's stream capture; nests (a counter). Not for anything else: code
// under it must treat every check as possibly throwing.
class CaptureScope {
 public:
  CaptureScope() { ++depth(); }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
  ~CaptureScope() { --depth(); }
  static bool open() { return depth() > 0; }

 private:
  static int& depth() {
    static thread_local int d = 0;
    return d;
  }
};

// fatal_error, or CaptureFailed inside a CaptureScope.
[[noreturn]] inline void failed_library_call(const std::string& message) {
  if (CaptureScope::open()) throw CaptureFailed(message);
  fatal_error(message);
}

inline void cuda_check(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc != cudaSuccess) failed_library_call(failed_call_message(call, file, line, cudaGetErrorString(rc)));
}

inline void cudnn_check(cudnnStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUDNN_STATUS_SUCCESS) failed_library_call(failed_call_message(call, file, line, cudnnGetErrorString(rc)));
}

inline void cublas_check(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    failed_library_call(failed_call_message(call, file, line, cublasGetStatusString(rc)));
}

}  // namespace cnnscale

#define cudaCheck(call) ::cnnscale::cuda_check((call), #call, __FILE__, __LINE__)
#define cudnnCheck(call) ::cnnscale::cudnn_check((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) ::cnnscale::cublas_check((call), #call, __FILE__, __LINE__)
