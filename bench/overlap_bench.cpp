// overlap_bench.cpp — does a gradient bucket's non-blocking allreduce progress while the
// rank computes without calling MPI (as during conv2's backward)? Per iteration, after a
// barrier: GradSync starts one bucket (mnist_cnn's fc2+fc1 gradients, 4.8 MB by
// default), the rank computes for --compute-ms without MPI calls, then finish() waits:
// the wait is the exposed communication. Compare CNNSCALE_PROGRESS_US=0 (no progress
// thread) with the default. Usage: mpirun -n 2 overlap_bench [--bytes N] [--compute-ms M]
// [--iters K]. Built, never run by tests.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "train/grad_sync.hpp"

using clk = std::chrono::steady_clock;

int main(int argc, char** argv) {
  size_t bytes = 4799528;
  double compute_ms = 20;
  int iters = 30;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() { return std::string(i + 1 < argc ? argv[++i] : "0"); };
    if (a == "--bytes") bytes = std::stoull(next());
    else if (a == "--compute-ms") compute_ms = std::stod(next());
    else if (a == "--iters") iters = std::stoi(next());
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double waited_max = 0;
  std::vector<double> waits;
  {
    cnnscale::MpiCommunicator comm(MPI_COMM_WORLD);
    const size_t n = bytes / sizeof(float);
    std::vector<float> g(n, 1.f), work(1 << 16, 1.f);
    cnnscale::GradSync sync(comm, g.data(), {{0, n}});
    for (int it = 0; it < iters + 3; ++it) {
      MPI_Barrier(MPI_COMM_WORLD);
      sync.on_ready(n);
      const auto t0 = clk::now();
      float acc = 0;
      while (std::chrono::duration<double, std::milli>(clk::now() - t0).count() < compute_ms)
        for (float& w : work) acc += w * 1.0001f;  // compute, no MPI calls
      work[0] = acc * 1e-30f;
      const double w = sync.finish();
      if (it >= 3) waits.push_back(w * 1e3);
    }
    std::sort(waits.begin(), waits.end());
    double med = waits[waits.size() / 2];
    MPI_Reduce(&med, &waited_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("bytes %zu  compute %.1f ms  progress thread %s  exposed wait: median %.3f ms (slowest rank), "
                  "p10 %.3f, p90 %.3f (rank 0)\n",
                  bytes, compute_ms, comm.progress_us() ? (std::to_string(comm.progress_us()) + " us").c_str() : "off",
                  waited_max, waits[waits.size() / 10], waits[waits.size() * 9 / 10]);
  }
  MPI_Finalize();
  return 0;
}
