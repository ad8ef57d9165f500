// test_cuda_check.cpp — util/cuda/check.hpp without a GPU: a failed cudaCheck /
// cudnnCheck / cublasCheck ends the process with "cnnscale: error: <call> failed at
// file:line ...: <the library's string>" and status 3; inside a CaptureScope (a step being
// captured into a CUDA graph, nn/cuda/step_graph.hpp) the same failure throws
// CaptureFailed with that message instead, so the capture can end and the step run
// without a graph; scopes nest and close on unwinding. Literal error codes through the
// macros: no device needed. CUDA builds only; label unit.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "util/cuda/check.hpp"

using cnnscale::CaptureFailed;
using cnnscale::CaptureScope;

TEST(CudaCheck, AFailedCallEndsTheJobOutsideACapture) {
  EXPECT_FALSE(CaptureScope::open());
  EXPECT_EXIT(cudaCheck(cudaErrorInvalidValue), testing::ExitedWithCode(3),
              "cnnscale: error: cudaErrorInvalidValue failed at .*test_cuda_check.cpp:[0-9]+.*invalid argument");
  EXPECT_EXIT(cublasCheck(CUBLAS_STATUS_NOT_INITIALIZED), testing::ExitedWithCode(3),
              "cnnscale: error: CUBLAS_STATUS_NOT_INITIALIZED failed");
  cudaCheck(cudaSuccess);  // success passes
}

TEST(CudaCheck, InsideACaptureScopeAFailedCallThrowsWithItsMessage) {
  {
    CaptureScope scope;
    EXPECT_TRUE(CaptureScope::open());
    try {
      cudaCheck(cudaErrorStreamCaptureUnsupported);
      FAIL() << "no exception";
    } catch (const CaptureFailed& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("cudaErrorStreamCaptureUnsupported failed at "), std::string::npos) << m;
      EXPECT_NE(m.find(cudaGetErrorString(cudaErrorStreamCaptureUnsupported)), std::string::npos) << m;
    }
    EXPECT_THROW(cudnnCheck(CUDNN_STATUS_BAD_PARAM), CaptureFailed);
    EXPECT_THROW(cublasCheck(CUBLAS_STATUS_EXECUTION_FAILED), CaptureFailed);
    {
      CaptureScope inner;
      EXPECT_THROW(cudaCheck(cudaErrorInvalidValue), CaptureFailed);
    }
    EXPECT_TRUE(CaptureScope::open()) << "the outer scope is still open";
    cudaCheck(cudaSuccess);
  }
  EXPECT_FALSE(CaptureScope::open());
  try {
    CaptureScope scope;
    throw std::runtime_error("unwinding");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(CaptureScope::open()) << "closed while unwinding";
  EXPECT_EXIT(cudaCheck(cudaErrorInvalidValue), testing::ExitedWithCode(3), "cnnscale: error:");
}
