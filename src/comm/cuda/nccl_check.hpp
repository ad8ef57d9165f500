// nccl_check.hpp — ncclCheck(call): call NCCL and, on failure, print
// "cnnscale: error: <call> failed at file:line on rank r: <NCCL's error string>" and
// abort the whole job (launch/mpi_check.hpp abort_job).
// ncclCheckAsync(comm, what): NCCL's asynchronous error on comm (ncclCommGetAsyncError:
// a peer or the network failed while a collective ran on the device, which no call's
// return value reports); on one, the communicator is aborted (ncclCommAbort: no wait)
// and the job ends with "<what> failed ...: <NCCL's error string> (<ncclGetLastError>)".
// A wait for NCCL's work polls it (comm/cuda/nccl_communicator.cpp). CUDA build only.
#pragma once
#include <nccl.h>

#include <string>

#include "launch/mpi_check.hpp"
#include "util/error.hpp"

namespace cnnscale {

inline void nccl_check(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc != ncclSuccess) abort_job(failed_call_message(call, file, line, ncclGetErrorString(rc)));
}

// The text for an NCCL failure on comm: the result's string and, when NCCL kept one, its
// last error message (which names the peer, the transport, the system call).
inline std::string nccl_error_text(ncclResult_t rc, ncclComm_t comm) {
  std::string text = ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += std::string(" (") + last + ")";
  return text;
}

inline void nccl_check_async(ncclComm_t comm, const char* what, const char* file, int line) {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = ncclCommGetAsyncError(comm, &async);
  if (rc != ncclSuccess) async = rc;
  if (async == ncclSuccess || async == ncclInProgress) return;
  const std::string text = nccl_error_text(async, comm);
  ncclCommAbort(comm);  // the device work stops; nothing waits for the peers any more
  // comm is freed now and its owner (NcclCommunicator) does not know: this relies on
  // abort_job not returning (MPI_Abort / exit; no destructor runs on the handle).
  abort_job(failed_call_message(what, file, line, text.c_str()));
}

}  // namespace cnnscale

#define ncclCheck(call) ::cnnscale::nccl_check((call), #call, __FILE__, __LINE__)
#define ncclCheckAsync(comm, what) ::cnnscale::nccl_check_async((comm), (what), __FILE__, __LINE__)
