// test_resample.cpp — the vectorised resampler (PlaneResampler: both passes as weighted
// rows, the horizontal one on a transposed window) gives exactly the bytes of Pillow's
// loop (resample_bilinear_scalar) on every kind of size pair: up and down by small and
// large factors, one axis unchanged, 1-pixel sides, sides that are and are not multiples
// of 16 (the transposes' blocks), windows read in place from a larger plane, the mirrored
// output (hflip folded in), and a resampler reused across sizes; plus the transposes alone
// and the extreme values (all 0, all 255, a 0/255 checkerboard: the clip to uint8).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "data/resample.hpp"

using namespace cnnscale;

namespace {

std::vector<uint8_t> random_plane(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(w) * h);
  for (auto& v : p) v = static_cast<uint8_t>(rng() & 0xFF);
  return p;
}

std::vector<uint8_t> reference(const std::vector<uint8_t>& src, int in_w, int in_h, int out_w, int out_h, bool flip) {
  std::vector<uint8_t> out(static_cast<size_t>(out_w) * out_h);
  resample_bilinear_scalar(src.data(), in_w, in_h, 1, out.data(), out_w, out_h);
  if (flip)
    for (int y = 0; y < out_h; ++y) std::reverse(out.begin() + y * out_w, out.begin() + (y + 1) * out_w);
  return out;
}

// The window (top, left, w × h) of a W × H plane through PlaneResampler, read in place.
std::vector<uint8_t> fast(PlaneResampler& r, const std::vector<uint8_t>& plane, int W, int top, int left, int w, int h,
                          int out_w, int out_h, bool flip) {
  std::vector<uint8_t> out(static_cast<size_t>(out_w) * out_h);
  r.set(w, h, out_w, out_h);
  r.run(plane.data() + static_cast<size_t>(top) * W + left, W, out.data(), flip);
  return out;
}

std::vector<uint8_t> window(const std::vector<uint8_t>& plane, int W, int top, int left, int w, int h) {
  std::vector<uint8_t> out;
  for (int y = 0; y < h; ++y)
    out.insert(out.end(), plane.begin() + (top + y) * W + left, plane.begin() + (top + y) * W + left + w);
  return out;
}

}  // namespace

TEST(Resample, TransposeMatchesTheDefinition) {
  for (auto [rows, cols] : std::vector<std::pair<int, int>>{{1, 1}, {16, 16}, {17, 33}, {40, 7}, {5, 64}, {333, 250}}) {
    const auto src = random_plane(cols + 3, rows, 7);  // stride cols + 3
    std::vector<uint8_t> dst(static_cast<size_t>(cols) * (rows + 5), 0xAB);
    transpose_u8(src.data(), cols + 3, dst.data(), rows + 5, rows, cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(dst[static_cast<size_t>(c) * (rows + 5) + r], src[static_cast<size_t>(r) * (cols + 3) + c])
            << rows << "x" << cols << " at " << r << "," << c;
    for (int c = 0; c < cols; ++c)  // the padding between output rows is untouched
      for (int r = rows; r < rows + 5; ++r) ASSERT_EQ(dst[static_cast<size_t>(c) * (rows + 5) + r], 0xAB);
  }
}

TEST(Resample, SameBytesAsPillowsLoopOnEverySizePair) {
  const std::vector<int> sides = {1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 64, 100, 163, 224, 225, 320, 500};
  PlaneResampler r;  // reused across all sizes
  int pairs = 0;
  for (int in_w : sides)
    for (int out_w : {1, 5, 16, 24, 224, 257})
      for (int in_h : {1, 16, 33, 224, 320}) {
        const int out_h = (in_w + out_w + in_h) % 3 == 0 ? out_w : (in_h * 7 + 3) % 300 + 1;
        const auto src = random_plane(in_w, in_h, static_cast<uint32_t>(in_w * 1000 + in_h));
        for (bool flip : {false, true}) {
          const auto want = reference(src, in_w, in_h, out_w, out_h, flip);
          ASSERT_EQ(fast(r, src, in_w, 0, 0, in_w, in_h, out_w, out_h, flip), want)
              << in_w << "x" << in_h << " -> " << out_w << "x" << out_h << (flip ? " flipped" : "");
          ++pairs;
        }
      }
  EXPECT_EQ(pairs, 17 * 6 * 5 * 2);
}

TEST(Resample, RandomResizedCropWindowsReadInPlace) {
  // The reader's case: windows of a ≤ 320 px image (prep --store original-max 320) to 224.
  std::mt19937 rng(3);
  PlaneResampler r;
  for (int i = 0; i < 300; ++i) {
    const int W = 100 + static_cast<int>(rng() % 221), H = 100 + static_cast<int>(rng() % 221);
    const int w = 1 + static_cast<int>(rng() % W), h = 1 + static_cast<int>(rng() % H);
    const int left = static_cast<int>(rng() % (W - w + 1)), top = static_cast<int>(rng() % (H - h + 1));
    const int size = i % 3 == 0 ? 224 : 1 + static_cast<int>(rng() % 300);
    const bool flip = rng() & 1;
    const auto plane = random_plane(W, H, static_cast<uint32_t>(i));
    ASSERT_EQ(fast(r, plane, W, top, left, w, h, size, size, flip),
              reference(window(plane, W, top, left, w, h), w, h, size, size, flip))
        << "window " << w << "x" << h << " at " << top << "," << left << " of " << W << "x" << H << " -> " << size;
  }
}

TEST(Resample, ExtremeValuesClipLikePillow) {
  PlaneResampler r;
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<uint8_t> src(97 * 61);
    for (int y = 0; y < 61; ++y)
      for (int x = 0; x < 97; ++x) src[y * 97 + x] = kind == 0 ? 0 : kind == 1 ? 255 : ((x + y) % 2) * 255;
    for (auto [ow, oh] : std::vector<std::pair<int, int>>{{224, 224}, {13, 5}, {97, 200}, {300, 61}}) {
      const auto got = fast(r, src, 97, 0, 0, 97, 61, ow, oh, false);
      ASSERT_EQ(got, reference(src, 97, 61, ow, oh, false)) << kind << " -> " << ow << "x" << oh;
      if (kind < 2) {  // a constant image stays that constant (the weights sum to one)
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [&](uint8_t v) { return v == (kind ? 255 : 0); }));
      }
    }
  }
}

TEST(Resample, ResampleBilinearTakesTheFastPathForPlanesAndAgrees) {
  const auto src = random_plane(123, 77, 9);
  std::vector<uint8_t> a(224 * 224), b(224 * 224);
  resample_bilinear(src.data(), 123, 77, 1, a.data(), 224, 224);
  resample_bilinear_scalar(src.data(), 123, 77, 1, b.data(), 224, 224);
  EXPECT_EQ(a, b);
}
