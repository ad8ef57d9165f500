// input_ceiling.hpp — `cnnscale report --data-bench FILE`: the reader's measured rate
// (`cnnscale data-bench --json`, docs/data.md) against what the runs and the projections
// consume, as a note per group: "the reader delivers R images/s per rank; these runs
// consume up to C (headroom R/C); the projections at N ranks need more: input-bound",
// and the cores per rank that rate takes at data-bench's images per CPU-second (issue 27
// item 1: is this node's input enough for N GPUs?).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/run_record.hpp"
#include "report/scaling_table.hpp"
#include "report/step_model.hpp"

namespace cnnscale::report {

struct DataBench {
  std::string file, data, augment, cache;
  int world_size = 1, nodes = 1, ranks_per_node = 1, data_threads = 1;
  double images_per_s = 0, images_per_cpu_s = 0;
  double per_rank() const { return images_per_s / world_size; }
};

// Reads `cnnscale data-bench --json` output; errors name the file and the field.
DataBench load_data_bench(const std::string& path);

// The note for one group (its measured rows, projections and runs); nullopt without rows.
// It opens with a warning when a run read another data set, or used another --augment or
// --data-threads, than data-bench measured (run.json data, config.augment, data_threads).
std::optional<std::string> input_ceiling_note(const DataBench& bench, const std::vector<ScalingRow>& rows,
                                              const std::vector<Projection>& projections,
                                              const std::vector<RunRecord>& runs = {});

}  // namespace cnnscale::report
