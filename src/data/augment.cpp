// augment.cpp — see augment.hpp.
#include "data/augment.hpp"

#include <algorithm>
#include <cstring>
#include <regex>

#include "data/sampler.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kAugmentSalt = 0x6175676d656e7431ull;  // "augment1"

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

std::string augment_valid_names() {
  return "crop<S>pad<P> (RandomCrop(S, padding=P), S = the image size, e.g. crop32pad4) and hflip "
         "(RandomHorizontalFlip(p=0.5)), comma-separated, or none";
}

std::vector<AugmentStep> parse_augment(const std::string& list) {
  std::vector<AugmentStep> steps;
  const std::string all = trim(list);
  if (all.empty() || all == "none") return steps;
  static const std::regex crop_re("crop([0-9]{1,5})pad([0-9]{1,5})");
  size_t at = 0;
  while (true) {
    const size_t comma = all.find(',', at);
    const std::string name = trim(all.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    AugmentStep s;
    s.name = name;
    std::smatch m;
    if (name == "hflip") {
      s.kind = AugmentStep::Kind::hflip;
    } else if (std::regex_match(name, m, crop_re)) {
      s.kind = AugmentStep::Kind::crop;
      s.size = std::stoi(m[1]);
      s.pad = std::stoi(m[2]);
      if (s.size < 1) fail("--augment ", name, ": the crop size must be at least 1");
    } else {
      fail("--augment '", list, "': unknown step '", name, "'; valid steps are ", augment_valid_names());
    }
    steps.push_back(s);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return steps;
}

AugmentDraw augment_draw(const AugmentStep& step, int k, uint64_t seed, int epoch, int64_t g, SampleShape shape) {
  uint64_t h = mix64(seed ^ kAugmentSalt);
  h = mix64(h + kGolden * (static_cast<uint64_t>(epoch) + 1));
  h = mix64(h ^ mix64(static_cast<uint64_t>(g) + kGolden));
  h = mix64(h + kGolden * (static_cast<uint64_t>(k) + 1));
  SplitMix64 rng(h);
  AugmentDraw d;
  if (step.kind == AugmentStep::Kind::crop) {
    d.top = static_cast<int>(rng.below(static_cast<uint64_t>(shape.height + 2 * step.pad - step.size + 1)));
    d.left = static_cast<int>(rng.below(static_cast<uint64_t>(shape.width + 2 * step.pad - step.size + 1)));
  } else {
    d.flip = (rng.next() >> 63) != 0;
  }
  return d;
}

void crop_padded(const uint8_t* src, uint8_t* dst, SampleShape shape, int pad, int top, int left) {
  const int H = shape.height, W = shape.width;
  const int dy = top - pad, dx = left - pad;  // dst(y, x) = src(y + dy, x + dx)
  const int x0 = std::clamp(-dx, 0, W), x1 = std::clamp(W - dx, 0, W);  // dst columns with a source pixel
  for (int c = 0; c < shape.channels; ++c) {
    const uint8_t* s = src + int64_t{c} * H * W;
    uint8_t* d = dst + int64_t{c} * H * W;
    for (int y = 0; y < H; ++y) {
      uint8_t* row = d + int64_t{y} * W;
      const int sy = y + dy;
      if (sy < 0 || sy >= H || x0 >= x1) {
        std::memset(row, 0, static_cast<size_t>(W));
        continue;
      }
      std::memset(row, 0, static_cast<size_t>(x0));
      std::memcpy(row + x0, s + int64_t{sy} * W + x0 + dx, static_cast<size_t>(x1 - x0));
      std::memset(row + x1, 0, static_cast<size_t>(W - x1));
    }
  }
}

void flip_horizontal(const uint8_t* src, uint8_t* dst, SampleShape shape) {
  const int W = shape.width;
  const int64_t rows = int64_t{shape.channels} * shape.height;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + r * W;
    uint8_t* d = dst + r * W;
    for (int x = 0; x < W; ++x) d[x] = s[W - 1 - x];
  }
}

Augmenter::Augmenter(const std::string& list, SampleShape shape, uint64_t seed)
    : steps_(parse_augment(list)), shape_(shape), seed_(seed) {
  for (const auto& s : steps_) {
    if (s.kind != AugmentStep::Kind::crop) continue;
    if (shape.height != s.size || shape.width != s.size)
      fail("--augment ", s.name, " cuts ", s.size, "x", s.size, " windows but the images of this data set are ",
           shape.height, "x", shape.width, "; ",
           shape.height == shape.width
               ? "use crop" + std::to_string(shape.height) + "pad" + std::to_string(s.pad) +
                     " (the crop keeps the sample shape)"
               : std::string("crop needs square images (prep them with a square --center-crop)"));
  }
}

void Augmenter::apply(const uint8_t* src, uint8_t* dst, int epoch, int64_t g, std::vector<uint8_t>& scratch) const {
  const int64_t n = shape_.numel();
  if (steps_.empty()) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  scratch.resize(static_cast<size_t>(2 * n));
  uint8_t* bufs[2] = {scratch.data(), scratch.data() + n};
  const uint8_t* cur = src;
  for (size_t k = 0; k < steps_.size(); ++k) {
    uint8_t* out = k + 1 == steps_.size() ? dst : bufs[k % 2];
    const AugmentStep& s = steps_[k];
    const AugmentDraw d = augment_draw(s, static_cast<int>(k), seed_, epoch, g, shape_);
    if (s.kind == AugmentStep::Kind::crop) crop_padded(cur, out, shape_, s.pad, d.top, d.left);
    else if (d.flip) flip_horizontal(cur, out, shape_);
    else std::memcpy(out, cur, static_cast<size_t>(n));
    cur = out;
  }
}

}  // namespace cnnscale
