// fuzz_onnx_import.cpp — libFuzzer target: `--model FILE.onnx`, the ONNX importer
// (nn/onnx_import.cpp: protobuf bytes through Debian's libonnx and onnx::checker into a Graph by
// GraphBuilder, constant folding of torch's shape arithmetic included), through the product's
// own onnx_model_graph() on a file holding the input.
// Input: one byte choosing the data's shape (even: images 3×8×8; odd: volumes 1×8×8×8), then
// the file's bytes. A UserError is the expected answer to a file that is not a model cnnscale
// trains; anything else escaping, a crash or a sanitizer report is a defect. A graph that
// imports must end in what the import promises: `classes` (4) logits per sample or a dense
// output of the input's size, and its parameters fill the flat layout exactly.
// CNNSCALE_FUZZ_PRINT=1: say whether each input imported (and why not), to check seeds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "nn/onnx_import.hpp"
#include "util/error.hpp"

namespace {

// One file per process, rewritten for each input (/dev/shm: no disk traffic).
const std::string& model_path() {
  // Never destroyed: RemoveAtExit (a global, made before it) uses it at exit.
  static const std::string& path = *new std::string("/dev/shm/cnnscale-fuzz-onnx-" + std::to_string(getpid()) + ".onnx");
  return path;
}

struct RemoveAtExit {
  ~RemoveAtExit() { unlink(model_path().c_str()); }
} remove_at_exit;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 20)) return -1;
  cnnscale::SampleShape in;
  if (data[0] & 1) in = {1, 8, 8, 8};
  else in = {3, 8, 8, 0};
  {
    std::ofstream f(model_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
    if (!f) std::abort();  // /dev/shm full: not the product's defect, but no run either
  }
  constexpr int kClasses = 4;
  cnnscale::nn::ModelGraph m;
  try {
    m = cnnscale::nn::onnx_model_graph(model_path(), in, kClasses);
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "refused: %s\n", e.what());
    return 0;
  }
  if (std::getenv("CNNSCALE_FUZZ_PRINT")) std::fprintf(stderr, "imported: %zu nodes\n", m.graph.nodes.size());
  const cnnscale::nn::Graph& g = m.graph;
  if (g.classes != kClasses || g.nodes.empty() || g.output <= 0 || g.output >= g.tensor_count()) std::abort();
  if (g.dense_output) {
    if (g.out_h != in.height || g.out_w != in.width || g.out_d != in.depth) std::abort();
  } else if (g.out_positions() != 1) {
    std::abort();
  }
  size_t sum = 0;
  for (const auto& p : g.params) sum += p.info.numel;
  if (sum != g.param_count) std::abort();
  return 0;
}
