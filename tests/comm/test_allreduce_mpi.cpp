// MPI communicator under mpiexec: exact float and bfloat16 sums for awkward counts,
// blocking and non-blocking, and broadcast.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <thread>
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

// The progress thread carries a sum to completion while the caller makes no MPI call
// (backward's compute), and times() reports when: before the caller reached wait().
TEST(MpiAllreduce, ProgressThreadCompletesSumWithoutCallerAndTimesIt) {
  setenv("CNNSCALE_PROGRESS_POLLS", "0", 1);  // poll until complete, however long
  MpiCommunicator comm(MPI_COMM_WORLD);
  unsetenv("CNNSCALE_PROGRESS_POLLS");
  if (comm.progress_us() <= 0) GTEST_SKIP() << "no progress thread (MPI_THREAD_MULTIPLE not provided)";
  std::vector<float> b((size_t{1} << 20) + 5);  // 4 MB: past every eager limit
  fill_pattern(b.data(), b.size(), DType::f32, comm.rank());
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  const double before = now();
  auto p = comm.allreduce_sum_async(b.data(), b.size(), DType::f32);
  double started = 0, completed = 0;
  EXPECT_FALSE(p->times(&started, &completed));          // not before wait()
  std::this_thread::sleep_for(std::chrono::seconds(2));  // "compute": no MPI call on this thread
  const double wait_called = now();
  p->wait();
  ASSERT_TRUE(p->times(&started, &completed));
  EXPECT_GE(started, before);
  EXPECT_GT(completed, started);
  EXPECT_LT(completed, wait_called);  // seen complete by the progress thread, not by wait()
  EXPECT_EQ(count_wrong(b.data(), b.size(), DType::f32, comm.size()), 0u);
}

// The training thread's progress() (called between backward layers) and the progress
// thread poll the same sums at once, many times: each must test its own snapshot of the
// sums in flight (CI once crashed in MPI_Request_get_status when they shared one).
TEST(MpiAllreduce, CallerAndProgressThreadPollTogether) {
  setenv("CNNSCALE_PROGRESS_US", "1", 1);     // the thread polls as often as it can
  setenv("CNNSCALE_PROGRESS_POLLS", "0", 1);  // and until every sum is complete
  size_t wrong = 0;
  bool threaded = true;
  // A fresh communicator each round: its list of sums in flight grows from empty (the
  // first steps of a run), which is when a shared snapshot would be reallocated under
  // the other thread.
  for (int round = 0; round < 150 && threaded; ++round) {
    MpiCommunicator comm(MPI_COMM_WORLD);
    threaded = comm.progress_us() > 0;
    std::vector<std::vector<float>> bufs(24, std::vector<float>(size_t{1} << 12));
    std::vector<std::unique_ptr<PendingReduce>> pend;
    for (auto& b : bufs) {
      fill_pattern(b.data(), b.size(), DType::f32, comm.rank());
      pend.push_back(comm.allreduce_sum_async(b.data(), b.size(), DType::f32));
      for (int k = 0; k < 4; ++k) comm.progress();
    }
    for (auto& p : pend) p->wait();
    for (auto& b : bufs) wrong += count_wrong(b.data(), b.size(), DType::f32, comm.size());
  }
  unsetenv("CNNSCALE_PROGRESS_US");
  unsetenv("CNNSCALE_PROGRESS_POLLS");
  if (!threaded) GTEST_SKIP() << "no progress thread (MPI_THREAD_MULTIPLE not provided)";
  EXPECT_EQ(wrong, 0u);
}

TEST(MpiAllreduce, BroadcastFromRoot) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  std::vector<int> v(100, comm.rank() == 0 ? 42 : -1);
  comm.broadcast(v.data(), v.size() * sizeof(int), 0);
  for (int x : v) EXPECT_EQ(x, 42);
}
