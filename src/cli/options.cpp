// options.cpp — see options.hpp.
#include "cli/options.hpp"

#include <fstream>
#include <iostream>

#include "launch/bootstrap.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

void print_help(const CommandSpec& spec, const po::options_description& desc) {
  std::cout << "Usage: " << spec.usage << "\n\n" << spec.summary << "\n\n" << desc << "\n";
  if (!spec.epilog.empty()) std::cout << spec.epilog << "\n";
}

namespace {

// Boost's error_with_option_name::what() replaces each %token% of its message by the option
// name or value the user gave, in a loop that never ends when that text holds the token
// itself: `--batch-size 'x%value%'` hung every subcommand (fuzz_train_config). The texts are
// copied with each '%' shown as \x25 first. (Its substitutions are protected: reached
// through a pointer to member named in a derived class, which C++ allows on the base.)
struct SubstitutionsOf : po::error_with_option_name {
  static constexpr auto member = &SubstitutionsOf::m_substitutions;
};

std::string error_text(const po::error& e) {
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
  if (!named) return e.what();
  po::error_with_option_name copy = *named;
  for (auto& [token, text] : copy.*SubstitutionsOf::member) {
    std::string safe;
    for (char c : text) safe += c == '%' ? std::string("\\x25") : std::string(1, c);
    text = safe;
  }
  return copy.what();
}

}  // namespace

ParsedOptions parse_options(const CommandSpec& spec, int argc, char** argv,
                            const po::options_description& desc,
                            const std::vector<Positional>& positional, bool allow_config) {
  ParsedOptions out;
  po::options_description all(desc);
  po::options_description meta("General");
  meta.add_options()("help,h", "show this help and exit");
  if (allow_config)
    meta.add_options()("config", po::value<std::string>(),
                       "INI file of long options (key = value, one per line); the command line wins");
  all.add(meta);
  po::positional_options_description pos;
  for (const auto& p : positional) pos.add(p.name.c_str(), p.max_count);
  const std::string hint = " (see `cnnscale " + spec.name + " --help`)";
  for (int i = 1; i < argc; ++i) {  // options that were removed: say why and what to do instead
    const std::string a = argv[i];
    if (a == "--allow-gpu-sharing" || a.rfind("--allow-gpu-sharing=", 0) == 0)
      fail_collective(launcher_rank_or_zero(), spec.name,
                      ": --allow-gpu-sharing was removed: the GPU path runs only over NCCL, which cannot put two "
                      "ranks on one GPU, so it had no working use. Start at most one task per GPU (srun "
                      "--ntasks-per-node=<GPUs per node> --gres=gpu:<GPUs per node>), or train on the CPU with "
                      "--backend mpi (no GPU is bound then, so any number of ranks per node works)");
  }
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), out.vm);
    if (out.vm.count("help")) {
      out.help = true;
      return out;
    }
    for (const auto& [name, value] : out.vm)
      if (!value.defaulted()) out.on_command_line.insert(name);
    if (allow_config && out.vm.count("config")) {
      const std::string path = out.vm["config"].as<std::string>();
      std::ifstream in(path);
      if (!in) fail("cannot read --config file '", path, "': no such file or not readable");
      try {
        po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), out.vm);
      } catch (const po::error& e) {
        fail("in --config file '", path, "': ", error_text(e), hint);
      }
    }
    po::notify(out.vm);
  } catch (const po::error& e) {
    // The launcher gives every rank the same command line: rank 0 says it once.
    fail_collective(launcher_rank_or_zero(), spec.name, ": ", error_text(e), hint);
  }
  return out;
}

}  // namespace cnnscale::cli
