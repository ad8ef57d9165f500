// allreduce_bench.hpp — the collective benchmark behind `cnnscale allreduce`,
// after nccl-tests' all_reduce_perf: a size sweep, warm-up, timed iterations, and
// an exact correctness check per size. busbw = algbw * 2(n-1)/n.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/control_comm.hpp"

namespace cnnscale {

struct AllreduceBenchOptions {
  size_t min_bytes = 8, max_bytes = 128u << 20;
  double factor = 2;
  int warmup = 5, iters = 20;
  bool check = true;
  DType dtype = DType::f32;
};

struct AllreduceResult {
  size_t bytes = 0, count = 0;
  double time_us = 0;      // mean per iteration, max over ranks
  double algbw_gbs = 0, busbw_gbs = 0;
  long wrong = -1;         // -1 when not checked
};

// The sizes of the sweep (each a multiple of the element size, at least one element).
std::vector<size_t> sweep_sizes(const AllreduceBenchOptions& o);

// Runs one size on every rank (collective). Results are valid on every rank.
// control: where the ranks agree on the slowest time and the wrong count (the gloo
// backend has no MPI world); null: MPI_COMM_WORLD.
AllreduceResult run_allreduce_size(Communicator& comm, size_t bytes, const AllreduceBenchOptions& o,
                                   ControlComm* control = nullptr);

double bus_factor(int world);  // 2(n-1)/n

// Parses "8", "64K", "128M", "1G" (powers of 1024); throws UserError naming the option.
size_t parse_size(const std::string& option, const std::string& text);

}  // namespace cnnscale
