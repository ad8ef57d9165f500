// fuzz_augment.cpp — libFuzzer target: `--augment LIST` (data/augment.hpp) through
// parse_augment() and the Augmenter, on a sample shape taken from the input's first bytes
// (an image C×H×W or a volume C×D×H×W, small), then one augmented sample (an image's uint8
// apply(), a volume's float apply_volume() and its label map) whose output must keep the
// sizes the Augmenter promised. A UserError is the expected answer to a list that does not
// fit the shape; anything else escaping (or a sanitizer report) is a defect.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/augment.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5 || size > 4096) return -1;
  cnnscale::SampleShape s;
  s.channels = 1 + data[0] % 4;
  s.height = 1 + data[1] % 40;
  s.width = 1 + data[2] % 40;
  s.depth = data[3] % 2 ? 1 + data[4] % 12 : 0;
  if (s.depth > 0) s.height = 1 + s.height % 12, s.width = 1 + s.width % 12;
  const std::string list(reinterpret_cast<const char*>(data + 5), size - 5);
  try {
    const cnnscale::Augmenter a(list, s, /*seed=*/data[0]);
    const cnnscale::SampleShape out = a.output_shape();
    if (out.numel() > (int64_t{1} << 20)) return 0;  // a valid but large rrc<S>/resize<S>: resampling, not parsing
    if (a.volume()) {
      std::vector<float> x(static_cast<size_t>(s.numel()), 1.f), scratch;
      a.apply_volume(x.data(), 1, 7, scratch);
      std::vector<int32_t> map(static_cast<size_t>(s.plane()), 2), ms;
      cnnscale::augment_label_map(a, map.data(), 1, 7, 255, ms);
    } else {
      std::vector<uint8_t> img(static_cast<size_t>(s.numel()), 9), dst(static_cast<size_t>(out.numel())), scratch;
      a.apply(img.data(), dst.data(), 1, 7, scratch);
      (void)a.for_evaluation();
    }
  } catch (const cnnscale::UserError&) {
  }
  return 0;
}
