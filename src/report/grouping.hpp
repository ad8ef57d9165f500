// grouping.hpp — RunGroup: runs of one configuration (precision, backend, device kind)
// ordered by rank count, and whether they form a strong or a weak scaling series.
//
// Strong scaling: the global batch is the same in every run. Weak scaling: the per-rank
// batch is the same. Runs of different models in one configuration are a user error
// (the comparison would be meaningless). Several runs at one rank count are repeats:
// the one with the median throughput represents the count.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "report/run_record.hpp"

namespace cnnscale::report {

enum class ScalingMode { strong, weak };

const char* mode_name(ScalingMode m);
ScalingMode parse_mode(const std::string& s);  // "strong" | "weak", else UserError

struct RunGroup {
  std::string label;  // e.g. "mnist_cnn fp32 mpi cpu"
  std::string model, precision, backend, device_kind;
  ScalingMode mode = ScalingMode::strong;
  bool mode_forced = false;
  std::vector<RunRecord> runs;  // one per rank count, ascending world_size
  std::vector<int> repeats;     // how many runs were given at that count
  std::vector<std::string> notes;
};

// Groups runs by configuration and orders them; `forced` overrides the detected mode.
std::vector<RunGroup> group_runs(const std::vector<RunRecord>& runs, std::optional<ScalingMode> forced);

}  // namespace cnnscale::report
