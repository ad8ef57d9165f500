// test_ragged.cpp — `prep --format imagefolder --store original-max S` end to end in one
// process, on PNG files the test writes (grey and RGB, sizes below, at and above S):
//  - prep/read round trip: dataset.json says ragged with max_side S; every stored sample
//    is the decoded image (grey → RGB) as C×H×W planes, images with a longer side over S
//    resized to S × int(S·short/long) with the antialiased bilinear resample;
//  - the training reader with --augment rrc16,hflip: every image is Augmenter(stored
//    bytes, its own shape) normalised; W = 1 (batch 8) and W = 2 (batch 4) give the same
//    global batches bit for bit and each epoch visits every sample exactly once; --cache
//    memory, --prefetch 0 and --data-threads 3 change nothing;
//  - evaluation: every test sample exactly once for W = 1, 2 (and --data-threads 3),
//    resized to int(16/0.875) = 18 (shorter side) and center-cropped to 16 (never random);
//  - fletcher32 covers the ragged layout: damaged /images bytes fail --verify and the
//    reader naming the shard, a damaged /offsets fails load_dataset;
//  - errors: crop/hflip before rrc, no --augment, --store with --resize.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "data/augment.hpp"
#include "data/dataset.hpp"
#include "data/fixture.hpp"
#include "data/h5util.hpp"
#include "data/image_decode.hpp"
#include "data/normalize.hpp"
#include "data/open_source.hpp"
#include "data/png_writer.hpp"
#include "data/prep.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {

constexpr int kMax = 48;
// (width, height, channels) of the train images of class a (class b: transposed).
const int kSizes[][3] = {{40, 30, 3}, {17, 50, 1}, {64, 64, 3}, {100, 20, 3},
                         {48, 48, 1}, {33, 12, 3}, {60, 70, 3}, {20, 20, 1}};

void noise_png(const std::string& path, int w, int h, int c, uint32_t seed) {
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * c);
  for (size_t i = 0; i < px.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    // smooth-ish content, so that resampling is not just noise averaging
    px[i] = static_cast<uint8_t>(((i / c) % w) * 3 + (seed >> 28));
  }
  write_png(path, px.data(), w, h, c);
}

class Ragged : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("ragged");
    int k = 0, g = 0;
    for (const char* cls : {"a", "b"}) {
      fs::create_directories(root_ + "/in/train/" + cls);
      fs::create_directories(root_ + "/in/val/" + cls);
      for (const auto& s : kSizes) {
        const bool t = cls[0] == 'b';
        noise_png(root_ + "/in/train/" + cls + "/" + std::to_string(10 + g++) + ".png", t ? s[1] : s[0],
                  t ? s[0] : s[1], s[2], static_cast<uint32_t>(k + 1));
        ++k;
      }
      for (int i = 0; i < 3; ++i)
        noise_png(root_ + "/in/val/" + cls + "/" + std::to_string(i) + ".png", 30 + 20 * i, 70 - 15 * i, 3,
                  static_cast<uint32_t>(100 + k++));
    }
    PrepOptions o;
    o.format = "imagefolder";
    o.input = root_ + "/in";
    o.output = root_ + "/ds";
    o.image.store_max = kMax;
    o.image.threads = 2;
    o.shards = 3;
    o.test_shards = 2;
    run_prep(o);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static DataOptions options(int w, const std::string& augment = "rrc16,hflip") {
    DataOptions o;
    o.dir = root_ + "/ds";
    o.batch_per_rank = 8 / w;
    o.seed = 3;
    o.augment = augment;
    return o;
  }
  // The stored bytes of every sample of a split (read straight from the shards).
  static std::vector<std::vector<uint8_t>> stored(const SplitInfo& split) {
    std::vector<std::vector<uint8_t>> out;
    Hdf5Lock lock(hdf5_mutex());
    for (const auto& sh : split.shards) {
      std::string cause;
      H5Id f = h5_open_readonly(sh.path, cause);
      H5Id d = h5_dataset(H5Dopen2(f, "/images", H5P_DEFAULT));
      H5Id sp = h5_space(H5Dget_space(d));
      hsize_t n = 0;
      H5Sget_simple_extent_dims(sp, &n, nullptr);
      std::vector<uint8_t> all(n);
      EXPECT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), 0);
      for (int64_t i = 0; i < sh.samples; ++i) {
        const int64_t g = sh.first_index + i, at = split.offsets[g];
        out.emplace_back(all.begin() + at, all.begin() + at + split.shapes[g].numel());
      }
    }
    return out;
  }
  static std::string root_;
};
std::string Ragged::root_;

