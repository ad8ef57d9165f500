// run_record.hpp — RunRecord: the measurements of one training run as read from its
// run.json (SPEC "Files"), and the loader that validates them.
//
// Required fields (SPEC): world_size, nodes, ranks_per_node, backend, device, model,
// precision, batch_per_rank, global_batch, steps, images_per_s, step_ms {median, p10,
// p90}, breakdown_ms {data, compute, comm_exposed, optimizer}, train_loss, test_accuracy.
// Optional: images_per_s_p10/_p90, grad_bytes, epochs, time_to_accuracy [{accuracy,
// seconds}], slurm {job_id, nodelist},
// timeline (the --timeline trace file), train_samples, data, threads_per_rank,
// accuracy_per_epoch [{epoch, accuracy}] (the budget's inputs). A missing or mistyped required field is a
// UserError naming the file and the field.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cnnscale::report {

// Median per-step time split into its parts, in milliseconds.
struct StepBreakdown {
  double data = 0;
  double compute = 0;
  double comm_exposed = 0;
  double optimizer = 0;
  double sum() const { return data + compute + comm_exposed + optimizer; }
};

struct AccuracyTime {
  double accuracy = 0;  // fraction in [0, 1]
  double seconds = 0;   // wall time from the start of training
};

struct RunRecord {
  std::string dir;   // the run directory as given
  std::string file;  // the run.json read
  int world_size = 1;
  int nodes = 1;
  int ranks_per_node = 1;
  std::string backend, device, model, precision;
  // Local ranks sharing one GPU (run.json gpu.ranks_per_gpu: > 1 only for GPU ranks over
  // the host data plane, issue 38); 1 when absent (older files, CPU runs, NCCL).
  int ranks_per_gpu = 1;
  long batch_per_rank = 0;
  long global_batch = 0;
  long steps = 0;
  double images_per_s = 0;
  std::optional<double> images_per_s_p10, images_per_s_p90;
  double step_ms_median = 0, step_ms_p10 = 0, step_ms_p90 = 0;
  std::optional<double> step_ms_mean;             // optional; the breakdown's components are means
  StepBreakdown breakdown;                        // breakdown_ms: means over the timed steps
  std::optional<StepBreakdown> breakdown_median;  // breakdown_median_ms: medians (of the slowest rank per step)
  std::optional<long> timed_steps;                // how many steps the medians are over
  std::string grad_sum;                           // how gradients were summed (run.json grad_sum)
  std::optional<double> train_loss;
  std::optional<double> test_accuracy;
  // The test split's headline number: "accuracy" (test_accuracy), or a regression's "rmse"
  // (run.json test_metrics); empty name when the run evaluated nothing.
  std::string test_metric_name;
  std::optional<double> test_metric;
  bool samples_not_images = false;  // run.json task.kind is not classification: samples/s, not images/s
  std::optional<double> grad_bytes;
  std::vector<double> compute_ms_per_rank;  // compute_median_ms_per_rank (optional; world_size entries)
  std::optional<double> epochs;
  std::vector<AccuracyTime> time_to_accuracy;
  std::string slurm_job_id, slurm_nodelist;
  std::string timeline;  // run.json timeline: the --timeline file (absolute path), "" when none
  // For the training budget (report/budget.hpp): the data set's train split (run.json
  // train_samples), whether the run read synthetic data, the threads each rank used, and
  // each evaluation's epoch and accuracy (accuracy_per_epoch).
  std::optional<long> train_samples;
  bool synthetic = false;
  std::optional<int> threads_per_rank;
  // For `report --data-bench` (input_ceiling.hpp): the data set read (run.json data), its
  // --augment (config.augment) and --data-threads (data_threads); empty/absent when unknown.
  std::string data, augment;
  std::optional<int> data_threads;
  struct EpochAccuracy {
    double epoch = 0, accuracy = 0;
  };
  std::vector<EpochAccuracy> accuracy_per_epoch;

  // "cpu" or "gpu", from `device` (anything naming cuda/gpu/a GPU model is "gpu").
  std::string device_kind() const;
};

// Parses an already-loaded run.json document; `file` names it in error messages.
RunRecord parse_run(const nlohmann::json& doc, const std::string& file);

// Reads DIR/run.json (or DIR itself when it is a file).
RunRecord load_run(const std::string& dir);

}  // namespace cnnscale::report
