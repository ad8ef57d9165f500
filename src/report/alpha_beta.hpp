// alpha_beta.hpp — the α–β cost model of ring allreduce and its two fits.
//
//   T_ring(p, n bytes) = 2(p-1)/p · n/β + 2(p-1)·α
//
// α is the per-message latency, β the per-link bandwidth. fit_alpha_beta_benchmark()
// fits α, β to the rows of `cnnscale allreduce --json` (time vs size at one world size);
// fit_alpha_kappa_runs() fits α and κ = bytes/β to the exposed communication time that
// training runs measured at several rank counts. Times are in milliseconds, sizes in
// bytes, β in bytes per millisecond (1 GB/s = 1e6 B/ms).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace cnnscale::report {

// The one place the ring's cost is written: T = latency·α + bandwidth·κ, with
// latency = 2(p-1) message steps and bandwidth = 2(p-1)/p (the share of the bytes each
// rank sends); both 0 for p ≤ 1. p may be fractional (the report's model is scanned on
// a continuous grid of rank counts).
struct RingCoefficients {
  double latency = 0, bandwidth = 0;
};
RingCoefficients ring_allreduce_coefficients(double p);

// Ring allreduce time in ms of `bytes` over p ranks.
double ring_allreduce_ms(int p, double bytes, double alpha_ms, double beta_bytes_per_ms);

// Same with κ = bytes/β (ms) in place of bytes and β.
double ring_allreduce_kappa_ms(double p, double kappa_ms, double alpha_ms);

struct AllreduceRow {
  double bytes = 0;
  double time_ms = 0;
};

// Which level of cnnscale's hierarchical gradient sum a benchmark timed
// (`cnnscale allreduce --level`): intra-node (the ranks of one node), cross-node (the
// ranks of equal local rank, one per node, all local ranks at once, as in training), or
// unusable (a flat allreduce over several nodes with several ranks each, which is
// neither level).
enum class NetLevelKind { intra, cross, unusable };

struct AllreduceBenchmark {
  std::string file;
  int world_size = 1;           // ranks in the communicator the sum ran over (p of the ring)
  int nodes = 1;                // of the launch
  int ranks_per_node = 1;       // of the launch
  std::string level = "world";  // world | node | cross, as written by `cnnscale allreduce --json`
  std::string backend;
  std::vector<AllreduceRow> rows;
  NetLevelKind kind() const;
};

// Reads `cnnscale allreduce --json` output; errors name the file and the field.
AllreduceBenchmark load_allreduce_benchmark(const std::string& path);

struct AlphaBeta {
  double alpha_ms = 0;
  double beta_bytes_per_ms = 0;
  double mean_rel_error = 0;  // of the fit on the benchmark rows
  double max_rel_error = 0;
  std::string note;  // e.g. why α was pinned to 0
};

// Weighted least squares on relative error (small sizes fix α, large sizes fix β).
AlphaBeta fit_alpha_beta_benchmark(const AllreduceBenchmark& bench);

// The same over the rows of several benchmarks of one level taken at different ring
// sizes p (the sweep's one measurement per node count): T = 2(p−1)·α + 2(p−1)/p·n/β.
// `pick` (optional) lists the (bench, row) pairs to use, with repeats (the bootstrap).
AlphaBeta fit_alpha_beta_pooled(const std::vector<const AllreduceBenchmark*>& benches,
                                const std::vector<std::pair<size_t, size_t>>* pick = nullptr);

struct CommPoint {
  int ranks = 1;
  double exposed_ms = 0;
};

struct AlphaKappa {
  double alpha_ms = 0;
  double kappa_ms = 0;  // bytes/β per step
  std::string note;
};

// Ordinary least squares of exposed_ms = 2(p-1)·α + 2(p-1)/p·κ over the points with
// p > 1. Needs two distinct p > 1 for both unknowns; with one, α is pinned to 0 (noted).
// Negative estimates are refitted with that parameter pinned to 0.
AlphaKappa fit_alpha_kappa_runs(const std::vector<CommPoint>& points);

}  // namespace cnnscale::report