std::vector<uint8_t> planes(const RgbImage& im) {
  const int64_t plane = int64_t{im.width} * im.height;
  std::vector<uint8_t> v(static_cast<size_t>(3 * plane));
  for (int64_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c) v[c * plane + p] = im.pixels[3 * p + c];
  return v;
}

TEST_F(Ragged, PrepRoundTrip) {
  const DatasetInfo info = load_dataset(root_ + "/ds");
  ASSERT_TRUE(info.ragged);
  EXPECT_EQ(info.max_side, kMax);
  EXPECT_EQ(info.shape.height, kMax);
  ASSERT_EQ(info.train.samples, 16);
  ASSERT_EQ(info.test.samples, 6);
  ASSERT_EQ(info.train.shards.size(), 3u);
  const auto bytes = stored(info.train);
  int capped = 0;
  for (int64_t g = 0; g < 16; ++g) {
    // ImageFolder order: class a then b, files sorted by name ("10".."17", "18".."25").
    const bool t = g >= 8;
    const auto& s = kSizes[g % 8];
    const int w = t ? s[1] : s[0], h = t ? s[0] : s[1];
    const std::string path = root_ + "/in/train/" + (t ? "b/" : "a/") + std::to_string(10 + g) + ".png";
    RgbImage im = decode_image(path);
    ASSERT_EQ(im.width, w);
    if (std::max(w, h) > kMax) {
      const int sh = std::max(1, static_cast<int>(static_cast<double>(kMax * std::min(w, h)) / std::max(w, h)));
      im = w >= h ? resize_bilinear(im, kMax, sh) : resize_bilinear(im, sh, kMax);
      ++capped;
    }
    EXPECT_EQ(info.train.shapes[g].channels, 3);
    EXPECT_EQ(info.train.shapes[g].height, im.height) << path;
    EXPECT_EQ(info.train.shapes[g].width, im.width) << path;
    EXPECT_EQ(bytes[g], planes(im)) << path;
    EXPECT_EQ(info.train.labels[g], t ? 1 : 0);
  }
  EXPECT_EQ(capped, 2 * 4);                   // 17x50, 64x64, 100x20, 60x70 in each class
  EXPECT_EQ(info.train.shapes[3].width, 48);  // 100x20 → 48 × int(9.6) = 48x9
  EXPECT_EQ(info.train.shapes[3].height, 9);
  verify_dataset(info);
}

// The global batches of `steps` steps from W sources; ids per epoch.
std::vector<float> read_global(const DataOptions& o, int w, int steps, std::vector<int64_t>& ids) {
  std::vector<DataSources> src;
  for (int r = 0; r < w; ++r) src.push_back(open_data(o, r, w));
  for (auto& s : src) s.train->seek(0, 0);
  std::vector<float> all;
  Batch b;
  for (int i = 0; i < steps; ++i)
    for (int r = 0; r < w; ++r) {
      src[r].train->next(b);
      all.insert(all.end(), b.images.begin(), b.images.end());
      ids.insert(ids.end(), b.sample_ids.begin(), b.sample_ids.end());
    }
  return all;
}

TEST_F(Ragged, TrainReaderWorldSizeIndependentExactlyOnce) {
  const DatasetInfo info = load_dataset(root_ + "/ds");
  const auto bytes = stored(info.train);
  std::vector<int64_t> ids1, ids2, ids3;
  const std::vector<float> one = read_global(options(1), 1, 6, ids1);  // 3 epochs of 2 steps
  const std::vector<float> two = read_global(options(2), 2, 6, ids2);
  DataOptions cached = options(2);
  cached.cache = "memory";
  cached.prefetch = 0;
  cached.data_threads = 3;
  const std::vector<float> three = read_global(cached, 2, 6, ids3);
  ASSERT_EQ(one.size(), size_t{6 * 8 * 3 * 16 * 16});
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
  EXPECT_EQ(ids1, ids2);
  for (int e = 0; e < 3; ++e) {
    std::map<int64_t, int> seen;
    for (int k = 0; k < 16; ++k) ++seen[ids1[e * 16 + k]];
    EXPECT_EQ(seen.size(), 16u) << "epoch " << e;
  }
  // Each image is Augmenter(stored bytes, its shape), normalised with dataset.json's mean/std.
  const Augmenter aug("rrc16,hflip", info.shape, 3, true);
  const Normalizer norm(aug.output_shape(), info.mean, info.std);
  std::vector<uint8_t> a(3 * 16 * 16), scratch;
  std::vector<float> f(3 * 16 * 16);
  for (size_t k = 0; k < ids1.size(); ++k) {
    const int64_t g = ids1[k];
    aug.apply(bytes[g].data(), info.train.shapes[g], a.data(), static_cast<int>(k / 16), g, scratch);
    norm.apply(a.data(), f.data());
    ASSERT_TRUE(std::equal(f.begin(), f.end(), one.begin() + static_cast<int64_t>(k) * 768)) << "sample " << g;
  }
}

