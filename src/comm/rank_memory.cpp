// rank_memory.cpp — see rank_memory.hpp.
#include "comm/rank_memory.hpp"

#include <unistd.h>

#include <cstdio>

#include "launch/mpi_check.hpp"
#include "util/error.hpp"
#include "util/memory.hpp"

namespace cnnscale {

void check_memory_on_all_ranks(MPI_Comm comm, const std::string& what, uint64_t bytes, const std::string& hint) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const MemoryLimit lim = memory_limit();
  struct {
    double available;
    int rank;
  } mine{static_cast<double>(lim.bytes), rank}, least{0, 0};
  mpiCheck(MPI_Allreduce(&mine, &least, 1, MPI_DOUBLE_INT, MPI_MINLOC, comm));
  if (least.available >= static_cast<double>(bytes)) return;
  char message[1024] = {0};
  if (rank == least.rank) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    const std::string where = size > 1 ? " on rank " + std::to_string(rank) + " (" + host + ")" : "";
    std::snprintf(message, sizeof(message), "%s", out_of_memory_message(what + where, bytes, hint).c_str());
  }
  mpiCheck(MPI_Bcast(message, sizeof(message), MPI_CHAR, least.rank, comm));
  fail_collective(rank, message);
}

}  // namespace cnnscale
