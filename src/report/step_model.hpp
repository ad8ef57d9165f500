// step_model.hpp — StepModel: per-step time as a function of the rank count,
//
//   T(p) = W · b(p)/b(p0) + F + η · [2(p−1)/p · κ + 2(p−1)·α]
//
// W = data + compute time of the base run (p0, the smallest count), scaled with the
// per-rank batch b(p) (strong scaling: b = G/p, so W·p0/p; weak: constant);
// F = the rest of the base step that does not shrink with p (optimizer and anything the
// breakdown does not cover); the bracket is the α–β ring allreduce of κ = grad_bytes/β
// (ring_allreduce_kappa_ms, report/alpha_beta.hpp).
// α, κ come from the allreduce benchmark (then η, the exposed fraction, is fitted) or
// are fitted to the runs' exposed communication (then η = 1: α, κ are effective values).
// The model is fitted to measured points; projections beyond them are a model only.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/alpha_beta.hpp"
#include "report/grouping.hpp"
#include "report/scaling_table.hpp"

namespace cnnscale::report {

struct StepModel {
  ScalingMode mode = ScalingMode::strong;
  int p0 = 1;
  double b0 = 1;           // per-rank batch of the base run
  double global_batch0 = 1;
  double work_ms = 0;      // W
  double fixed_ms = 0;     // F
  double alpha_ms = 0;
  double kappa_ms = 0;
  double exposure = 1;     // η
  std::optional<double> grad_bytes;
  std::optional<double> beta_bytes_per_ms;  // κ = grad_bytes/β when grad_bytes is known
  std::string comm_source;                  // "allreduce benchmark FILE" or "fitted to the runs"
  std::vector<std::string> notes;

  double batch_per_rank(double p) const;       // b(p) for this mode
  double comm_ms(double p) const;              // η × ring cost
  double step_ms(double p) const;              // T(p)
  double images_per_s(double p) const;         // p·b(p)/T(p) × 1000
  double speedup(double p) const;              // X(p)/X(p0), model on both sides
  double efficiency(double p) const;           // speedup / (p/p0)
};

struct FitPoint {
  int ranks = 1;
  double measured_ms = 0;
  double model_ms = 0;
  double rel_error = 0;
};

struct ModelFit {
  StepModel model;
  std::vector<FitPoint> points;
  double mean_rel_error = 0;
  double max_rel_error = 0;
};

// Fits the model to a group's rows (≥ 2 rank counts). `bench` (α, β from the allreduce
// benchmark) is used when given and the runs report grad_bytes.
ModelFit fit_step_model(const RunGroup& g, const std::vector<ScalingRow>& rows, const std::optional<AlphaBeta>& bench,
                        const std::string& bench_file);

struct Projection {
  int ranks = 0;
  int factor = 0;       // ranks / largest measured count
  double nodes = 0;     // at the largest run's ranks per node
  double batch_per_rank = 0;
  double step_ms = 0;
  double images_per_s = 0;
  double speedup = 0;
  double efficiency = 0;
  bool feasible = true;  // false when the per-rank batch would drop below 1 (strong)
};

// Projections to 2×, 4×, … max_factor× the largest measured count.
std::vector<Projection> project(const StepModel& m, int largest_ranks, int ranks_per_node, int max_factor = 64);

struct Recommendation {
  double threshold = 0.8;
  int recommended_ranks = 0;        // largest measured count with E ≥ threshold (and all smaller counts too)
  int recommended_nodes = 0;
  double recommended_efficiency = 1;
  std::optional<int> measured_below;     // first measured count with E < threshold
  std::optional<int> projected_below;    // first projected count (2×…) with E < threshold
  std::optional<double> crossing_ranks;  // model: rank count where E(p) = threshold
  std::string text;                      // the one-line recommendation
};

Recommendation recommend(const std::vector<ScalingRow>& rows, const std::optional<ModelFit>& fit,
                         const std::vector<Projection>& projections, double threshold);

}  // namespace cnnscale::report
