// test_gpu_test_main.cpp — the GPU test main's guard (tests/common/gpu_test_guard.hpp)
// without a GPU: a failed cudaCheck / cudnnCheck / cublasCheck throws GpuTestFatal with
// fatal_error's message, so in a GPU test binary it fails that case and the next case
// still runs (before: the binary ended with exit 3 at the first error, H100 run of
// 2026-11-27); a check that fails while an exception unwinds ends the binary with the
// message and status 3, never std::terminate; the context check resets nothing after an
// error that left the device usable. The failing checks need no device: a literal error
// code through the macros, and cuDNN refusing a tensor descriptor with a negative batch
// (CUDNN_STATUS_BAD_PARAM with or without a GPU). The "fails, next runs" cases are
// GpuGuardDemo.DISABLED_*: this binary runs itself on them (--gtest_also_run_disabled_tests)
// and reads the child's output. Built with the GPU main, in CUDA builds; label unit.
// Against the previous main (no handler) GpuGuard.* fail: the parent's direct checks end
// the process, the child ends at its first case (exit 3) and its third never runs.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

#include "common/gpu_test_guard.hpp"
#include "util/cuda/check.hpp"

using cnnscale::test::GpuTestFatal;

namespace {

// cuDNN's own refusal, from a real call: a descriptor with batch -1.
cudnnStatus_t negative_batch_descriptor() {
  cudnnTensorDescriptor_t d = nullptr;
  cudnnStatus_t rc = cudnnCreateTensorDescriptor(&d);
  if (rc != CUDNN_STATUS_SUCCESS) return rc;
  rc = cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, -1, 2, 3, 4);
  cudnnDestroyTensorDescriptor(d);
  return rc;
}

struct Child {
  int status = -1;  // exit status, or 128 + signal
  std::string out;  // stdout and stderr
};

// This test binary on `filter`, disabled cases included.
Child run_self(const std::string& filter) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd = "env -u GTEST_OUTPUT '" + self + "' --gtest_also_run_disabled_tests --gtest_color=no '--gtest_filter=" +
                          filter + "' 2>&1";
  Child c;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return c;
  std::array<char, 4096> buf{};
  size_t got = 0;
  while ((got = fread(buf.data(), 1, buf.size(), p)) > 0) c.out.append(buf.data(), got);
  const int w = pclose(p);
  c.status = WIFEXITED(w) ? WEXITSTATUS(w) : WIFSIGNALED(w) ? 128 + WTERMSIG(w) : -1;
  return c;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A check in a destructor that runs while a GpuTestFatal unwinds.
struct ChecksWhileUnwinding {
  ~ChecksWhileUnwinding() {
    if (std::uncaught_exceptions() > 0) cudaCheck(cudaErrorMemoryAllocation);
  }
};

}  // namespace

// ---- run only by the child processes of GpuGuard.* ----

TEST(GpuGuardDemo, DISABLED_A_CudnnCheckFails) {
  cudnnCheck(negative_batch_descriptor());
  ADD_FAILURE() << "cudnnCheck returned after a failed call";
}

TEST(GpuGuardDemo, DISABLED_B_CudaAndCublasChecksFail) {
  EXPECT_THROW(cublasCheck(CUBLAS_STATUS_INVALID_VALUE), GpuTestFatal);
  cudaCheck(cudaErrorInvalidValue);
  ADD_FAILURE() << "cudaCheck returned after a failed call";
}

TEST(GpuGuardDemo, DISABLED_C_NextCaseRuns) { SUCCEED(); }

TEST(GpuGuardDemo, DISABLED_D_ErrorWhileUnwinding) {
  ChecksWhileUnwinding c;
  cudaCheck(cudaErrorInvalidValue);
}

// ---- the tests ----

TEST(GpuGuard, ChecksThrowTheFatalErrorMessage) {
  try {
    cudnnCheck(negative_batch_descriptor());
    ADD_FAILURE() << "no exception";
  } catch (const GpuTestFatal& e) {
    EXPECT_TRUE(has(e.what(), "negative_batch_descriptor() failed at ")) << e.what();
    EXPECT_TRUE(has(e.what(), "CUDNN_STATUS_BAD_PARAM")) << e.what();
    EXPECT_EQ(e.status(), 3);
  }
  try {
    cudaCheck(cudaErrorInvalidValue);
    ADD_FAILURE() << "no exception";
  } catch (const GpuTestFatal& e) {
    EXPECT_TRUE(has(e.what(), "cudaErrorInvalidValue failed at ")) << e.what();
    EXPECT_TRUE(has(e.what(), cudaGetErrorString(cudaErrorInvalidValue))) << e.what();
  }
  EXPECT_THROW(cublasCheck(CUBLAS_STATUS_INVALID_VALUE), GpuTestFatal);
}

// A long call text keeps the library's error string (the H100 log ended in "CUDNN_STATUS_E").
TEST(GpuGuard, LongCallTextKeepsTheLibrarysError) {
  const std::string call(2000, 'x');
  const std::string m = cnnscale::failed_call_message(call.c_str(), "layer.cpp", 91, "CUDNN_STATUS_EXECUTION_FAILED");
  EXPECT_TRUE(has(m, "layer.cpp:91")) << m.substr(call.size());
  EXPECT_TRUE(has(m, ": CUDNN_STATUS_EXECUTION_FAILED")) << m.substr(call.size());
}

TEST(GpuGuard, AFailedCheckFailsItsCaseAndTheNextCasesRun) {
  const Child c = run_self("GpuGuardDemo.DISABLED_A_*:GpuGuardDemo.DISABLED_B_*:GpuGuardDemo.DISABLED_C_*");
  EXPECT_EQ(c.status, 1) << "1: cases failed; 3: fatal_error ended the binary\n" << c.out;
  EXPECT_TRUE(has(c.out, "[  FAILED  ] GpuGuardDemo.DISABLED_A_CudnnCheckFails")) << c.out;
  EXPECT_TRUE(has(c.out, "CUDNN_STATUS_BAD_PARAM")) << "the message reaches the case's failure\n" << c.out;
  EXPECT_TRUE(has(c.out, "[  FAILED  ] GpuGuardDemo.DISABLED_B_CudaAndCublasChecksFail")) << c.out;
  EXPECT_TRUE(has(c.out, "[       OK ] GpuGuardDemo.DISABLED_C_NextCaseRuns")) << c.out;
  EXPECT_TRUE(has(c.out, "2 FAILED TESTS")) << c.out;
  EXPECT_FALSE(has(c.out, "returned after a failed call")) << c.out;
  // Host-side parameter errors leave the context usable (and without a GPU there is none).
  EXPECT_FALSE(has(c.out, "cudaDeviceReset")) << c.out;
}

TEST(GpuGuard, AFailedCheckWhileUnwindingEndsTheBinaryWithItsMessage) {
  const Child c = run_self("GpuGuardDemo.DISABLED_D_*");
  EXPECT_EQ(c.status, 3) << c.out;
  EXPECT_TRUE(has(c.out, "[ RUN      ] GpuGuardDemo.DISABLED_D_ErrorWhileUnwinding")) << c.out;
  EXPECT_TRUE(has(c.out, "cnnscale: error: cudaErrorMemoryAllocation failed at ")) << c.out;
  EXPECT_TRUE(has(c.out, "while another exception was unwinding")) << c.out;
  EXPECT_FALSE(has(c.out, "terminate called")) << c.out;
}
