// NCCL bootstrap without a GPU: rank 0's ncclUniqueId reaches every rank intact.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "comm/cuda/nccl_id.hpp"

using namespace cnnscale;

TEST(NcclId, EveryRankHoldsRankZerosBytes) {
  ncclUniqueId id = broadcast_nccl_unique_id(MPI_COMM_WORLD);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<char> all(sizeof(id) * static_cast<size_t>(size));
  MPI_Allgather(&id, sizeof(id), MPI_BYTE, all.data(), sizeof(id), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r)
    EXPECT_EQ(std::memcmp(all.data() + r * sizeof(id), &id, sizeof(id)), 0) << "rank " << r << " differs";
  // The id is not all zeros (ncclGetUniqueId filled it).
  ncclUniqueId zero{};
  EXPECT_NE(std::memcmp(&id, &zero, sizeof(id)), 0);
  // A second id is different: ids are unique per call, not a constant.
  ncclUniqueId id2 = broadcast_nccl_unique_id(MPI_COMM_WORLD);
  EXPECT_NE(std::memcmp(&id, &id2, sizeof(id)), 0);
}
