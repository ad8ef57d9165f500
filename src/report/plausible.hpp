// plausible.hpp — the ranges `cnnscale report` accepts for the numbers it is given: its
// options (--epochs, --train-samples, --node-hour-cost, --bootstrap, ...) and the
// measurements it reads (run.json, --data-bench, --allreduce, --points).
//
// Why (issue 39): `--epochs 1e30` printed a wall time of 1.2e24 days, `--epochs inf`
// "inf epochs", and a data-bench file's images_per_s of 1e308 a 63-digit rate, all with
// exit status 0. A value that no training or measurement can have is a typo or a damaged
// file: refused by name, with the range. The bounds are far beyond any real value, so
// they never refuse one: the fastest published trainings read ~1e6 images/s on thousands
// of accelerators (1e12 allowed); a step of 1e9 ms is 11.6 days; 1e6 epochs; 1e12 images
// per epoch (the largest public image sets hold ~6e9).
#pragma once
#include <string>

namespace cnnscale::report {

constexpr double kMaxImagesPerS = 1e12;    // images/s (run.json, --data-bench, --points)
constexpr double kMaxStepMs = 1e9;         // ms per step, and each part of it
constexpr double kMaxEpochs = 1e6;         // --epochs, run.json epochs
constexpr double kMaxTrainSamples = 1e12;  // --train-samples, run.json train_samples
constexpr double kMaxNodeHourCost = 1e9;   // --node-hour-cost (any currency)
constexpr double kMaxBytes = 1e15;         // grad_bytes, allreduce message sizes (1 PB)
constexpr double kMaxTimeUs = 1e12;        // an allreduce's time (11.6 days)
constexpr int kMaxBootstrap = 100000;      // --bootstrap replicates (each refits the model)

// An option's value: UserError "OPTION V is not a finite number" / "OPTION must be …, got V"
// unless lo < v (lo ≤ v with lo_inclusive) and v ≤ hi. `hint` ends the message ("" none).
void check_option(const std::string& option, double v, double lo, bool lo_inclusive, double hi,
                  const std::string& hint);

// A measured value read from `file`: UserError "FILE: field 'NAME' is V, more than any
// real measurement (at most HI UNIT): is the file damaged?" above hi (or not finite).
void check_measured(const std::string& file, const std::string& field, double v, double hi, const std::string& unit);

}  // namespace cnnscale::report
