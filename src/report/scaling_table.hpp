// scaling_table.hpp — ScalingRow: the measured table of a group (throughput, speedup,
// parallel efficiency, Karp–Flatt serial fraction, step-time breakdown, time to a
// target accuracy), computed relative to the group's smallest rank count p0:
//
//   speedup    S = X(p) / X(p0)            (X = images/s; for weak scaling the scaled speedup)
//   efficiency E = S / (p/p0)
//   Karp–Flatt e = (1/S − 1/q) / (1 − 1/q),  q = p/p0  (undefined at p0)
#pragma once
#include <optional>
#include <vector>

#include "report/grouping.hpp"

namespace cnnscale::report {

struct ScalingRow {
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;
  int ranks_per_gpu = 1;  // > 1: ranks sharing GPUs (the host data plane); devices = ranks / this
  int repeats = 1;
  long batch_per_rank = 0;
  long global_batch = 0;
  double images_per_s = 0;
  double images_per_s_p10 = 0;  // from run.json, else derived from step_ms p90
  double images_per_s_p90 = 0;  // from run.json, else derived from step_ms p10
  double speedup = 1;
  double efficiency = 1;
  std::optional<double> karp_flatt;
  double step_ms = 0;       // median
  double step_rel_se = 0;   // relative standard error of the median step (from p10–p90 and the step count)
  StepBreakdown breakdown;  // medians (breakdown_median_ms) when the run gives them, else means (breakdown_ms)
  bool breakdown_is_median = false;
  std::optional<double> test_accuracy;
  std::string test_metric_name;  // RunRecord's: "accuracy", "rmse" or ""
  std::optional<double> test_metric;
  bool samples_not_images = false;
  std::optional<double> time_to_target_s;  // when the run reached the target accuracy
};

std::vector<ScalingRow> scaling_rows(const RunGroup& g);

// Karp–Flatt experimentally determined serial fraction for speedup S at q = p/p0 > 1.
double karp_flatt(double speedup, double q);

// The accuracy target used for "time to accuracy": `requested` when given, else the
// highest accuracy every run of the group reached (none when a run has no record).
std::optional<double> default_target_accuracy(const RunGroup& g, std::optional<double> requested);

// First time a run reached `target` (seconds), if it did.
std::optional<double> time_to_accuracy(const RunRecord& r, double target);

}  // namespace cnnscale::report
