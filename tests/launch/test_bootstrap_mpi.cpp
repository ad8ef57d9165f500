// Under mpiexec: the bootstrap's view of the launch agrees with MPI's.
#include <gtest/gtest.h>
#include <mpi.h>

#include "launch/bootstrap.hpp"
#include "launch/device_binding.hpp"

using namespace cnnscale;

TEST(BootstrapMpi, AgreesWithMpi) {
  BootstrapOptions o;
  ProcessContext ctx = bootstrap(o);
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(ctx.rank, rank);
  EXPECT_EQ(ctx.size, size);
  EXPECT_EQ(ctx.launch.rank, rank);
  EXPECT_EQ(ctx.launch.size, size);
  EXPECT_EQ(ctx.launch.kind, LauncherKind::pmix);  // Open MPI's mpiexec serves PMIx
  EXPECT_EQ(ctx.num_nodes, 1);
  EXPECT_EQ(ctx.node_id, 0);
  EXPECT_EQ(ctx.local_size, size);
  EXPECT_EQ(ctx.local_rank, rank);
  EXPECT_EQ(ctx.launch.local_rank, rank);
  EXPECT_EQ(ctx.launch.local_size, size);
  if (query_visible_devices().ids.empty()) {
    EXPECT_EQ(ctx.device, -1);
    EXPECT_EQ(ctx.device_id, "");
    EXPECT_NE(ctx.gpu_problem, "");  // why: CUDA's error, or a build without CUDA
  } else {
    EXPECT_GE(ctx.device, 0);
    EXPECT_NE(ctx.device_id, "");
    EXPECT_EQ(ctx.gpu_problem, "");
  }
}

TEST(BootstrapMpi, DeviceViewsReachEveryRankAndBindByUuid) {
  // Made-up views as under srun --gpus-per-task=1 (each rank: its own GPU as ordinal 0),
  // rank 1 with none, rank 2 with two: exchanged over the world, then bound on each rank.
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  VisibleDevices mine;
  if (rank != 1) mine.ids.push_back("GPU-" + std::to_string(rank));
  if (rank == 2) mine.ids.push_back("GPU-extra");
  const std::vector<VisibleDevices> all = gather_views(mine, MPI_COMM_WORLD);
  ASSERT_EQ(all.size(), static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> want;
    if (r != 1) want.push_back("GPU-" + std::to_string(r));
    if (r == 2) want.push_back("GPU-extra");
    EXPECT_EQ(all[static_cast<size_t>(r)].ids, want) << "rank " << r;
  }
  const DeviceChoice c = choose_device(all, rank, "h");
  EXPECT_EQ(c.device, rank == 1 ? -1 : 0);
}
