// options.hpp — Boost.ProgramOptions glue shared by every subcommand.
//
// parse_options() parses argv (after the subcommand name) against a description,
// optionally merges an INI file given with --config FILE (command line wins), turns
// every Boost error into a UserError that names the option and points at --help,
// and reports whether --help was asked for (the caller then prints usage).
#pragma once
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

namespace cnnscale::cli {

// A default's text in --help: the shortest form that reads back as the same double
// ("0.1", not Boost's "0.10000000000000001").
inline std::string shortest(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

namespace po = boost::program_options;

struct ParsedOptions {
  po::variables_map vm;
  bool help = false;
  std::set<std::string> on_command_line;  // options given on the command line (not --config, not defaults)
};

struct CommandSpec {
  std::string name;        // e.g. "train"
  std::string usage;       // e.g. "cnnscale train [options]"
  std::string summary;     // one paragraph shown by --help
  std::string epilog;      // examples etc., shown after the options
};

// positional: names of options that take positional arguments (max_count -1 = unlimited).
struct Positional {
  std::string name;
  int max_count = -1;
};

ParsedOptions parse_options(const CommandSpec& spec, int argc, char** argv,
                            const po::options_description& desc,
                            const std::vector<Positional>& positional = {},
                            bool allow_config = false);

void print_help(const CommandSpec& spec, const po::options_description& desc);

}  // namespace cnnscale::cli
