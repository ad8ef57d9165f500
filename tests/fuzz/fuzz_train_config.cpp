// fuzz_train_config.cpp — libFuzzer target: `cnnscale train --config FILE`, the INI file (keys
// are the long options; Boost.ProgramOptions' parse_config_file) and every option value train
// parses from text (--image-size, --timeline-steps A:B, --loss, --class-weights, --precision,
// --on-nan, --resume, --progress, --tf32 ...), then validate(): through the product's own
// parse_train_args() (cli/train_args.cpp), the code cmd_train runs before any world starts.
// Input: [0] bit 0: also give --synthetic on the command line (the command line wins over
// --config), bit 1: also --batch-size 3; then the INI file's bytes.
// A UserError is the expected answer to a file or value train refuses; anything else escaping
// (a boost exception parse_options did not turn into a UserError, std::out_of_range from a
// number's text), a crash or a sanitizer report is a defect. Options that parse are checked:
// a positive batch size and thread count, an image size of positive sides, a timeline
// window that starts no later than it ends.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli/train_args.hpp"
#include "util/error.hpp"

namespace {

const std::string& ini_path() {
  // Never destroyed: RemoveAtExit (a global, made before it) uses it at exit.
  static const std::string& path = *new std::string("/dev/shm/cnnscale-fuzz-config-" + std::to_string(getpid()) + ".ini");
  return path;
}

struct RemoveAtExit {
  ~RemoveAtExit() { unlink(ini_path().c_str()); }
} remove_at_exit;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (64 << 10)) return -1;
  {
    std::ofstream f(ini_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
    if (!f) std::abort();
  }
  std::vector<std::string> args = {"train", "--config", ini_path()};
  if (data[0] & 1) args.push_back("--synthetic");
  if (data[0] & 2) args.insert(args.end(), {"--batch-size", "3"});
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  cnnscale::cli::TrainArgs a;
  try {
    a = cnnscale::cli::parse_train_args(static_cast<int>(args.size()), argv.data(), 2);
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "parsed\n");
  if (a.help) return 0;
  const cnnscale::TrainOptions& o = a.o;
  if ((data[0] & 2) && o.batch_size != 3) std::abort();  // the command line wins
  if ((data[0] & 1) && !o.data.synthetic) std::abort();
  if (o.batch_size <= 0 || o.threads <= 0) std::abort();
  const cnnscale::SampleShape& s = o.data.synthetic_shape;
  if (o.data.synthetic && (s.channels <= 0 || s.height <= 0 || s.width <= 0)) std::abort();
  if (o.timeline_steps.given() && o.timeline_steps.first > o.timeline_steps.last) std::abort();
  return 0;
}
