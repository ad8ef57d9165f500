// analysis.hpp — Report: everything `cnnscale report` computes from run directories
// (groups, measured tables, model fit, projections, recommendation), independent of
// the output formats, and analyze() which builds it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/alpha_beta.hpp"
#include "report/budget.hpp"
#include "report/grouping.hpp"
#include "report/input_ceiling.hpp"
#include "report/scaling_table.hpp"
#include "report/step_model.hpp"

namespace cnnscale::report {

struct ReportOptions {
  std::vector<std::string> run_dirs;
  std::string output_dir;
  std::optional<ScalingMode> mode;
  double efficiency_threshold = 0.8;
  std::vector<std::string> allreduce_files;    // `cnnscale allreduce --json` outputs (any levels, any counts)
  std::optional<std::string> data_bench_file;  // `cnnscale data-bench --json` output: the input's ceiling
  std::optional<std::string> project;          // --project "512,3584,64x8"
  std::optional<std::string> points_file;      // --points FILE.csv: external measurements
  int bootstrap = 200;                         // replicates for the uncertainty bands (0: none)
  std::optional<double> target_accuracy;
  bool allow_missing = false;  // skip run directories without run.json (a sweep with failed jobs)
  int max_factor = 64;
  // The training budget (report/budget.hpp): --epochs, --train-samples, --node-hour-cost.
  std::optional<double> epochs;
  std::optional<long> train_samples;
  std::optional<double> node_hour_cost;
};

// An external measurement (--points): another system's or a published throughput.
struct ExternalPoint {
  int ranks = 1, nodes = 1;
  double images_per_s = 0;
  std::optional<double> step_ms;
  std::string label;
};

// Reads ranks,nodes,images_per_s[,step_ms][,label] with a header line; UserError naming
// the line otherwise.
std::vector<ExternalPoint> load_points(const std::string& path);

struct GroupAnalysis {
  RunGroup group;
  std::vector<ScalingRow> rows;
  std::optional<double> target_accuracy;
  bool scalable = false;  // at least two rank counts
  std::optional<ModelFit> fit;
  std::vector<Projection> projections;
  std::optional<Recommendation> recommendation;
  std::optional<Budget> budget;  // with --epochs (or epochs to --target-accuracy)
  std::vector<std::string> notes;
};

struct Report {
  ReportOptions options;
  std::vector<std::string> skipped;  // run dirs left out (allow_missing)
  std::vector<AllreduceBenchmark> benchmarks;
  std::vector<std::string> benchmark_notes;  // e.g. a benchmark that is neither level
  std::vector<ExternalPoint> points;
  std::vector<GroupAnalysis> groups;
};

// Loads every run, groups, computes; throws UserError on bad input.
Report analyze(const ReportOptions& options);

// Same from already-loaded runs (used by tests).
Report analyze_runs(const ReportOptions& options, const std::vector<RunRecord>& runs);

// A note when one rank's median compute time (run.json compute_median_ms_per_rank) is
// more than `threshold` (default 5 %) above the median rank's: a straggler, which every
// other rank waits for at each step. nullopt otherwise or without the field.
std::optional<std::string> straggler_note(const RunRecord& r, double threshold = 0.05);

// A note when a measured row's parallel efficiency exceeds 100 % by more than `margin`
// (default 5 %): faster than ideal, which in weak scaling only a baseline measured too slow
// gives (a loaded machine: a demo on a busy 2-core machine showed 125.9 %), and in strong
// scaling mostly so. Names the row, both rates, and says to rerun the baseline with repeats.
std::optional<std::string> superlinear_note(const std::vector<ScalingRow>& rows, ScalingMode mode,
                                            double margin = 0.05);

// A note when the training loop waited for input (run.json breakdown_ms.data, a mean
// per step) more than `threshold` (default 5 %, as train's progress lines and summary) of the step — step_ms.mean when
// run.json has it, else the breakdown's sum: the run is input-bound, and more ranks or
// a faster model will not make it faster. Names the share, both times and the knobs
// (--data-threads, --prefetch, --cache memory). nullopt otherwise.
std::optional<std::string> input_bound_note(const RunRecord& r, double threshold = 0.05);

// UserError naming the option when one is out of its range or not finite
// (report/plausible.hpp). analyze_runs() calls it; the CLI first, before reading files.
void check_report_options(const ReportOptions& options);

// Writes report.md, report.html, scaling.csv and report.json into options.output_dir
// (util/atomic_file.hpp: each replaced whole, written through a symbolic link the
// output-file rule allows; UserError before any is written when one of them is a
// directory, a device, a FIFO, another user's link in /tmp, ...).
void write_report(const Report& report);
// UserError when --output DIR exists as something else than a directory, when it
// belongs to another user than the caller or root (issue 48: its owner controls every
// name in it), or when one of the four files there is something write_report would
// refuse. Before the analysis.
void check_report_output(const std::string& output_dir);

}  // namespace cnnscale::report
