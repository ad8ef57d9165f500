// mpi_check.cpp — see mpi_check.hpp.
#include "launch/mpi_check.hpp"

#include <cstdlib>

#include "launch/bootstrap.hpp"
#include "util/error.hpp"

namespace cnnscale {

void abort_job(const std::string& message, int status) {
  say_last_words(message);  // rank 0's run directory records how the run ended (train/run_end.hpp)
  print_error(message);
  if (mpi_active()) {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, status);
  }
  std::exit(status);
}

void mpi_check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  abort_job(failed_call_message(call, file, line, msg));
}

}  // namespace cnnscale
