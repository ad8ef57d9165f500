// gpu_test_guard.hpp — what the single-process GPU test main (gpu_gtest_main.cpp) does
// so that a GPU error fails one test case instead of ending the test binary.
//
// Why: on the H100 run of 2026-11-27 test_cuda_model_gpu ended (exit 3) at the first
// cuDNN error, in CudaBf16.LayersAndModelsCloseToCpuFp32: cudaCheck / cudnnCheck /
// cublasCheck (util/cuda/check.hpp) call util/error.hpp's fatal_error, which prints and
// exits, so none of the later CudaBf16 cases ran and their results were lost.
//
// - gpu_test_fatal (installed with set_fatal_error_handler) throws GpuTestFatal carrying
//   fatal_error's message; GoogleTest catches it and fails the running case ("C++
//   exception with description "<call> failed at <file>:<line> ...""), then runs the
//   next. Called while an exception is already unwinding (a check in a destructor, which
//   the library's destructors avoid), a throw would reach std::terminate: it prints the
//   message as fatal_error would and ends the process with fatal_error's status instead.
//   A check that fails on a thread of the test's own making must be caught on that thread
//   (an exception leaving a std::thread's function terminates the process).
// - CudaContextCheck (a GoogleTest listener): after every case that ran, on a machine with
//   a device, synchronises the device. A pending error that cudaGetLastError clears
//   (not sticky) is cleared and named; one that the next synchronisation still returns
//   (sticky: cudaErrorIllegalAddress, a launch failure, ...: the context is unusable) is
//   named and the device reset with cudaDeviceReset, so that the next cases run on a
//   fresh context; if the device still fails after the reset it says that the remaining
//   cases will fail on it (CUDA documents that some sticky errors need a new process).
//
// Multi-rank GPU tests (mpi_gtest_main.cpp) keep fatal_error's default: a rank that
// carried on after a failed call would leave its peers waiting in NCCL.
// Not yet run on a GPU (the machines it was written on have none): tested there by
// tests/nn/test_gpu_test_main.cpp (label unit), whose failing checks need no device.
#pragma once
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace cnnscale::test {

// fatal_error's message and exit status, thrown instead of ending the process.
class GpuTestFatal : public std::runtime_error {
 public:
  GpuTestFatal(const std::string& message, int status) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// The fatal-error handler of the GPU test main (util/error.hpp FatalErrorHandler).
[[noreturn]] void gpu_test_fatal(const std::string& message, int status);

// Synchronises the device after each case that ran; clears a pending error, resets the
// device after a sticky one (see the header comment). Prints what it did, one line each.
class CudaContextCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override;
};

// Both of the above: the handler set, the listener appended. Call after InitGoogleTest.
void install_gpu_test_guard();

}  // namespace cnnscale::test