TEST_F(Ragged, EvaluationResizesAndCentreCropsEverySampleOnce) {
  const DatasetInfo info = load_dataset(root_ + "/ds");
  const auto bytes = stored(info.test);
  for (int w : {1, 2, 3}) {  // 3: two ranks' worth with --data-threads 3
    std::vector<float> all;
    const int ranks = w == 3 ? 2 : w;
    for (int r = 0; r < ranks; ++r) {
      DataOptions o = options(ranks);
      o.data_threads = w == 3 ? 3 : 1;
      DataSources d = open_data(o, r, ranks);
      ASSERT_TRUE(d.eval);
      Batch b;
      while (d.eval->next(b, 2)) all.insert(all.end(), b.images.begin(), b.images.end());
    }
    ASSERT_EQ(all.size(), size_t{6 * 768}) << "W = " << w;
    const Augmenter ev("resize18,center16", info.shape, 0, true);
    const Normalizer norm(ev.output_shape(), info.mean, info.std);
    std::vector<uint8_t> a(768), scratch;
    std::vector<float> f(768);
    for (int64_t g = 0; g < 6; ++g) {
      ev.apply(bytes[g].data(), info.test.shapes[g], a.data(), 0, g, scratch);
      norm.apply(a.data(), f.data());
      EXPECT_TRUE(std::equal(f.begin(), f.end(), all.begin() + g * 768)) << "W = " << w << " sample " << g;
    }
  }
  const Augmenter tr("rrc16,hflip", info.shape, 0, true);
  EXPECT_EQ(tr.for_evaluation().steps().size(), 2u);
  EXPECT_EQ(tr.for_evaluation().steps()[0].name, "resize18");
}

void expect_user_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Checksums hold for the ragged layout: flipped bytes in /images fail --verify and the
// reader naming the shard; a damaged /offsets fails load_dataset.
TEST_F(Ragged, DamageIsCaughtByTheChecksums) {
  const std::string copy = root_ + "/damaged";
  fs::copy(root_ + "/ds", copy);
  const std::string shard = copy + "/train-00000-of-00003.h5";
  flip_bytes(shard, chunk_file_offset(shard, "/images", 0) + 100, 3);
  const DatasetInfo info = load_dataset(copy);  // metadata intact
  expect_user_error([&] { verify_dataset(info); }, shard + " is damaged");
  DataOptions o = options(1);
  o.dir = copy;
  o.prefetch = 0;
  expect_user_error(
      [&] {
        DataSources d = open_data(o, 0, 1);
        Batch b;
        for (int i = 0; i < 4; ++i) d.train->next(b);  // two epochs: every sample read
      },
      shard + " is damaged");
  fs::remove_all(copy);
  fs::copy(root_ + "/ds", copy);
  flip_bytes(shard, chunk_file_offset(shard, "/offsets", 0) + 8, 2);
  expect_user_error([&] { load_dataset(copy); }, shard);
  fs::remove_all(copy);
}

TEST_F(Ragged, ClearErrors) {
  expect_user_error([&] { open_data(options(1, "crop16pad2,rrc16"), 0, 1); },
                    "--augment crop16pad2 needs images of one size but this data set stores variable-size images");
  expect_user_error([&] { open_data(options(1, "hflip,rrc16"), 0, 1); }, "put rrc<S> or center<S> before it");
  expect_user_error([&] { open_data(options(1, "none"), 0, 1); }, "pass rrc<S> or center<S>");
  expect_user_error([&] { open_data(options(1, "resize20"), 0, 1); }, "end the list with rrc<S> or center<S>");
  PrepOptions o;
  o.format = "imagefolder";
  o.input = root_ + "/in";
  o.output = root_ + "/bad";
  o.image.store_max = 32;
  o.image.resize = 40;
  expect_user_error([&] { run_prep(o); }, "does not combine with --resize or --center-crop");
  EXPECT_FALSE(fs::exists(root_ + "/bad"));
  // center<S>,hflip is fine on ragged data (CenterCrop with zero padding, then flip).
  EXPECT_NO_THROW(open_data(options(1, "center24,hflip"), 0, 1));
}

}  // namespace
