// Bucketed gradient sums under mpiexec: buckets start as the ready prefix grows,
// and finish() leaves the exact sum over ranks in every element; so does end_round() on
// a host transport (not device-ordered).
#include <gtest/gtest.h>
#include <mpi.h>

#include "comm/mpi_communicator.hpp"
#include "train/grad_sync.hpp"

using namespace cnnscale;

TEST(GradSync, BucketsSumExactlyAsReadinessGrows) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::vector<size_t> ends{10, 300, 5000, 5003, 70000};
  std::vector<float> g(70000);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i % 13) + comm.rank() + round);
    GradSync sync(comm, g.data(), plan_buckets(ends, 1024, 16384));
    ASSERT_GE(sync.buckets().size(), 3u);
    for (size_t e : ends) sync.on_ready(e);  // as backward would report
    sync.finish();
    const int W = comm.size();
    for (size_t i = 0; i < g.size(); ++i) {
      const float want = static_cast<float>(W * ((i % 13) + round) + W * (W - 1) / 2);
      if (g[i] != want) {
        ADD_FAILURE() << "element " << i << " = " << g[i] << ", want " << want;
        break;
      }
    }
  }
}

// A host transport is not device-ordered: end_round() waits as finish() does (the buffer
// holds the sum when it returns) and complete() has nothing left to wait for; rounds
// follow one another on the same GradSync.
TEST(GradSync, HostTransportEndRoundWaitsLikeFinish) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const std::vector<size_t> ends{10, 300, 5000, 5003, 70000};
  std::vector<float> g(70000);
  GradSync sync(comm, g.data(), plan_buckets(ends, 1024, 16384));
  EXPECT_FALSE(sync.device_ordered());
  const int W = comm.size();
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i % 7) + comm.rank() + round);
    sync.on_ready(ends[1]);  // some buckets start during "backward"
    EXPECT_GE(sync.end_round(), 0.0);
    for (size_t i = 0; i < g.size(); ++i) {
      const float want = static_cast<float>(W * ((i % 7) + round) + W * (W - 1) / 2);
      if (g[i] != want) {
        ADD_FAILURE() << "round " << round << " element " << i << " = " << g[i] << ", want " << want;
        break;
      }
    }
    EXPECT_EQ(sync.complete() >= 0.0, true);
    EXPECT_EQ(sync.last_spans().size(), sync.buckets().size());
  }
}
