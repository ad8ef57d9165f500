// sum_check.hpp — one exactness check of a communicator's sum for the MPI tests: fill
// the nccl-tests pattern, sum (blocking, or non-blocking with one progress call), and
// expect every element to equal the exact sum over ranks.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "comm/allreduce_check.hpp"
#include "comm/communicator.hpp"

namespace cnnscale {

inline void check_sum(Communicator& comm, size_t count, DType t, bool async) {
  std::vector<char> buf(count * dtype_size(t));
  fill_pattern(buf.data(), count, t, comm.rank());
  if (async) {
    auto pending = comm.allreduce_sum_async(buf.data(), count, t);
    comm.progress();
    pending->wait();
  } else {
    comm.allreduce_sum(buf.data(), count, t);
  }
  EXPECT_EQ(count_wrong(buf.data(), count, t, comm.size()), 0u)
      << "count " << count << " type " << dtype_name(t) << (async ? " async" : "");
}

}  // namespace cnnscale
