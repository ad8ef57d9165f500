// cmd_report.cpp — `cnnscale report RUN_DIR... --output DIR`: scaling analysis of
// training runs (tables, model, projections, recommendation; Markdown, HTML, CSV, JSON).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "report/analysis.hpp"
#include "report/renderers.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_report(int argc, char** argv) {
  CommandSpec spec{
      "report", "cnnscale report RUN_DIR... --output DIR [options]",
      "Reads RUN_DIR/run.json of each training run, groups the runs by configuration (model,\n"
      "precision, backend, device kind), detects strong scaling (global batch constant) or weak\n"
      "scaling (per-rank batch constant), and writes report.md, report.html (inline SVG charts),\n"
      "scaling.csv and report.json: throughput, speedup, parallel efficiency, Karp-Flatt serial\n"
      "fraction, step-time breakdown (medians), a two-level (intra-/cross-node) model of the step time\n"
      "with bootstrap bands, its fit and hold-out error, projections to 2x..64x the largest measured\n"
      "count (and --project layouts; never across nodes without a cross-node run or allreduce\n"
      "measurement), and a recommendation.\n"
      "Formulas: docs/report.md.",
      "Examples:\n"
      "  cnnscale report runs/n1-* runs/n2-* runs/n4-* --output scaling\n"
      "  cnnscale report runs/* --allreduce allreduce.json --efficiency-threshold 0.7 --output scaling\n"
      "  scripts/scaling-sweep.sh --local --ranks 1,2,4 -- --synthetic --max-steps 50   (runs and reports)"};
  po::options_description desc("Options");
  desc.add_options()("run-dir", po::value<std::vector<std::string>>()->multitoken(),
                     "run directories (positional; each holds run.json)")(
      "output,o", po::value<std::string>(),
      "directory for report.md, report.html, scaling.csv, report.json (required)")(
      "mode", po::value<std::string>(), "strong|weak: override the detected scaling mode")(
      "efficiency-threshold", po::value<double>()->default_value(0.8, "0.8"),
      "parallel efficiency the recommendation keeps (0..1]")(
      "allreduce", po::value<std::vector<std::string>>()->composing(),
      "`cnnscale allreduce --json` output (repeatable; --level node gives the intra-node alpha1/beta1, --level "
      "cross or a 1-rank-per-node run the cross-node alpha2/beta2)")(
      "data-bench", po::value<std::string>(),
      "`cnnscale data-bench --json` output: the reader's images/s per rank against what the runs and the "
      "projections consume (input-bound layouts named) and the cores per rank input takes")(
      "project", po::value<std::string>(),
      "also project these layouts: R (ranks, at the largest run's ranks per node) or NxL (N nodes x L ranks per "
      "node), comma-separated, e.g. 512,3584,64x8")(
      "points", po::value<std::string>(),
      "CSV of external measurements to overlay: header ranks,nodes,images_per_s[,step_ms][,label]")(
      "bootstrap", po::value<int>()->default_value(200), "bootstrap replicates for the uncertainty bands (0: none)")(
      "target-accuracy", po::value<double>(),
      "accuracy (0..1) for the time-to-accuracy column (default: the highest every run reached)")(
      "epochs", po::value<double>(),
      "the training to budget: wall time, node-hours and GPU-/core-hours of this many epochs at every measured "
      "and projected count, the cheapest and the fastest count within the threshold, and a request paragraph")(
      "train-samples", po::value<long>(),
      "images per epoch for --epochs (default: the data set's train split recorded in run.json; synthetic runs "
      "need it)")("node-hour-cost", po::value<double>(), "price of one node-hour: adds a cost column to the budget")(
      "allow-missing", po::bool_switch(),
      "skip run directories without a usable run.json (e.g. failed jobs of a sweep) instead of failing");
  auto parsed = parse_options(spec, argc, argv, desc, {{"run-dir", -1}});
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  const auto& vm = parsed.vm;
  report::ReportOptions o;
  if (vm.count("run-dir")) o.run_dirs = vm["run-dir"].as<std::vector<std::string>>();
  if (o.run_dirs.empty()) fail("report: no run directories given; usage: ", spec.usage);
  if (!vm.count("output")) fail("report: --output DIR is required (where report.md, report.html, ... go)");
  o.output_dir = vm["output"].as<std::string>();
  report::check_report_output(o.output_dir);
  if (vm.count("mode")) o.mode = report::parse_mode(vm["mode"].as<std::string>());
  o.efficiency_threshold = vm["efficiency-threshold"].as<double>();
  if (vm.count("allreduce")) o.allreduce_files = vm["allreduce"].as<std::vector<std::string>>();
  if (vm.count("data-bench")) o.data_bench_file = vm["data-bench"].as<std::string>();
  if (vm.count("project")) o.project = vm["project"].as<std::string>();
  if (vm.count("points")) o.points_file = vm["points"].as<std::string>();
  o.bootstrap = vm["bootstrap"].as<int>();
  if (vm.count("target-accuracy")) o.target_accuracy = vm["target-accuracy"].as<double>();
  o.allow_missing = vm["allow-missing"].as<bool>();
  if (vm.count("epochs")) o.epochs = vm["epochs"].as<double>();
  if (vm.count("train-samples")) o.train_samples = vm["train-samples"].as<long>();
  if (vm.count("node-hour-cost")) o.node_hour_cost = vm["node-hour-cost"].as<double>();
  report::check_report_options(o);  // finite, in range (report/plausible.hpp), before any file is read
  if ((o.train_samples || o.node_hour_cost) && !o.epochs && !o.target_accuracy)
    fail("--train-samples and --node-hour-cost size the training budget: give --epochs E (or --target-accuracy A "
         "with runs that evaluated)");

  report::Report rep = report::analyze(o);
  report::write_report(rep);

  for (const auto& s : rep.skipped) std::printf("skipped: %s\n", s.c_str());
  for (const auto& ga : rep.groups) {
    std::printf("%s (%s scaling, %zu rank counts)\n", ga.group.label.c_str(), report::mode_name(ga.group.mode),
                ga.rows.size());
    for (const auto& n : ga.notes) std::printf("  %s\n", n.c_str());
    if (ga.recommendation) std::printf("  %s\n", ga.recommendation->text.c_str());
  }
  std::printf("wrote %s/{report.md,report.html,scaling.csv,report.json}\n", o.output_dir.c_str());
  return 0;
}

}  // namespace cnnscale::cli
