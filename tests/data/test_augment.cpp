// test_augment.cpp — the --augment pipeline: grammar and its errors; crop and flip
// geometry against hand-computed boxes; the draws' ranges, balance and independence
// of everything but (seed, epoch, sample); composition order; rrc/center shapes, the
// evaluation pipeline and RandomResizedCrop's windows and fallback. (Pixel equality with
// torchvision: augment_torchvision.sh.)
#include <gtest/gtest.h>

#include <set>

#include "data/augment.hpp"
#include "util/error.hpp"
#include "common/user_error.hpp"

using namespace cnnscale;

namespace {

const SampleShape kCifar{3, 32, 32};

// pixel(c, y, x) of a test image: distinct, never 0.
uint8_t px(int c, int y, int x) { return static_cast<uint8_t>(1 + (c * 97 + y * 31 + x * 7) % 255); }

std::vector<uint8_t> test_image(SampleShape s) {
  std::vector<uint8_t> v(static_cast<size_t>(s.numel()));
  for (int c = 0; c < s.channels; ++c)
    for (int y = 0; y < s.height; ++y)
      for (int x = 0; x < s.width; ++x) v[(c * s.height + y) * s.width + x] = px(c, y, x);
  return v;
}

uint8_t at(const std::vector<uint8_t>& v, SampleShape s, int c, int y, int x) {
  return v[static_cast<size_t>((c * s.height + y) * s.width + x)];
}

std::string error_of(const std::function<void()>& f) { return test::user_error_of(f); }

}  // namespace

TEST(Augment, Grammar) {
  EXPECT_TRUE(parse_augment("").empty());
  EXPECT_TRUE(parse_augment("none").empty());
  auto s = parse_augment("crop32pad4,hflip");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].kind, AugmentStep::Kind::crop);
  EXPECT_EQ(s[0].size, 32);
  EXPECT_EQ(s[0].pad, 4);
  EXPECT_EQ(s[1].kind, AugmentStep::Kind::hflip);
  s = parse_augment(" hflip , crop28pad2 ");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].size, 28);
  EXPECT_EQ(s[1].pad, 2);
  for (const char* bad : {"vflip", "crop32,hflip", "hflip,,crop32pad4", "crop32pad", "cropXpad4", "HFLIP"}) {
    const std::string e = error_of([&] { parse_augment(bad); });
    EXPECT_NE(e.find("unknown step"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("valid steps are crop<S>pad<P>"), std::string::npos) << e;
    EXPECT_NE(e.find("hflip"), std::string::npos) << e;
  }
}

TEST(Augment, CropMustKeepTheShape) {
  const std::string e = error_of([] { Augmenter("crop32pad4", SampleShape{1, 28, 28}, 1); });
  EXPECT_NE(e.find("crop32pad4 cuts 32x32 windows but the images of this data set are 28x28; use crop28pad4"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(Augmenter("crop28pad4,hflip", SampleShape{1, 28, 28}, 1));
  EXPECT_NE(error_of([] { Augmenter("crop32pad4", SampleShape{3, 32, 40}, 1); }).find("square"), std::string::npos);
}

// RandomCrop(32, padding=4): the padded image is 40×40 with the original at [4, 36).
TEST(Augment, CropGeometryAgainstHandComputedBoxes) {
  const auto img = test_image(kCifar);
  std::vector<uint8_t> out(img.size());
  // top 0, left 0: rows 0..3 and columns 0..3 are padding; out(y, x) = img(y-4, x-4).
  crop_padded(img.data(), out.data(), kCifar, 4, 0, 0);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const uint8_t want = (y < 4 || x < 4) ? 0 : px(c, y - 4, x - 4);
        ASSERT_EQ(at(out, kCifar, c, y, x), want) << "c " << c << " y " << y << " x " << x;
      }
  // top 8, left 8 (the other corner): out(y, x) = img(y+4, x+4), rows/cols 28..31 padding.
  crop_padded(img.data(), out.data(), kCifar, 4, 8, 8);
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const uint8_t want = (y >= 28 || x >= 28) ? 0 : px(c, y + 4, x + 4);
        ASSERT_EQ(at(out, kCifar, c, y, x), want);
      }
  // top 4, left 4: the identity.
  crop_padded(img.data(), out.data(), kCifar, 4, 4, 4);
  EXPECT_EQ(out, img);
  // top 1, left 6: box of the original = rows [-3, 29), columns [2, 34).
  crop_padded(img.data(), out.data(), kCifar, 4, 1, 6);
  int zeros = 0;
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x) {
        const int sy = y - 3, sx = x + 2;
        const bool inside = sy >= 0 && sy < 32 && sx >= 0 && sx < 32;
        ASSERT_EQ(at(out, kCifar, c, y, x), inside ? px(c, sy, sx) : 0) << y << "," << x;
        zeros += !inside;
      }
  EXPECT_EQ(zeros, 3 * (32 * 32 - 29 * 30));  // 29 source rows × 30 source columns survive
}

