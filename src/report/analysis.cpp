// analysis.cpp — builds a Report from run directories (see analysis.hpp).
#include "report/analysis.hpp"

#include <algorithm>

#include "report/format.hpp"
#include "util/spread.hpp"
#include "util/error.hpp"

namespace cnnscale::report {

std::optional<std::string> straggler_note(const RunRecord& r, double threshold) {
  const auto& c = r.compute_ms_per_rank;
  if (c.size() < 2) return std::nullopt;
  const double median = spread_of(c).median;
  const size_t slow = static_cast<size_t>(std::max_element(c.begin(), c.end()) - c.begin());
  if (!(median > 0) || c[slow] <= median * (1 + threshold)) return std::nullopt;
  return "At " + std::to_string(r.world_size) + " ranks (" + r.dir + "), rank " + std::to_string(slow) +
         " computes " + fmt_num(100 * (c[slow] / median - 1), 3) + "% slower than the median rank (" +
         fmt_num(c[slow], 4) + " vs " + fmt_num(median, 4) +
         " ms of forward+backward per step): every rank waits for it at each step. A slower or busier "
         "core or node; check what else runs there (run.json compute_median_ms_per_rank).";
}

std::optional<std::string> input_bound_note(const RunRecord& r, double threshold) {
  const double step = r.step_ms_mean.value_or(r.breakdown.sum());
  const double data = r.breakdown.data;
  if (!(step > 0) || !(data > threshold * step)) return std::nullopt;
  return "At " + std::to_string(r.world_size) + " ranks (" + r.dir + "), the training loop waited for input " +
         fmt_num(100 * data / step, 3) + "% of the step (" + fmt_num(data, 4) + " of " + fmt_num(step, 4) +
         " ms, run.json breakdown_ms.data): the run is input-bound, so faster compute or more ranks will not help "
         "until the input keeps up. Give the reader more workers (train --data-threads N, augmentation and "
         "normalisation per rank), a deeper --prefetch, --cache memory (no disk reads after the first epoch), or "
         "prep the images smaller (--resize, --store original-max S).";
}

Report analyze_runs(const ReportOptions& options, const std::vector<RunRecord>& runs) {
  if (!(options.efficiency_threshold > 0 && options.efficiency_threshold <= 1))
    fail("--efficiency-threshold must be in (0, 1], got ", options.efficiency_threshold);
  Report rep;
  rep.options = options;
  if (options.allreduce_file) {
    rep.benchmark = load_allreduce_benchmark(*options.allreduce_file);
    rep.benchmark_fit = fit_alpha_beta_benchmark(*rep.benchmark);
  }
  for (auto& g : group_runs(runs, options.mode)) {
    GroupAnalysis ga;
    ga.rows = scaling_rows(g);
    ga.target_accuracy = default_target_accuracy(g, options.target_accuracy);
    if (ga.target_accuracy)
      for (size_t i = 0; i < ga.rows.size(); ++i) ga.rows[i].time_to_target_s = time_to_accuracy(g.runs[i], *ga.target_accuracy);
    ga.scalable = ga.rows.size() >= 2;
    if (ga.scalable) {
      ga.fit = fit_step_model(g, ga.rows, rep.benchmark_fit, options.allreduce_file.value_or(""));
      ga.projections = project(ga.fit->model, ga.rows.back().ranks, g.runs.back().ranks_per_node, options.max_factor);
      ga.recommendation = recommend(ga.rows, ga.fit, ga.projections, options.efficiency_threshold);
    } else {
      ga.notes.push_back("Only one rank count (" + std::to_string(ga.rows.front().ranks) +
                         " ranks) was given: scaling needs runs at two or more rank counts. Run the same "
                         "configuration at more counts, e.g. scripts/scaling-sweep.sh --local --ranks 1,2,4 -- ...");
    }
    for (const auto& r : g.runs)
      if (auto s = straggler_note(r)) ga.notes.push_back(*s);
    for (const auto& r : g.runs)
      if (auto s = input_bound_note(r)) ga.notes.push_back(*s);
    ga.group = std::move(g);
    rep.groups.push_back(std::move(ga));
  }
  return rep;
}

Report analyze(const ReportOptions& options) {
  if (options.run_dirs.empty()) fail("no run directories given; usage: cnnscale report RUN_DIR... --output DIR");
  std::vector<RunRecord> runs;
  std::vector<std::string> skipped;
  for (const auto& d : options.run_dirs) {
    try {
      runs.push_back(load_run(d));
    } catch (const UserError& e) {
      if (!options.allow_missing) throw;
      skipped.push_back(std::string(e.what()));
    }
  }
  if (runs.empty()) fail("none of the ", options.run_dirs.size(), " run directories has a usable run.json");
  Report rep = analyze_runs(options, runs);
  rep.skipped = std::move(skipped);
  return rep;
}

}  // namespace cnnscale::report
