// On a GPU node: NCCL communicator init on each rank's device and exact allreduce.
// Skips (exit 77) when no CUDA device is visible.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/allreduce_check.hpp"
#include "comm/cuda/nccl_communicator.hpp"

using namespace cnnscale;

TEST(NcclGpu, InitAndExactAllreduce) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device visible";
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (n < size) GTEST_SKIP() << "needs one GPU per rank (" << size << " ranks, " << n << " GPU(s))";
  NcclCommunicator comm(MPI_COMM_WORLD, rank);
  for (DType t : {DType::f32, DType::bf16}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1023}, (size_t{1} << 20) + 3}) {
      std::vector<char> host(count * dtype_size(t));
      fill_pattern(host.data(), count, t, comm.rank());
      void* d = nullptr;
      ASSERT_EQ(cudaMalloc(&d, host.size()), cudaSuccess);
      cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice);
      comm.allreduce_sum_async(d, count, t)->wait();
      cudaMemcpy(host.data(), d, host.size(), cudaMemcpyDeviceToHost);
      cudaFree(d);
      EXPECT_EQ(count_wrong(host.data(), count, t, comm.size()), 0u) << count << " " << dtype_name(t);
    }
  }
}
