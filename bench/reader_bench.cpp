// reader_bench.cpp — throughput of the sharded HDF5 reader (src/data): samples/s per
// rank when the consumer only takes batches, and the fraction of a (simulated) step
// spent waiting for data when each step also computes for --compute-ms.
//   mpirun -n 2 build/bin/reader_bench --data DIR [--batch 64] [--steps 400]
//          [--prefetch 2] [--cache none|memory] [--compute-ms 0] [--synthetic] [--augment LIST]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "data/open_source.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  DataOptions o;
  int64_t steps = 400;
  double compute_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--data") o.dir = val();
    else if (a == "--batch") o.batch_per_rank = std::atoll(val().c_str());
    else if (a == "--steps") steps = std::atoll(val().c_str());
    else if (a == "--prefetch") o.prefetch = std::atoi(val().c_str());
    else if (a == "--cache") o.cache = val();
    else if (a == "--compute-ms") compute_ms = std::atof(val().c_str());
    else if (a == "--synthetic") o.synthetic = true;
    else if (a == "--augment") o.augment = val();
    else {
      if (rank == 0) std::fprintf(stderr, "reader_bench: unknown argument %s\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  try {
    auto src = open_data(o, rank, world).train;
    Batch b;
    src->next(b);  // warm-up: thread start, file opens
    src->take_wait_seconds();
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) {
      src->next(b);
      if (compute_ms > 0) {  // stand-in for forward/backward: spin, as compute would
        const auto until = Clock::now() + std::chrono::duration<double, std::milli>(compute_ms);
        while (Clock::now() < until) {
        }
      }
    }
    const double total = std::chrono::duration<double>(Clock::now() - t0).count();
    const double wait = src->take_wait_seconds();
    double mine[3] = {steps * o.batch_per_rank / total, wait / total, total}, lo[3], hi[3];
    MPI_Reduce(mine, lo, 3, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, hi, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("reader_bench: %d rank(s), batch %lld/rank, %lld steps, prefetch %d, cache %s, compute %.1f ms: "
                  "%.0f..%.0f samples/s per rank, data wait %.2f..%.2f%% of step time\n",
                  world, static_cast<long long>(o.batch_per_rank), static_cast<long long>(steps), o.prefetch,
                  o.cache.c_str(), compute_ms, lo[0], hi[0], 100 * lo[1],
                  100 * hi[1]);
  } catch (const UserError& e) {
    std::fprintf(stderr, "cnnscale: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