TEST(Augment, FlipGeometry) {
  const SampleShape s{2, 3, 5};
  const auto img = test_image(s);
  std::vector<uint8_t> out(img.size()), back(img.size());
  flip_horizontal(img.data(), out.data(), s);
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 3; ++y)
      for (int x = 0; x < 5; ++x) EXPECT_EQ(at(out, s, c, y, x), px(c, y, 4 - x));
  flip_horizontal(out.data(), back.data(), s);
  EXPECT_EQ(back, img);
}

TEST(Augment, DrawsCoverTheRangeAndDependOnlyOnSeedEpochSample) {
  const auto steps = parse_augment("crop32pad4,hflip");
  std::set<int> tops, lefts;
  int flips = 0;
  const int n = 20000;
  for (int g = 0; g < n; ++g) {
    const AugmentDraw c = augment_draw(steps[0], 0, 7, 3, g, kCifar);
    ASSERT_GE(c.top, 0);
    ASSERT_LE(c.top, 8);
    ASSERT_GE(c.left, 0);
    ASSERT_LE(c.left, 8);
    tops.insert(c.top);
    lefts.insert(c.left);
    flips += augment_draw(steps[1], 1, 7, 3, g, kCifar).flip;
  }
  EXPECT_EQ(tops.size(), 9u);
  EXPECT_EQ(lefts.size(), 9u);
  // Fixed draws (no randomness in the test): a fair coin over 20000 samples stays
  // within 5 standard deviations (±354) of 10000.
  EXPECT_NEAR(flips, n / 2, 354);
  // Pure function of (seed, epoch, sample, step): same inputs, same draw; any change, a
  // different draw for most samples.
  int same_epoch = 0, same_seed = 0;
  for (int g = 0; g < 1000; ++g) {
    const AugmentDraw a = augment_draw(steps[0], 0, 7, 3, g, kCifar);
    const AugmentDraw b = augment_draw(steps[0], 0, 7, 3, g, kCifar);
    EXPECT_EQ(a.top, b.top);
    EXPECT_EQ(a.left, b.left);
    const AugmentDraw e = augment_draw(steps[0], 0, 7, 4, g, kCifar);
    const AugmentDraw s = augment_draw(steps[0], 0, 8, 3, g, kCifar);
    same_epoch += a.top == e.top && a.left == e.left;
    same_seed += a.top == s.top && a.left == s.left;
  }
  // 1/81 of draws agree by chance: about 12 of 1000.
  EXPECT_LT(same_epoch, 40);
  EXPECT_LT(same_seed, 40);
}

TEST(Augment, PipelineAppliesStepsInOrder) {
  const auto img = test_image(kCifar);
  Augmenter aug("crop32pad4,hflip", kCifar, 11);
  std::vector<uint8_t> out(img.size()), want(img.size()), tmp(img.size()), scratch;
  int flipped = 0;
  for (int64_t g = 0; g < 64; ++g) {
    aug.apply(img.data(), out.data(), 2, g, scratch);
    const AugmentDraw c = augment_draw(aug.steps()[0], 0, 11, 2, g, kCifar);
    const AugmentDraw f = augment_draw(aug.steps()[1], 1, 11, 2, g, kCifar);
    crop_padded(img.data(), tmp.data(), kCifar, 4, c.top, c.left);
    if (f.flip) flip_horizontal(tmp.data(), want.data(), kCifar);
    else want = tmp;
    ASSERT_EQ(out, want) << "sample " << g;
    flipped += f.flip;
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 64);
  // No steps: a copy.
  Augmenter none("none", kCifar, 11);
  EXPECT_FALSE(none.active());
  none.apply(img.data(), out.data(), 0, 0, scratch);
  EXPECT_EQ(out, img);
}

