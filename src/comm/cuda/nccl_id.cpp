// nccl_id.cpp — see nccl_id.hpp.
#include "comm/nccl_id.hpp"

#include <cstdio>

#include "comm/cuda/nccl_check.hpp"

namespace cnnscale {

ncclUniqueId broadcast_nccl_unique_id(MPI_Comm comm) {
  ncclUniqueId id{};
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) ncclCheck(ncclGetUniqueId(&id));
  mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
  return id;
}

const char* nccl_version_string() {
  static char buf[32] = {0};
  if (!buf[0]) {
    int v = 0;
    ncclGetVersion(&v);
    std::snprintf(buf, sizeof(buf), "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
  }
  return buf;
}

}  // namespace cnnscale
