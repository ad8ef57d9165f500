// test_broadcast_ranges_mpi.cpp — Communicator::broadcast_ranges on the host
// communicators (MPI, and Gloo joined through a rendezvous store on loopback): uneven
// ranges (one float, empty, adjacent, up to the end of the buffer) receive the root's
// values for root 0 and 1, and every float outside the ranges keeps this rank's own value.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/gloo_communicator.hpp"
#include "comm/mpi_communicator.hpp"
#include "common/free_port.hpp"
#include "launch/rendezvous_store.hpp"

using namespace cnnscale;
using cnnscale::test::free_port;

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

// rank r's value at float i (distinct on every rank and position).
float value(int rank, size_t i) { return static_cast<float>(rank * 100000 + static_cast<int>(i)) + 0.25f; }

void check_ranges(Communicator& comm) {
  const size_t n = 1000;
  const Ranges ranges = {{0, 1}, {3, 3}, {5, 17}, {17, 20}, {100, 357}, {900, 1000}};
  for (int root : {0, 1}) {
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = value(comm.rank(), i);
    comm.broadcast_ranges(buf.data(), ranges, root);
    comm.synchronize();
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      bool in = false;
      for (const auto& [b, e] : ranges) in |= i >= b && i < e;
      const float want = value(in ? root : comm.rank(), i);
      if (buf[i] != want) ++wrong;
    }
    EXPECT_EQ(wrong, 0u) << "root " << root << " on rank " << comm.rank();
  }
  // No ranges at all: nothing to send, nothing touched.
  std::vector<float> buf(4, 1.5f);
  comm.broadcast_ranges(buf.data(), {}, 0);
  EXPECT_EQ(buf, std::vector<float>(4, 1.5f));
}

}  // namespace

TEST(BroadcastRanges, Mpi) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  ASSERT_GE(comm.size(), 2);
  check_ranges(comm);
}

TEST(BroadcastRanges, Gloo) {
  int rank = 0, size = 1, port = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ASSERT_GE(size, 2);
  if (rank == 0) port = free_port();
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  RendezvousStore store("127.0.0.1", port, rank == 0, 30, "test");
  auto comm = make_gloo_communicator(make_gloo_context(store, "data/", rank, size, 30), 30);
  ASSERT_EQ(comm->backend(), Backend::gloo);
  check_ranges(*comm);
  comm->barrier();
}
