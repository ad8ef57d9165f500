// test_large_count_mpi.cpp — a broadcast of more than INT_MAX bytes through the MPI
// communicator (the parameter broadcast of a model with more than 537 M parameters,
// e.g. a 785 M-parameter spec): it must arrive intact, not abort with "more than
// INT_MAX elements". Needs about 2.1 GiB per rank; SKIPs (all ranks alike) without it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"

using namespace cnnscale;

namespace {

// MemAvailable of this node in bytes (0 when unknown).
double mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    in.ignore(64, '\n');
  }
  return 0;
}

}  // namespace

TEST(MpiLargeCount, BroadcastBeyondIntMaxBytes) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const size_t bytes = size_t{INT_MAX} + 4096 + 7;
  // Every rank of this node holds one buffer; all ranks must agree on skipping.
  int local_size = 1;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  int enough = mem_available() > 1.25 * static_cast<double>(bytes) * local_size ? 1 : 0, all = 0;
  MPI_Allreduce(&enough, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) GTEST_SKIP() << "needs " << local_size << " x 2.1 GiB of available memory on a node";

  std::vector<unsigned char> buf(bytes, 0);
  auto value = [](size_t i) { return static_cast<unsigned char>((i * 2654435761u) >> 13); };
  // Marker bytes around the INT_MAX boundary and at both ends, a stride everywhere.
  std::vector<size_t> probes = {0, 1, size_t{INT_MAX} - 1, size_t{INT_MAX}, size_t{INT_MAX} + 1, bytes - 1};
  for (size_t i = 12345; i < bytes; i += (size_t{1} << 20) + 17) probes.push_back(i);
  if (comm.rank() == 0)
    for (size_t i : probes) buf[i] = value(i) | 1;  // never 0, so a missing byte shows
  comm.broadcast(buf.data(), bytes, 0);
  size_t wrong = 0;
  for (size_t i : probes) wrong += buf[i] != (value(i) | 1);
  EXPECT_EQ(wrong, 0u) << "of " << probes.size() << " probed bytes";
}
