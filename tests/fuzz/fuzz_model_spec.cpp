// fuzz_model_spec.cpp — libFuzzer target: the `--model` one-line spec grammar (nn/spec.hpp),
// through the product's own parse_spec(). A UserError is the expected answer to a bad spec;
// anything else escaping (an InternalError, std::out_of_range, a crash, a sanitizer report)
// is a defect. A spec that parses must print canonically (format_spec) and that text must
// parse to the same canonical text: the round trip docs/models.md promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nn/spec.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return -1;  // --model is one command-line word
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string canon;
  try {
    canon = cnnscale::nn::format_spec(cnnscale::nn::parse_spec(text));
  } catch (const cnnscale::UserError&) {
    return 0;
  }
  std::string again;
  try {
    again = cnnscale::nn::format_spec(cnnscale::nn::parse_spec(canon));
  } catch (const cnnscale::UserError& e) {
    std::abort();  // the canonical text of a spec that parsed is refused
  }
  if (again != canon) std::abort();  // the canonical text is not a fixed point
  return 0;
}