TEST(Augment, ResizedCropAndCenterShapesAndEvaluation) {
  auto s = parse_augment("rrc24,hflip,center20");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].kind, AugmentStep::Kind::rrc);
  EXPECT_EQ(s[0].size, 24);
  EXPECT_EQ(s[2].kind, AugmentStep::Kind::center);
  const SampleShape in{3, 40, 56};
  Augmenter a("rrc24,hflip", in, 3);
  EXPECT_EQ(a.output_shape().height, 24);
  EXPECT_EQ(a.output_shape().width, 24);
  EXPECT_EQ(a.output_shape().channels, 3);
  // Evaluation: center<S> for rrc<S>, nothing for hflip/crop.
  const Augmenter e = a.for_evaluation();
  ASSERT_EQ(e.steps().size(), 1u);
  EXPECT_EQ(e.steps()[0].kind, AugmentStep::Kind::center);
  EXPECT_EQ(e.steps()[0].size, 24);
  EXPECT_FALSE(Augmenter("crop32pad4,hflip", kCifar, 3).for_evaluation().active());
  // A crop after rrc is checked against rrc's output size.
  EXPECT_NE(error_of([&] { Augmenter("rrc24,crop32pad4", in, 3); })
                .find("crop32pad4 cuts 32x32 windows but the images reaching it are 24x24; use crop24pad4"),
            std::string::npos);
  EXPECT_NO_THROW(Augmenter("rrc24,crop24pad3", in, 3));
}

TEST(Augment, ResizedCropDrawsAreTorchvisionsWindows) {
  const AugmentStep rrc = parse_augment("rrc24")[0];
  for (SampleShape in : {SampleShape{3, 40, 56}, SampleShape{3, 32, 32}}) {
    double min_area = 1, max_area = 0;
    for (int g = 0; g < 5000; ++g) {
      const AugmentDraw d = augment_draw(rrc, 0, 5, 1, g, in);
      ASSERT_GT(d.h, 0);
      ASSERT_GT(d.w, 0);
      ASSERT_GE(d.top, 0);
      ASSERT_GE(d.left, 0);
      ASSERT_LE(d.top + d.h, in.height);
      ASSERT_LE(d.left + d.w, in.width);
      const double frac = static_cast<double>(d.h) * d.w / (in.height * in.width);
      min_area = std::min(min_area, frac);
      max_area = std::max(max_area, frac);
    }
    // Areas span torchvision's scale (0.08, 1) up to rounding of h and w.
    EXPECT_LT(min_area, 0.12) << in.height << "x" << in.width;
    EXPECT_GT(max_area, 0.8) << in.height << "x" << in.width;
  }
  // The fallback: 2×100 admits no window with ratio in [3/4, 4/3] and area >= 8 %
  // (h <= 2 forces w <= 3, area 6/200 < 8 %), so every sample takes the central crop
  // h = 2, w = round(2 · 4/3) = 3 at top 0, left (100 - 3) / 2 = 48.
  for (int g = 0; g < 100; ++g) {
    const AugmentDraw d = augment_draw(rrc, 0, 5, 1, g, SampleShape{1, 2, 100});
    EXPECT_EQ(d.h, 2);
    EXPECT_EQ(d.w, 3);
    EXPECT_EQ(d.top, 0);
    EXPECT_EQ(d.left, 48);
  }
}

