// augment_tool.cpp — runs the --augment pipeline on one raw image for the torchvision
// cross-check (tests/data/augment_torchvision.sh):
//   augment_tool LIST SEED EPOCH COUNT C H W IN.raw OUT.raw
// writes COUNT augmented copies (samples g = 0..COUNT-1 of EPOCH) of the C×H×W uint8 image
// IN.raw to OUT.raw and prints, per sample, "g" then per step "crop SIZE PAD TOP LEFT",
// "hflip 0|1", "rrc SIZE TOP LEFT H W" or "center SIZE"; --eval applies the evaluation
// pipeline (Augmenter::for_evaluation) instead.
//   augment_tool --rrc-draws H W COUNT SEED
// prints the RandomResizedCrop draw "top left h w" of samples 0..COUNT-1 (epoch 0) of an
// H×W image (tests/data/rrc_torchvision.sh).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "data/augment.hpp"

using namespace cnnscale;

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--rrc-draws") {  // H W COUNT SEED: "top left h w" per sample
    const SampleShape shape{1, std::atoi(argv[2]), std::atoi(argv[3])};
    const int64_t count = std::atoll(argv[4]);
    const uint64_t seed = std::strtoull(argv[5], nullptr, 10);
    const AugmentStep rrc = parse_augment("rrc8")[0];
    for (int64_t g = 0; g < count; ++g) {
      const AugmentDraw d = augment_draw(rrc, 0, seed, 0, g, shape);
      std::printf("%d %d %d %d\n", d.top, d.left, d.h, d.w);
    }
    return 0;
  }
  const bool eval = argc == 11 && std::string(argv[10]) == "--eval";
  if (argc != 10 && !eval) {
    std::fprintf(stderr, "usage: augment_tool LIST SEED EPOCH COUNT C H W IN.raw OUT.raw [--eval]\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int epoch = std::atoi(argv[3]);
  const int64_t count = std::atoll(argv[4]);
  const SampleShape shape{std::atoi(argv[5]), std::atoi(argv[6]), std::atoi(argv[7])};
  std::ifstream in(argv[8], std::ios::binary);
  std::vector<uint8_t> img((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(img.size()) != shape.numel()) {
    std::fprintf(stderr, "augment_tool: %s has %zu bytes, expected %lld\n", argv[8], img.size(),
                 static_cast<long long>(shape.numel()));
    return 2;
  }
  Augmenter aug(argv[1], shape, seed);
  if (eval) aug = aug.for_evaluation();
  std::ofstream out(argv[9], std::ios::binary);
  std::vector<uint8_t> dst(static_cast<size_t>(aug.output_shape().numel())), scratch;
  for (int64_t g = 0; g < count; ++g) {
    aug.apply(img.data(), dst.data(), epoch, g, scratch);
    out.write(reinterpret_cast<const char*>(dst.data()), static_cast<std::streamsize>(dst.size()));
    std::printf("%lld", static_cast<long long>(g));
    SampleShape cur = shape;
    for (size_t k = 0; k < aug.steps().size(); ++k) {
      const AugmentStep& s = aug.steps()[k];
      const AugmentDraw d = augment_draw(s, static_cast<int>(k), seed, epoch, g, cur);
      switch (s.kind) {
        case AugmentStep::Kind::crop: std::printf(" crop %d %d %d %d", s.size, s.pad, d.top, d.left); break;
        case AugmentStep::Kind::hflip: std::printf(" hflip %d", d.flip ? 1 : 0); break;
        case AugmentStep::Kind::rrc: std::printf(" rrc %d %d %d %d %d", s.size, d.top, d.left, d.h, d.w); break;
        case AugmentStep::Kind::center: std::printf(" center %d", s.size); break;
        case AugmentStep::Kind::resize: std::printf(" resize %d", s.size); break;
        case AugmentStep::Kind::flip3d:  // volumes: apply() above refuses them (images only here)
        case AugmentStep::Kind::transpose3d: std::printf(" %s %d", s.name.c_str(), d.axes); break;
      }
      if (s.kind == AugmentStep::Kind::rrc || s.kind == AugmentStep::Kind::center) cur = {cur.channels, s.size, s.size};
      if (s.kind == AugmentStep::Kind::resize) cur = resize_shape(cur, s.size);
    }
    std::printf("\n");
  }
  return 0;
}
