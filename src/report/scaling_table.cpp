// scaling_table.cpp — measured scaling metrics (see scaling_table.hpp).
#include "report/scaling_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cnnscale::report {

double karp_flatt(double speedup, double q) { return (1.0 / speedup - 1.0 / q) / (1.0 - 1.0 / q); }

std::optional<double> time_to_accuracy(const RunRecord& r, double target) {
  std::optional<double> best;
  for (const auto& at : r.time_to_accuracy)
    if (at.accuracy >= target && (!best || at.seconds < *best)) best = at.seconds;
  return best;
}

std::optional<double> default_target_accuracy(const RunGroup& g, std::optional<double> requested) {
  if (requested) return requested;
  double common = std::numeric_limits<double>::infinity();
  for (const auto& r : g.runs) {
    if (r.time_to_accuracy.empty()) return std::nullopt;
    double best = -1;
    for (const auto& at : r.time_to_accuracy) best = std::max(best, at.accuracy);
    common = std::min(common, best);
  }
  if (g.runs.empty()) return std::nullopt;
  return common;
}

std::vector<ScalingRow> scaling_rows(const RunGroup& g) {
  std::vector<ScalingRow> rows;
  if (g.runs.empty()) return rows;
  const RunRecord& base = g.runs.front();
  for (size_t i = 0; i < g.runs.size(); ++i) {
    const RunRecord& r = g.runs[i];
    ScalingRow row;
    row.ranks = r.world_size;
    row.nodes = r.nodes;
    row.ranks_per_node = r.ranks_per_node;
    row.ranks_per_gpu = r.ranks_per_gpu;
    row.repeats = g.repeats.empty() ? 1 : g.repeats[i];
    row.batch_per_rank = r.batch_per_rank;
    row.global_batch = r.global_batch;
    row.images_per_s = r.images_per_s;
    // A slow step (p90 time) is a low throughput (p10 images/s).
    row.images_per_s_p10 = r.images_per_s_p10.value_or(r.global_batch * 1000.0 / r.step_ms_p90);
    row.images_per_s_p90 = r.images_per_s_p90.value_or(r.global_batch * 1000.0 / r.step_ms_p10);
    row.speedup = r.images_per_s / base.images_per_s;
    const double q = static_cast<double>(r.world_size) / base.world_size;
    row.efficiency = row.speedup / q;
    if (q > 1) row.karp_flatt = karp_flatt(row.speedup, q);
    row.step_ms = r.step_ms_median;
    // σ ≈ (p90 − p10)/2.563 for a normal spread; the median's standard error is
    // 1.2533·σ/√n over n timed steps.
    const double n = static_cast<double>(std::max(1L, r.timed_steps.value_or(std::max(1L, r.steps))));
    row.step_rel_se = 1.2533 * (r.step_ms_p90 - r.step_ms_p10) / 2.563 / std::sqrt(n) / r.step_ms_median;
    row.breakdown_is_median = r.breakdown_median.has_value();
    row.breakdown = r.breakdown_median.value_or(r.breakdown);
    row.test_accuracy = r.test_accuracy;
    row.test_metric_name = r.test_metric_name;
    row.test_metric = r.test_metric;
    row.samples_not_images = r.samples_not_images;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace cnnscale::report