// Segmentation: a label map follows its image pixel for pixel. The image's one channel holds
// each pixel's own label (1..250, never 0), so the augmented image and the augmented map must
// agree everywhere the crop kept a pixel; where it padded, the image holds 0 and the map the
// fill label. hflip and crop in both orders, many samples and epochs (flips and shifts drawn).
TEST(Augment, LabelMapsMoveWithTheirImages) {
  const SampleShape s{1, 26, 26};
  std::vector<uint8_t> img(static_cast<size_t>(s.numel()));
  std::vector<int32_t> map(img.size());
  for (size_t i = 0; i < img.size(); ++i) map[i] = img[i] = static_cast<uint8_t>(1 + (i * 37) % 250);
  for (const char* list : {"hflip,crop26pad3", "crop26pad3,hflip", "hflip", "crop26pad0"}) {
    Augmenter aug(list, s, 5);
    ASSERT_NO_THROW(aug.check_label_maps(255)) << list;
    std::vector<uint8_t> out(img.size()), scratch;
    std::vector<int32_t> m, mscratch;
    int moved = 0, padded = 0;
    for (int epoch = 0; epoch < 3; ++epoch)
      for (int64_t g = 0; g < 40; ++g) {
        aug.apply(img.data(), out.data(), epoch, g, scratch);
        m = map;
        augment_label_map(aug, m.data(), epoch, g, 255, mscratch);
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_EQ(out[i] == 0 ? 255 : int32_t{out[i]}, m[i]) << list << " epoch " << epoch << " sample " << g;
          padded += out[i] == 0;
        }
        moved += m != map;
      }
    if (std::string(list) != "crop26pad0") {
      EXPECT_GT(moved, 60) << list << ": the draws moved most maps";
    }
    if (std::string(list).find("pad3") != std::string::npos) {
      EXPECT_GT(padded, 0) << list;
    }
  }
}

TEST(Augment, LabelMapsRefuseResamplingAndUnfilledPadding) {
  const SampleShape s{3, 32, 32};
  EXPECT_NE(error_of([&] { Augmenter("rrc32", s, 0).check_label_maps(255); }).find("resamples the image"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("center24", s, 0).check_label_maps(255); }).find("resamples the image"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("crop32pad4", s, 0).check_label_maps(-1); }).find("--ignore-index"),
            std::string::npos);
  EXPECT_NO_THROW(Augmenter("crop32pad0,hflip", s, 0).check_label_maps(-1));
}

// Volumes: flip3d and transpose3d against their numpy definitions written out index by index
// (np.flip per drawn axis; np.transpose(x, (0, 1+p0, 1+p1, 1+p2))), every flip combination
// and permutation drawn, draws keyed by (seed, epoch, sample) only, label maps moved voxel for
// voxel with their volumes, and the refusals.
TEST(Augment, VolumeFlipsAndTransposes) {
  const SampleShape cube{2, 6, 6, 6};
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  std::vector<float> x(static_cast<size_t>(cube.numel()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 0.5f;
  auto at = [&](const std::vector<float>& v, int c, int z, int y, int w) {
    return v[static_cast<size_t>(((c * 6 + z) * 6 + y) * 6 + w)];
  };
  // The geometry on a non-cube, every permutation and flip set: dst(c, i) = src(c, j) with
  // j[perm[a]] = flip[a] ? n_a - 1 - i_a : i_a.
  {
    const int dims[3] = {3, 4, 5};
    std::vector<float> src(2 * 60), dst(src.size());
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    for (const auto& p : perms)
      for (int f = 0; f < 8; ++f) {
        const bool flip[3] = {(f & 1) != 0, (f & 2) != 0, (f & 4) != 0};
        permute_flip_volume(src.data(), dst.data(), 2, dims, p, flip);
        const int n[3] = {dims[p[0]], dims[p[1]], dims[p[2]]};
        for (int c = 0; c < 2; ++c)
          for (int i0 = 0; i0 < n[0]; ++i0)
            for (int i1 = 0; i1 < n[1]; ++i1)
              for (int i2 = 0; i2 < n[2]; ++i2) {
                const int i[3] = {i0, i1, i2};
                int j[3];
                for (int a = 0; a < 3; ++a) j[p[a]] = flip[a] ? n[a] - 1 - i[a] : i[a];
                ASSERT_EQ(dst[static_cast<size_t>(((c * n[0] + i0) * n[1] + i1) * n[2] + i2)],
                          src[static_cast<size_t>(((c * 3 + j[0]) * 4 + j[1]) * 5 + j[2])])
                    << "perm " << p[0] << p[1] << p[2] << " flips " << f;
              }
      }
  }
  // The pipeline: each sample's draws, applied in order, are what apply_volume does.
  Augmenter aug("flip3d,transpose3d", cube, 11);
  ASSERT_TRUE(aug.volume());
  EXPECT_EQ(aug.output_shape().text(), cube.text());
  std::set<int> flips_seen, perms_seen;
  std::vector<float> scratch;
  std::vector<int32_t> mscratch;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int64_t g = 0; g < 60; ++g) {
      const AugmentDraw fd = aug.draw(0, epoch, g, cube), td = aug.draw(1, epoch, g, cube);
      ASSERT_TRUE(fd.axes >= 0 && fd.axes < 8 && td.axes >= 0 && td.axes < 6);
      flips_seen.insert(fd.axes);
      perms_seen.insert(td.axes);
      std::vector<float> y = x;
      aug.apply_volume(y.data(), epoch, g, scratch);
      for (int c = 0; c < 2; ++c)
        for (int i0 = 0; i0 < 6; ++i0)
          for (int i1 = 0; i1 < 6; ++i1)
            for (int i2 = 0; i2 < 6; ++i2) {
              const int i[3] = {i0, i1, i2}, *p = perms[td.axes];
              int j[3], k[3];
              for (int a = 0; a < 3; ++a) j[p[a]] = i[a];                            // transpose3d's source ...
              for (int a = 0; a < 3; ++a) k[a] = (fd.axes >> a) & 1 ? 5 - j[a] : j[a];  // ... flip3d's
              ASSERT_EQ(y[static_cast<size_t>(((c * 6 + i0) * 6 + i1) * 6 + i2)], at(x, c, k[0], k[1], k[2]))
                  << "epoch " << epoch << " sample " << g;
            }
      // The label map of channel 0 moves as channel 0 of the volume.
      std::vector<int32_t> map(216);
      for (size_t v = 0; v < map.size(); ++v) map[v] = static_cast<int32_t>(v);
      augment_label_map(aug, map.data(), epoch, g, 255, mscratch);
      for (size_t v = 0; v < map.size(); ++v) ASSERT_EQ(static_cast<float>(map[v]) + 0.5f, y[v]);
      // Keyed by (seed, epoch, sample): another Augmenter of the list draws the same.
      EXPECT_EQ(Augmenter("flip3d,transpose3d", cube, 11).draw(1, epoch, g, cube).axes, td.axes);
    }
  EXPECT_EQ(flips_seen.size(), 8u);
  EXPECT_EQ(perms_seen.size(), 6u);
  EXPECT_TRUE(aug.for_evaluation().steps().empty());
  // Refusals: volume steps on images, image steps on volumes, transpose3d on a non-cube.
  EXPECT_NE(error_of([&] { Augmenter("flip3d", kCifar, 0); }).find("moves the voxels of volumes"), std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("hflip", cube, 0); }).find("use flip3d and transpose3d"), std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("transpose3d", SampleShape{1, 4, 6, 6}, 0); }).find("only of a cube"),
            std::string::npos);
  EXPECT_NO_THROW(Augmenter("flip3d", SampleShape{1, 4, 6, 8}, 0).check_label_maps(-1));
}

