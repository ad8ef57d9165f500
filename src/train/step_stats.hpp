// step_stats.hpp — per-step timings and their summaries (median, p10, p90, mean).
#pragma once
#include <vector>

#include "util/spread.hpp"  // Spread, spread_of

namespace cnnscale {

struct StepTimes {
  double step = 0, data = 0, compute = 0, comm_exposed = 0, optimizer = 0;  // seconds
  double bn_sync = 0;  // --sync-bn: waiting in the batch-norm statistics sums (part of comm_exposed)
};

// How many leading steps to leave out of timing summaries (warm-up: first-touch page
// faults, primitive JIT, prefetch fill): 10% of the steps, at least 1, at most 20.
int warmup_steps_to_skip(long long total_steps);

}  // namespace cnnscale
