// mpi_check.hpp — mpiCheck(call): call MPI and, on failure, print
// "cnnscale: error: <call> failed at file:line on rank r: <MPI's own error string>",
// then abort the whole job (MPI_Abort) so that no rank is left waiting.
// The CUDA, cuDNN and cuBLAS checks live beside their libraries (util/cuda/check.hpp),
// ncclCheck with the NCCL communicator (comm/cuda/nccl_check.hpp).
#pragma once
#include <mpi.h>

#include <string>

namespace cnnscale {

// Prints "cnnscale: error: <message>"; then MPI_Abort when MPI is active with more than
// one rank, else exit(status). bootstrap makes it util's fatal_error handler.
[[noreturn]] void abort_job(const std::string& message, int status = 3);

void mpi_check(int rc, const char* call, const char* file, int line);

}  // namespace cnnscale

#define mpiCheck(call) ::cnnscale::mpi_check((call), #call, __FILE__, __LINE__)
