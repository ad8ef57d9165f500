// fuzz_launch_env.cpp — libFuzzer target: the launcher environments cnnscale reads before
// MPI starts (launch/detect_launcher.hpp: PMIx, SLURM_* — node lists such as
// node[001-004,010] and task counts such as 2(x3),1 —, OMPI_COMM_WORLD_*, torchrun's RANK /
// WORLD_SIZE / LOCAL_*, CUDA_VISIBLE_DEVICES), through detect_launcher(),
// validate_launch_info() and check_pmi_available() on a map_env() of the input. The input
// is NAME=VALUE lines; a name seen first in the dictionary (tests/fuzz/launch_env.dict) is
// what makes the fuzzer reach the parsers. A UserError naming the variable is the expected
// answer to a malformed value; anything else escaping is a defect.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "launch/detect_launcher.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return -1;  // an environment block of this size says all it can
  std::map<std::string, std::string> vars;
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(at, nl - at);
    const size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0 && line.find('\0') == std::string::npos)
      vars[line.substr(0, eq)] = line.substr(eq + 1);
    at = nl + 1;
  }
  try {
    const cnnscale::LaunchInfo info = cnnscale::detect_launcher(cnnscale::map_env(vars));
    cnnscale::validate_launch_info(info);
    cnnscale::check_pmi_available(info);
  } catch (const cnnscale::UserError&) {
  }
  return 0;
}
