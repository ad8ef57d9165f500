// train_args.hpp — `cnnscale train`'s options: the command line and a --config INI file
// (keys are the long options without dashes; the command line wins) parsed into checked
// TrainOptions, every mistake that needs no other rank reported here as a UserError
// (before any world starts). Apart from cmd_train so that the fuzzing target
// (tests/fuzz/fuzz_train_config.cpp) drives the same parsing with hostile INI files.
#pragma once
#include <string>

#include "train/train_options.hpp"

namespace cnnscale::cli {

struct TrainArgs {
  TrainOptions o;
  bool help = false;                   // --help was given: usage printed, nothing else parsed
  std::string backend, device;         // as given: comm's parsers (parse_backend, parse_device) read them
  bool data_threads_defaulted = true;  // --data-threads given neither on the command line nor in --config
};

// argv[0] is the subcommand name; default_threads: --threads' default (the templates'
// OMP_NUM_THREADS: nn::default_threads()).
TrainArgs parse_train_args(int argc, char** argv, int default_threads);

}  // namespace cnnscale::cli