// Found by tests/fuzz/fuzz_augment (its input is a seed there now): `rrc48476,rrc418` on a
// 3×33×33 image ends at 3×418×418, but its first step's 3×48476×48476 samples (7 GB) ran the
// reader out of memory. A step whose samples exceed kMaxAugmentSampleBytes is refused, the
// last one or one before it, on fixed-size and ragged data alike.
TEST(Augment, OversizedStepsAreRefused) {
  const SampleShape small{3, 33, 33};
  EXPECT_NE(error_of([&] { Augmenter("rrc48476,rrc418", small, 0); }).find("--augment rrc48476 makes samples of "
                                                                             "3x48476x48476 (6723 MiB each)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("resize60000", small, 0); }).find("give that step a smaller size"),
            std::string::npos);
  EXPECT_NE(error_of([&] { Augmenter("center10000", SampleShape{3, 500, 400}, 0, /*ragged=*/true); })
                .find("--augment center10000 makes samples of 3x10000x10000"),
            std::string::npos);
  // The largest sizes a CNN takes stay allowed.
  EXPECT_NO_THROW(Augmenter("rrc4096,hflip", small, 0));
  EXPECT_NO_THROW(Augmenter("resize1024,center1024", SampleShape{3, 480, 640}, 0));
  // resize<S> on an extreme aspect ratio: int(S·long/short) beyond int's range is held, then refused.
  EXPECT_EQ(resize_shape(SampleShape{1, 65535, 1}, 131070).height, 2147483647);
  EXPECT_NE(error_of([&] { Augmenter("resize131070", SampleShape{1, 65535, 1}, 0); }).find("MiB each"),
            std::string::npos);
}
