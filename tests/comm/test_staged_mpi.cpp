// test_staged_mpi.cpp — the staged host data plane (comm/staged_communicator.hpp) over MPI
// with the host copier (memcpy for the device side), so that its logic is checked where
// there is no GPU, with copies done at once and deferred (a copy runs only when a mark is
// waited for or the queue synchronised, and new staging memory is NaN: a staging buffer
// read before its copy, or a copy back never enqueued, shows): asynchronous sums of a
// step's buckets (disjoint pieces of one buffer, waited for in order, over three steps:
// staging buffers reused) equal MPI's own sums bitwise, in f32 and bf16, each sum's host
// times known after wait(); a blocking sum; the same device buffer summed at another
// size; rounds of the bucket reducer; a broadcast from rank 1; broadcast_ranges from roots
// 0 and 1, twice without a synchronisation between (floats outside the ranges untouched),
// a whole-buffer broadcast of the same base after it; the contract flags (device buffers,
// a queue, sums not completed on it: the bucket reducer then waits for them on the host,
// not device-ordered).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "comm/bucket_reducer.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/staged_communicator.hpp"

using namespace cnnscale;

namespace {

float value(int rank, size_t i, int step) {
  return static_cast<float>((rank + 1) * 0.37 + static_cast<double>(i % 97) * 1.3e-3 + step * 0.011);
}

std::unique_ptr<Communicator> staged(bool deferred = false) {
  return make_staged_communicator(std::make_unique<MpiCommunicator>(MPI_COMM_WORLD), make_host_copier(deferred));
}

class StagedCopies : public ::testing::TestWithParam<bool> {};  // deferred copies or not
INSTANTIATE_TEST_SUITE_P(HostCopier, StagedCopies, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("Deferred") : std::string("AtOnce"); });

}  // namespace

TEST(StagedHostPlane, ContractFlags) {
  auto comm = staged();
  EXPECT_TRUE(comm->device_buffers());
  EXPECT_NE(comm->stream(), nullptr);
  EXPECT_FALSE(comm->sums_on_stream());
  EXPECT_EQ(comm->backend(), Backend::mpi);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->size(), size);
  std::vector<float> buf(10, 1.f);
  auto reducer = make_allreduce_reducer(*comm, buf.data(), {{0, 4}, {4, 10}});
  EXPECT_FALSE(reducer->device_ordered()) << "the staged plane's sums finish in wait(), on the host";
}

TEST_P(StagedCopies, BucketSumsEqualMpiBitwise) {
  auto comm = staged(GetParam());
  MpiCommunicator mpi(MPI_COMM_WORLD);
  const size_t n = 100003;
  const std::vector<std::pair<size_t, size_t>> buckets = {{0, 1}, {1, 4096}, {4096, 70000}, {70000, n}};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) a[i] = b[i] = value(comm->rank(), i, step);
    std::vector<std::unique_ptr<PendingReduce>> pending;
    for (auto [s, e] : buckets) pending.push_back(comm->allreduce_sum_async(a.data() + s, e - s, DType::f32));
    for (auto& p : pending) {
      p->wait();
      double t0 = 0, t1 = 0;
      EXPECT_TRUE(p->times(&t0, &t1));
      EXPECT_LE(t0, t1);
    }
    comm->synchronize();
    for (auto [s, e] : buckets) mpi.allreduce_sum(b.data() + s, e - s, DType::f32);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "step " << step;
  }
  // bf16 and a blocking sum.
  std::vector<uint16_t> h(1001), g(1001);
  for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] = static_cast<uint16_t>(0x3f80 + (i % 64) + comm->rank());
  comm->allreduce_sum(h.data(), h.size(), DType::bf16);
  comm->synchronize();
  mpi.allreduce_sum(g.data(), g.size(), DType::bf16);
  EXPECT_EQ(h, g);
  // The same device buffer at another size (the allreduce benchmark's sweep).
  for (size_t count : {size_t{10}, size_t{5000}, size_t{10}}) {
    std::vector<float> a(count), b(count);
    for (size_t i = 0; i < count; ++i) a[i] = b[i] = value(comm->rank(), i, 7);
    comm->allreduce_sum(a.data(), count, DType::f32);
    comm->synchronize();
    mpi.allreduce_sum(b.data(), count, DType::f32);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), count * sizeof(float)), 0) << count << " floats";
  }
}

// Rounds of the bucket reducer (the Trainer's gradient path) over the staged plane.
TEST_P(StagedCopies, BucketReducerRounds) {
  auto comm = staged(GetParam());
  MpiCommunicator mpi(MPI_COMM_WORLD);
  const size_t n = 30000;
  std::vector<float> grads(n), want(n);
  auto reducer = make_allreduce_reducer(*comm, grads.data(), {{0, 100}, {100, 20000}, {20000, n}});
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < n; ++i) grads[i] = want[i] = value(comm->rank(), i, step);
    for (size_t b = 3; b-- > 0;) reducer->ready(b);  // backward order: the last bucket first
    reducer->end_round();                              // not device-ordered: waits for every sum
    comm->synchronize();                               // the model's queue after the copy queue
    for (auto [b, e] : {std::pair<size_t, size_t>{0, 100}, {100, 20000}, {20000, n}})  // MPI's own sums, bucket by bucket
      mpi.allreduce_sum(want.data() + b, e - b, DType::f32);
    EXPECT_EQ(std::memcmp(grads.data(), want.data(), n * sizeof(float)), 0) << "step " << step;
  }
}

TEST_P(StagedCopies, Broadcasts) {
  auto comm = staged(GetParam());
  ASSERT_GE(comm->size(), 2);
  const size_t n = 5000;
  std::vector<float> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = value(comm->rank(), i, 0);
  comm->broadcast(buf.data(), n * sizeof(float), 1);
  comm->synchronize();
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += buf[i] != value(1, i, 0);
  EXPECT_EQ(wrong, 0u) << "broadcast from rank 1";
  const std::vector<std::pair<size_t, size_t>> ranges = {{0, 1}, {3, 3}, {5, 17}, {17, 20}, {100, 357}, {4900, n}};
  for (int root : {0, 1}) {
    for (size_t i = 0; i < n; ++i) buf[i] = value(comm->rank(), i, 1);
    comm->broadcast_ranges(buf.data(), ranges, root);
    comm->broadcast_ranges(buf.data(), ranges, root);  // again, no synchronisation between
    comm->synchronize();
    wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      bool in = false;
      for (const auto& [b, e] : ranges) in |= i >= b && i < e;
      wrong += buf[i] != value(in ? root : comm->rank(), i, 1);
    }
    EXPECT_EQ(wrong, 0u) << "broadcast_ranges from root " << root;
  }
  // The whole buffer again, from rank 0 (its own staging, whatever the ranges used).
  for (size_t i = 0; i < n; ++i) buf[i] = value(comm->rank(), i, 2);
  comm->broadcast(buf.data(), n * sizeof(float), 0);
  comm->synchronize();
  wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += buf[i] != value(0, i, 2);
  EXPECT_EQ(wrong, 0u) << "broadcast from rank 0 after the ranges";
}
