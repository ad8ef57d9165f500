// On a GPU node: NCCL communicator init on each rank's device and exact allreduce
// (waited for by polling the event and NCCL's asynchronous error); a rank-local error
// (abort(), or an exception unwinding through the communicator and a sum that its
// peer never starts) returns in seconds instead of waiting for the peer.
// broadcast_ranges: the grouped broadcasts of many ranges on the stream (and the pending
// sums' reused events).
// Skips (exit 77) when no CUDA device is visible, or fewer than one per rank.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
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
      ASSERT_EQ(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
      // A pageable H2D cudaMemcpy may return before its DMA lands; NCCL reads on a
      // non-blocking stream that the legacy stream does not order: wait for the copy.
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      comm.allreduce_sum_async(d, count, t)->wait();
      cudaMemcpy(host.data(), d, host.size(), cudaMemcpyDeviceToHost);
      cudaFree(d);
      EXPECT_EQ(count_wrong(host.data(), count, t, comm.size()), 0u) << count << " " << dtype_name(t);
    }
  }
}

namespace {

// Every rank skips or none (a lone skipper would leave the others in NCCL's init).
bool one_gpu_per_rank(int* rank, std::string* why) {
  int n = 0, size = 1;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int min_n = n;
  MPI_Allreduce(&n, &min_n, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (size < 2) *why = "needs 2 ranks";
  else if (min_n < size)
    *why = "needs one GPU per rank (" + std::to_string(size) + " ranks, " + std::to_string(min_n) + " GPU(s))";
  return why->empty();
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// Rank 1 starts a sum that rank 0 never joins, then aborts: destroying the pending sum and
// the communicator waits for nobody (before: cudaEventSynchronize for ever).
TEST(NcclGpu, AbortWaitsForNoPeer) {
  int rank = 0;
  std::string why;
  if (!one_gpu_per_rank(&rank, &why)) GTEST_SKIP() << why;
  void* d = nullptr;
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d, size_t{4} << 20), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  {
    NcclCommunicator comm(MPI_COMM_WORLD, rank);
    std::unique_ptr<PendingReduce> p;
    if (rank == 1) {
      p = comm.allreduce_sum_async(d, size_t{1} << 20, DType::f32);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // surely in flight, waiting for rank 0
    }
    comm.abort();
    EXPECT_TRUE(comm.aborted());
    p.reset();
  }
  EXPECT_LT(since(t0), 20.0) << "abort or teardown waited for the peer";
  cudaFree(d);
  MPI_Barrier(MPI_COMM_WORLD);
}

// The same through an exception: destructors that run while it unwinds abort NCCL
// themselves (no Trainer involved).
TEST(NcclGpu, UnwindingThroughAPendingSumAborts) {
  int rank = 0;
  std::string why;
  if (!one_gpu_per_rank(&rank, &why)) GTEST_SKIP() << why;
  void* d = nullptr;
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d, size_t{4} << 20), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  bool caught = false;
  try {
    NcclCommunicator comm(MPI_COMM_WORLD, rank);
    std::unique_ptr<PendingReduce> p;
    if (rank == 1) p = comm.allreduce_sum_async(d, size_t{1} << 20, DType::f32);  // rank 0 never joins
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    throw std::runtime_error("a rank-local error");
  } catch (const std::runtime_error&) {
    caught = true;
  }
  EXPECT_TRUE(caught);
  EXPECT_LT(since(t0), 20.0) << "the unwinding waited for the peer";
  cudaFree(d);
  MPI_Barrier(MPI_COMM_WORLD);
}

// broadcast_ranges: one grouped NCCL call per root on the communicator's stream; after a
// wait on that stream the ranges hold the root's floats and the rest this rank's own.
// Many reused pending sums before it exercise the communicator's event pool.
TEST(NcclGpu, BroadcastRangesGroupedOnTheStream) {
  int rank = 0;
  std::string why;
  if (!one_gpu_per_rank(&rank, &why)) GTEST_SKIP() << why;
  ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
  NcclCommunicator comm(MPI_COMM_WORLD, rank);
  const size_t n = 1000;
  const std::vector<std::pair<size_t, size_t>> ranges = {{0, 1}, {3, 3}, {5, 17}, {17, 20}, {100, 357}, {900, 1000}};
  auto value = [](int r, size_t i) { return static_cast<float>(r * 100000 + static_cast<int>(i)) + 0.25f; };
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, n * sizeof(float)), cudaSuccess);
  // Pool reuse: more sums than could be in flight at once, several rounds.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<PendingReduce>> sums;
    for (int k = 0; k < 8; ++k) sums.push_back(comm.allreduce_sum_async(d, n, DType::f32));
    for (auto& s : sums) s->wait();
  }
  for (int root : {0, 1}) {
    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = value(comm.rank(), i);
    ASSERT_EQ(cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the copy landed before NCCL's stream reads it
    comm.broadcast_ranges(d, ranges, root);
    comm.synchronize();
    ASSERT_EQ(cudaMemcpy(host.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      bool in = false;
      for (const auto& [b, e] : ranges) in |= i >= b && i < e;
      if (host[i] != value(in ? root : comm.rank(), i)) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "root " << root << " on rank " << comm.rank();
  }
  cudaFree(d);
  MPI_Barrier(MPI_COMM_WORLD);
}
