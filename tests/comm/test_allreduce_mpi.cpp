// MPI communicator under mpiexec: exact float and bfloat16 sums for awkward counts,
// blocking and non-blocking, and broadcast.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/sum_check.hpp"

using namespace cnnscale;

namespace {
const size_t kCounts[] = {1, 7, 1023, (1u << 20) + 3, 1u << 24};
}  // namespace

TEST(MpiAllreduce, FloatSumsExact) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (size_t n : kCounts) check_sum(comm, n, DType::f32, false);
}

TEST(MpiAllreduce, Bfloat16SumsExact) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (size_t n : kCounts) check_sum(comm, n, DType::bf16, false);
}

TEST(MpiAllreduce, AsyncSumsExact) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  for (size_t n : {size_t{7}, size_t{1023}, (size_t{1} << 20) + 3}) {
    check_sum(comm, n, DType::f32, true);
    check_sum(comm, n, DType::bf16, true);
  }
}

TEST(MpiAllreduce, SeveralInFlightCompleteInAnyWaitOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<std::vector<float>> bufs(3, std::vector<float>(4099));
  std::vector<std::unique_ptr<PendingReduce>> pend;
  for (auto& b : bufs) {
    fill_pattern(b.data(), b.size(), DType::f32, comm.rank());
    pend.push_back(comm.allreduce_sum_async(b.data(), b.size(), DType::f32));
  }
  pend[2]->wait();
  pend[0]->wait();
  pend[1]->wait();
  for (auto& b : bufs) EXPECT_EQ(count_wrong(b.data(), b.size(), DType::f32, comm.size()), 0u);
}

TEST(MpiAllreduce, BroadcastFromRoot) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<int> v(100, comm.rank() == 0 ? 42 : -1);
  comm.broadcast(v.data(), v.size() * sizeof(int), 0);
  for (int x : v) EXPECT_EQ(x, 42);
}
