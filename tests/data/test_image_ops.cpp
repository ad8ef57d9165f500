// test_image_ops.cpp — the prep-time image transforms on hand-computed values: PIL's
// antialiased bilinear resize (upsampling 2→4 and downsampling 4→2 and 6→2 pixels),
// Resize(S)'s output size, CenterCrop's half-to-even rounding and its zero padding;
// decode_image's refusal of non-image files. (Byte-exact agreement with PIL/torchvision
// on real JPEG/PNG files: imagefolder_pil.sh.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/fixture.hpp"
#include "data/image_decode.hpp"
#include "util/error.hpp"

using namespace cnnscale;

namespace {
// A 1-row image whose R channel is `r`, G = 0, B = 255.
RgbImage row(const std::vector<int>& r) {
  RgbImage im;
  im.width = static_cast<int>(r.size());
  im.height = 1;
  for (int v : r) im.pixels.insert(im.pixels.end(), {static_cast<uint8_t>(v), 0, 255});
  return im;
}
std::vector<int> red(const RgbImage& im) {
  std::vector<int> v;
  for (size_t i = 0; i < im.pixels.size(); i += 3) v.push_back(im.pixels[i]);
  return v;
}
}  // namespace

TEST(ImageOps, BilinearResizeIsPillows) {
  // 2 → 4 (upsampling, support 1): centres 0.25, 0.75, 1.25, 1.75 in input pixels; the
  // triangle weights clipped at the border give a, ¾a+¼b, ¼a+¾b, b.
  EXPECT_EQ(red(resize_bilinear(row({0, 200}), 4, 1)), (std::vector<int>{0, 50, 150, 200}));
  // 4 → 2 (reduction 2: support 2, the triangle stretched ×2): out0's centre is 1.0, taps
  // 0..2 at distances 0.25, 0.25, 0.75 (in units of 2 pixels) weigh 0.75, 0.75, 0.25 (/1.75):
  // in = {0, 70, 140, 210} → out0 = (70·.75 + 140·.25)/1.75 = 50; out1 (centre 3.0, taps
  // 1..3 weighing .25, .75, .75) = (70·.25 + 140·.75 + 210·.75)/1.75 = 160.
  EXPECT_EQ(red(resize_bilinear(row({0, 70, 140, 210}), 2, 1)), (std::vector<int>{50, 160}));
  // 6 → 2 (reduction 3): the weights are normalised, so a constant row stays constant.
  EXPECT_EQ(red(resize_bilinear(row({90, 90, 90, 90, 90, 90}), 2, 1)), (std::vector<int>{90, 90}));
  // G and B untouched by the filter's normalisation (weights sum to 1 in fixed point).
  const RgbImage r = resize_bilinear(row({0, 200}), 4, 1);
  for (size_t i = 0; i < r.pixels.size(); i += 3) {
    EXPECT_EQ(r.pixels[i + 1], 0);
    EXPECT_EQ(r.pixels[i + 2], 255);
  }
}

TEST(ImageOps, ResizeShorterSideSize) {
  RgbImage im;
  im.width = 50;
  im.height = 37;
  im.pixels.assign(50 * 37 * 3, 7);
  RgbImage r = resize_shorter(im, 24);  // 24 · 50 / 37 = 32.43 → 32
  EXPECT_EQ(r.width, 32);
  EXPECT_EQ(r.height, 24);
  EXPECT_EQ(r.pixels, std::vector<uint8_t>(32 * 24 * 3, 7));
  im.width = 37;
  im.height = 61;
  im.pixels.assign(37 * 61 * 3, 7);
  r = resize_shorter(im, 24);  // 24 · 61 / 37 = 39.57 → 39
  EXPECT_EQ(r.width, 24);
  EXPECT_EQ(r.height, 39);
}

TEST(ImageOps, CenterCropRoundsHalfToEvenAndPads) {
  // Python's round: 5 wide → 2 starts at round(1.5) = 2, 7 wide → 2 at round(2.5) = 2.
  EXPECT_EQ(red(center_crop(row({0, 1, 2, 3, 4}), 1)), (std::vector<int>{2}));  // (5 − 1)/2 = 2
  RgbImage im;
  im.width = 5;
  im.height = 2;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 5; ++x) im.pixels.insert(im.pixels.end(), {static_cast<uint8_t>(10 * y + x), 0, 0});
  RgbImage c = center_crop(im, 2);  // top (2−2)/2 = 0, left round(1.5) = 2
  EXPECT_EQ(red(c), (std::vector<int>{2, 3, 12, 13}));
  im.width = 7;
  im.height = 2;
  im.pixels.clear();
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 7; ++x) im.pixels.insert(im.pixels.end(), {static_cast<uint8_t>(10 * y + x), 0, 0});
  c = center_crop(im, 2);  // left round(2.5) = 2
  EXPECT_EQ(red(c), (std::vector<int>{2, 3, 12, 13}));
  // Padding: 2×1 → 5×5: left ⌊3/2⌋ = 1, top ⌊4/2⌋ = 2; the rest zeros.
  c = center_crop(row({100, 200}), 5);
  ASSERT_EQ(c.width, 5);
  ASSERT_EQ(c.height, 5);
  std::vector<int> want(25, 0);
  want[2 * 5 + 1] = 100;
  want[2 * 5 + 2] = 200;
  EXPECT_EQ(red(c), want);
}

TEST(ImageOps, DecodeRefusesWhatIsNotJpegOrPng) {
  const std::string dir = test::make_temp_dir("imgops");
  std::ofstream(dir + "/x.jpg") << "GIF89a not really";
  try {
    decode_image(dir + "/x.jpg");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/x.jpg is neither a JPEG nor a PNG file"), std::string::npos) << e.what();
  }
  // A PNG signature followed by garbage: libpng's error, named.
  std::ofstream(dir + "/y.png", std::ios::binary) << std::string("\x89PNG\r\n\x1a\n", 8) << "garbage-garbage-garbage";
  try {
    decode_image(dir + "/y.png");
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/y.png is not a readable PNG ("), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
