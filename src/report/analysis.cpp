// analysis.cpp — builds a Report from run directories (see analysis.hpp).
#include "report/analysis.hpp"

#include <algorithm>
#include <sstream>

#include "report/format.hpp"
#include "report/json_file.hpp"
#include "report/plausible.hpp"
#include "util/error.hpp"
#include "util/spread.hpp"

namespace cnnscale::report {

std::optional<std::string> straggler_note(const RunRecord& r, double threshold) {
  const auto& c = r.compute_ms_per_rank;
  if (c.size() < 2) return std::nullopt;
  const double median = spread_of(c).median;
  const size_t slow = static_cast<size_t>(std::max_element(c.begin(), c.end()) - c.begin());
  if (!(median > 0) || c[slow] <= median * (1 + threshold)) return std::nullopt;
  return "At " + std::to_string(r.world_size) + " ranks (" + r.dir + "), rank " + std::to_string(slow) + " computes " +
         fmt_num(100 * (c[slow] / median - 1), 3) + "% slower than the median rank (" + fmt_num(c[slow], 4) + " vs " +
         fmt_num(median, 4) +
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
         "prep the images smaller (--resize, --store original-max S); `cnnscale data-bench` measures the reader "
         "alone (docs/data.md).";
}

std::optional<std::string> superlinear_note(const std::vector<ScalingRow>& rows, ScalingMode mode, double margin) {
  const ScalingRow* worst = nullptr;
  for (const auto& r : rows)
    if (&r != &rows.front() && r.efficiency > 1 + margin && (!worst || r.efficiency > worst->efficiency)) worst = &r;
  if (!worst) return std::nullopt;
  const ScalingRow& base = rows.front();
  return "Parallel efficiency above 100% at " + std::to_string(worst->ranks) + " ranks (" +
         fmt_pct(worst->efficiency) + ", " + fmt_num(worst->images_per_s, 3) + " images/s against " +
         fmt_num(base.images_per_s, 3) + " at " + std::to_string(base.ranks) + " rank(s)): faster than ideal. " +
         (mode == ScalingMode::weak
              ? "With the same work per rank that is not scaling: the baseline run was slower than it should have "
                "been (a loaded or shared machine, CPU frequency, another job on the node)"
              : "Strong scaling can gain from a smaller per-rank working set fitting in cache, but the usual cause is a "
                "baseline run slower than it should have been (a loaded or shared machine, CPU frequency, another "
                "job on the node)") +
         ", and every speedup and efficiency here is relative to it. Rerun the " + std::to_string(base.ranks) +
         "-rank baseline on the same idle nodes, with repeats (several runs at each count: the report takes "
         "their median), before using these numbers.";
}

void check_report_options(const ReportOptions& o) {
  check_option("--efficiency-threshold", o.efficiency_threshold, 0, false, 1,
               "the parallel efficiency the recommendation keeps, e.g. 0.8");
  if (o.bootstrap < 0 || o.bootstrap > kMaxBootstrap)
    fail("--bootstrap must be at least 0 and at most ", kMaxBootstrap,
         " (replicates of the model's fit; 200 by default), got ", o.bootstrap);
  if (o.target_accuracy)
    check_option("--target-accuracy", *o.target_accuracy, 0, false, 1, "a fraction, e.g. 0.9 for 90 %");
  if (o.epochs)
    check_option("--epochs", *o.epochs, 0, false, kMaxEpochs, "the epochs of the training to budget, e.g. 90");
  if (o.train_samples)
    check_option("--train-samples", static_cast<double>(*o.train_samples), 1, true, kMaxTrainSamples,
                 "the images of one epoch, e.g. 1281167 for ImageNet-1k");
  if (o.node_hour_cost)
    check_option("--node-hour-cost", *o.node_hour_cost, 0, true, kMaxNodeHourCost, "the price of one node-hour");
}

Report analyze_runs(const ReportOptions& options, const std::vector<RunRecord>& runs) {
  check_report_options(options);
  Report rep;
  rep.options = options;
  for (const auto& f : options.allreduce_files) rep.benchmarks.push_back(load_allreduce_benchmark(f));
  NetMeasurements net;
  for (const auto& b : rep.benchmarks) {
    switch (b.kind()) {
      case NetLevelKind::intra: net.intra.push_back(&b); break;
      case NetLevelKind::cross: net.cross.push_back(&b); break;
      case NetLevelKind::unusable:
        rep.benchmark_notes.push_back(
            b.file + " is a flat allreduce over " + std::to_string(b.world_size) + " ranks on " +
            std::to_string(b.nodes) +
            " nodes, which is neither level of the hierarchical sum training does; it is "
            "not used. Measure with `cnnscale allreduce --level cross` (and --level node) instead.");
        break;
    }
  }
  if (options.points_file) rep.points = load_points(*options.points_file);
  std::optional<DataBench> input;
  if (options.data_bench_file) input = load_data_bench(*options.data_bench_file);
  for (auto& g : group_runs(runs, options.mode)) {
    GroupAnalysis ga;
    ga.rows = scaling_rows(g);
    ga.target_accuracy = default_target_accuracy(g, options.target_accuracy);
    if (ga.target_accuracy)
      for (size_t i = 0; i < ga.rows.size(); ++i)
        ga.rows[i].time_to_target_s = time_to_accuracy(g.runs[i], *ga.target_accuracy);
    ga.scalable = ga.rows.size() >= 2;
    if (ga.scalable) {
      ga.fit = fit_step_model(g, ga.rows, net, options.bootstrap);
      const Layout largest{double(ga.rows.back().nodes), double(ga.rows.back().ranks_per_node)};
      std::vector<Layout> extra;
      if (options.project) extra = parse_layouts(*options.project, ga.rows.back().ranks_per_node);
      ga.projections = project(*ga.fit, largest, options.max_factor, extra);
      ga.recommendation = recommend(ga.rows, ga.fit, ga.projections, options.efficiency_threshold);
    } else {
      ga.notes.push_back("Only one rank count (" + std::to_string(ga.rows.front().ranks) +
                         " ranks) was given: scaling needs runs at two or more rank counts. Run the same "
                         "configuration at more counts, e.g. scripts/scaling-sweep.sh --local --ranks 1,2,4 -- ...");
    }
    ga.budget = make_budget(g, ga.rows, ga.projections,
                            {options.epochs, options.train_samples, options.node_hour_cost,
                             options.efficiency_threshold, options.target_accuracy});
    if (auto s = superlinear_note(ga.rows, g.mode)) ga.notes.push_back(*s);
    for (const auto& r : g.runs)
      if (auto s = straggler_note(r)) ga.notes.push_back(*s);
    for (const auto& r : g.runs)
      if (auto s = input_bound_note(r)) ga.notes.push_back(*s);
    ga.group = std::move(g);
    if (input)
      if (auto s = input_ceiling_note(*input, ga.rows, ga.projections, ga.group.runs)) ga.notes.push_back(*s);
    rep.groups.push_back(std::move(ga));
  }
  return rep;
}

std::vector<ExternalPoint> load_points(const std::string& path) {
  std::istringstream in(
      read_input_text(path, "cannot read --points file '" + path + "': no such file or not readable"));
  std::string line;
  std::vector<ExternalPoint> out;
  std::vector<std::string> header;
  int lineno = 0;
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    std::stringstream ss(l);
    std::string x;
    while (std::getline(ss, x, ',')) {
      while (!x.empty() && (x.back() == '\r' || x.back() == ' ')) x.pop_back();
      while (!x.empty() && x.front() == ' ') x.erase(0, 1);
      f.push_back(x);
    }
    return f;
  };
  const std::string want = "expected a header 'ranks,nodes,images_per_s[,step_ms][,label]' and one line per point";
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    auto f = split(line);
    if (header.empty()) {
      header = f;
      if (header.size() < 3 || header[0] != "ranks" || header[1] != "nodes" || header[2] != "images_per_s")
        fail(path, ":", lineno, ": ", want);
      continue;
    }
    ExternalPoint p;
    try {
      size_t used = 0;
      p.ranks = std::stoi(f.at(0), &used);
      p.nodes = std::stoi(f.at(1));
      p.images_per_s = std::stod(f.at(2));
      for (size_t i = 3; i < header.size() && i < f.size(); ++i) {
        if (header[i] == "step_ms" && !f[i].empty()) p.step_ms = std::stod(f[i]);
        if (header[i] == "label") p.label = f[i];
      }
    } catch (const std::exception&) {
      fail(path, ":", lineno, ": '", line, "' is not ranks,nodes,images_per_s numbers; ", want);
    }
    if (p.ranks < 1 || p.nodes < 1 || p.nodes > p.ranks || !(p.images_per_s > 0))
      fail(path, ":", lineno, ": needs ranks ≥ nodes ≥ 1 and images_per_s > 0, got '", line, "'");
    check_measured(path + ":" + std::to_string(lineno), "images_per_s", p.images_per_s, kMaxImagesPerS, "images/s");
    if (p.step_ms) {
      if (!(*p.step_ms > 0)) fail(path, ":", lineno, ": step_ms must be positive, got '", line, "'");
      check_measured(path + ":" + std::to_string(lineno), "step_ms", *p.step_ms, kMaxStepMs, "ms");
    }
    out.push_back(p);
  }
  if (out.empty()) fail(path, ": no points; ", want);
  return out;
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
