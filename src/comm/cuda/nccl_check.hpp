// nccl_check.hpp — ncclCheck(call): call NCCL and, on failure, print
// "cnnscale: error: <call> failed at file:line on rank r: <NCCL's error string>" and
// abort the whole job (launch/mpi_check.hpp abort_job). CUDA build only.
#pragma once
#include <nccl.h>

#include "launch/mpi_check.hpp"
#include "util/error.hpp"

namespace cnnscale {

inline void nccl_check(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc != ncclSuccess) abort_job(failed_call_message(call, file, line, ncclGetErrorString(rc)));
}

}  // namespace cnnscale

#define ncclCheck(call) ::cnnscale::nccl_check((call), #call, __FILE__, __LINE__)
