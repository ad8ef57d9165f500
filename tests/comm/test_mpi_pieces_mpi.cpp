// test_mpi_pieces_mpi.cpp — MpiCommunicator splits buffers into pieces of at most
// max_piece elements (INT_MAX in use; lowered here so that the split runs on small
// buffers): sums (blocking and non-blocking, float and bfloat16) and broadcasts stay
// exact across piece boundaries, including a last piece of one element.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/sum_check.hpp"

using namespace cnnscale;

TEST(MpiPieces, SumsExactAcrossPieces) {
  MpiCommunicator comm(MPI_COMM_WORLD, /*max_piece=*/1000);
  for (DType t : {DType::f32, DType::bf16})
    for (size_t count : {size_t{999}, size_t{1000}, size_t{1001}, size_t{4321}})
      for (bool async : {false, true}) check_sum(comm, count, t, async);
}

TEST(MpiPieces, BroadcastAcrossPieces) {
  MpiCommunicator comm(MPI_COMM_WORLD, /*max_piece=*/64);
  std::vector<unsigned char> buf(64 * 5 + 1, 0);
  if (comm.rank() == 0) std::iota(buf.begin(), buf.end(), static_cast<unsigned char>(1));
  comm.broadcast(buf.data(), buf.size(), 0);
  std::vector<unsigned char> want(buf.size());
  std::iota(want.begin(), want.end(), static_cast<unsigned char>(1));
  EXPECT_EQ(buf, want);
}
