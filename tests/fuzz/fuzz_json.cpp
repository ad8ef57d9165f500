// fuzz_json.cpp — libFuzzer target: the bounded JSON parser every JSON cnnscale reads goes
// through (util/json_bounded.hpp: run.json, metrics.jsonl lines, run.lock, dataset.json,
// TF_CONFIG, data-bench's --json). Its contract: a text nested deeper than kMaxJsonDepth is
// refused with nlohmann::json::out_of_range before nlohmann parses it, malformed text with
// another nlohmann::json::exception; a document that parses is at most that deep, so that
// copying, printing and comparing it (what report and watch do) cannot exhaust the stack.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "util/json_bounded.hpp"

namespace {

int depth(const nlohmann::json& j) {
  if (!j.is_structured()) return 0;
  int d = 0;
  for (const auto& v : j) d = std::max(d, depth(v));
  return d + 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return -1;  // watch's line cap
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = cnnscale::parse_json(text);
  } catch (const nlohmann::json::exception&) {
    return 0;
  }
  if (depth(j) > cnnscale::kMaxJsonDepth) std::abort();  // deeper than the bound let through
  const nlohmann::json copy = j;                          // what report and watch do with it
  if (copy != j) std::abort();
  (void)j.dump();
  return 0;
}
