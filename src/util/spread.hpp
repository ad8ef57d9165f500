// spread.hpp — Spread: median, p10, p90 and mean of a list of values (step times,
// per-rank times), shared by the training summary and the scaling report.
#pragma once
#include <vector>

namespace cnnscale {

struct Spread {
  double median = 0, p10 = 0, p90 = 0, mean = 0;
};

// Linear-interpolated percentiles (as numpy's default) of values; zeros when empty.
Spread spread_of(std::vector<double> values);

}  // namespace cnnscale
