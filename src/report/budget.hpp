// budget.hpp — the training budget (issue 29 item 1): for every measured and projected
// count, how long the user's whole training takes and what it costs in node-hours, with
// the count that needs the fewest node-hours, the fastest count within the efficiency
// threshold, and the request paragraph for an allocation proposal.
//
//   samples  = epochs × train_samples                  (images the training reads)
//   wall     = samples / X                             (X = images/s: measured median, or the model's)
//   band     = samples / X_hi … samples / X_lo          (measured: the run's p90/p10 images/s, the
//                                                       step-to-step spread; projected: the bootstrap's
//                                                       5–95 % of X)
//   node-h   = wall[h] × nodes;  GPU-h = wall[h] × ranks (GPU runs); core-h = wall[h] × ranks × threads per rank
//   cost     = node-h × --node-hour-cost
// Epochs: --epochs, or with --target-accuracy the epoch at which each measured run first
// reached it (run.json accuracy_per_epoch); projected counts then use the largest measured
// count's. What the band leaves out (docs/report.md): the epoch count itself, start-up and
// evaluation time, checkpoints, queue waits, and — for projections — any misfit of the
// model beyond what the bootstrap resamples.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/grouping.hpp"
#include "report/scaling_table.hpp"
#include "report/step_model.hpp"

namespace cnnscale::report {

struct BudgetOptions {
  std::optional<double> epochs;              // --epochs
  std::optional<long> train_samples;         // --train-samples (else run.json's train_samples)
  std::optional<double> node_hour_cost;      // --node-hour-cost
  double efficiency_threshold = 0.8;
  std::optional<double> target_accuracy;     // --target-accuracy: epochs to it replace --epochs
};

struct BudgetRow {
  int ranks = 1;
  double nodes = 1;
  bool projected = false;
  double epochs = 0;
  double images_per_s = 0;
  std::optional<double> ips_lo, ips_hi;
  double efficiency = 1;
  double wall_h = 0;
  std::optional<double> wall_lo_h, wall_hi_h;
  double node_hours = 0;
  std::optional<double> node_hours_lo, node_hours_hi;
  double device_hours = 0;  // GPU-hours or core-hours (Budget::device_unit)
  std::optional<double> cost;
};

struct Budget {
  double epochs = 0;             // as asked (--epochs), or to the target (first measured run's)
  std::string epochs_source;     // "--epochs 90" / "epochs to 91.0% test accuracy (run.json accuracy_per_epoch)"
  long train_samples = 0;
  std::string samples_source;    // "--train-samples" / "run.json train_samples"
  std::string device_unit;       // "GPU-hours" / "Core-hours" (a column heading)
  std::optional<double> node_hour_cost;
  double threshold = 0.8;        // the efficiency threshold the fastest count must meet
  std::vector<BudgetRow> rows;   // measured, then projected, by ranks
  std::optional<size_t> cheapest;        // fewest node-hours
  std::optional<size_t> fastest_within;  // shortest wall time with efficiency ≥ threshold
  std::string request;                   // the proposal paragraph
  std::vector<std::string> notes;
};

// nullopt when no budget was asked for (no --epochs and no --target-accuracy reached by the
// runs). UserError when one was asked for but cannot be computed (no train sample count for
// synthetic runs: give --train-samples).
std::optional<Budget> make_budget(const RunGroup& g, const std::vector<ScalingRow>& rows,
                                  const std::vector<Projection>& projections, const BudgetOptions& o);

// "31.2 h", "45 min", "2.1 d"
std::string fmt_hours(double h);

}  // namespace cnnscale::report
