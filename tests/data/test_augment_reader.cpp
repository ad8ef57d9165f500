// test_augment_reader.cpp — --augment inside the HDF5 reader (real shards): every
// training image is exactly Augmenter(fixture bytes of its sample id) normalised; the
// concatenated batches of W = 1, 2, 4 sources (one per rank) are bitwise identical,
// with prefetch 0 and 3, and after a seek; evaluation is never augmented; a bad list
// or a crop that does not fit is a UserError from open_data(). With rrc<S> the batches
// are C×S×S (the source's shape says so), still identical across world sizes, and
// evaluation center-crops the test split to S×S. --data-threads 2..4 gives the same
// batches as 1.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/augment.hpp"
#include "data/fixture.hpp"
#include "data/open_source.hpp"
#include "data/reader_check.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kN = 150, kTest = 20, kG = 16;
const SampleShape kShape{3, 8, 8};
const char* kList = "crop8pad3,hflip";

class AugmentReader : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("augreader");
    write_fixture(root_ + "/fixture.h5", kN, kTest, kShape, 5);
    prep_fixture(root_ + "/fixture.h5", root_ + "/ds", 3, 1, 8);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static DataOptions options(int w, int prefetch, const std::string& augment = kList) {
    DataOptions o;
    o.dir = root_ + "/ds";
    o.batch_per_rank = kG / w;
    o.seed = 5;
    o.prefetch = prefetch;
    o.augment = augment;
    return o;
  }
  static std::string root_;
};
std::string AugmentReader::root_;

// The normalised images of `steps` global batches read by W sources starting at (epoch, step).
std::vector<float> read_global(const DataOptions& base, int w, int epoch, int64_t step, int steps,
                               std::vector<int64_t>* ids_out = nullptr, std::vector<int>* epochs_out = nullptr) {
  std::vector<DataSources> src;
  for (int r = 0; r < w; ++r) src.push_back(open_data(base, r, w));
  for (auto& s : src) s.train->seek(epoch, step);
  std::vector<float> all;
  Batch b;
  for (int i = 0; i < steps; ++i)
    for (int r = 0; r < w; ++r) {
      src[r].train->next(b);
      all.insert(all.end(), b.images.begin(), b.images.end());
      if (ids_out) ids_out->insert(ids_out->end(), b.sample_ids.begin(), b.sample_ids.end());
      if (epochs_out) epochs_out->insert(epochs_out->end(), static_cast<size_t>(b.count), b.epoch);
    }
  return all;
}

}  // namespace

TEST_F(AugmentReader, ImagesAreTheAugmentedFixtureBytes) {
  const int64_t numel = kShape.numel(), plane = 64;
  std::vector<int64_t> ids;
  std::vector<int> epochs;
  const int steps = 12;  // crosses into epoch 1 (9 steps per epoch)
  const auto imgs = read_global(options(2, 2), 2, 0, 0, steps, &ids, &epochs);
  ASSERT_EQ(static_cast<int64_t>(ids.size()), steps * kG);
  auto info = load_dataset(root_ + "/ds");
  Augmenter aug(kList, kShape, 5);
  std::vector<uint8_t> src(static_cast<size_t>(numel)), want(src.size()), scratch;
  int64_t changed = 0, padded = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    for (int64_t p = 0; p < numel; ++p) src[p] = fixture_pixel(ids[k], p);
    aug.apply(src.data(), want.data(), epochs[k], ids[k], scratch);
    changed += want != src;
    for (int64_t p = 0; p < numel; ++p) {
      const int c = static_cast<int>(p / plane);
      const long got = std::lround((imgs[k * numel + p] * info.std[c] + info.mean[c]) * 255.0);
      ASSERT_EQ(got, want[p]) << "sample " << ids[k] << " pixel " << p;
      padded += want[p] == 0 && src[p] != 0;
    }
  }
  EXPECT_GT(changed, static_cast<int64_t>(ids.size()) * 3 / 4);  // only 1 draw in 98 is the identity
  EXPECT_GT(padded, 0);                                           // zero padding reached the images
}

TEST_F(AugmentReader, IdenticalAcrossWorldSizesPrefetchAndSeek) {
  const auto ref = read_global(options(1, 2), 1, 0, 0, 12);
  for (int w : {2, 4})
    for (int prefetch : {0, 3}) EXPECT_EQ(read_global(options(w, prefetch), w, 0, 0, 12), ref) << w << " " << prefetch;
  // Resuming at epoch 0 step 5 re-draws exactly the uninterrupted run's images.
  const auto tail = read_global(options(2, 2), 2, 0, 5, 7);
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), ref.end() - static_cast<int64_t>(tail.size())));
  // And augmentation changed them.
  EXPECT_NE(read_global(options(1, 2, "none"), 1, 0, 0, 12), ref);
}

// --data-threads N: the per-sample work of a batch spread over N workers changes
// nothing, for every list (fixed-size crop/flip, rrc, none) and any world size.
TEST_F(AugmentReader, IdenticalForAnyDataThreadCount) {
  for (const char* list : {kList, "rrc6,hflip", "none"}) {
    const auto ref = read_global(options(1, 2, list), 1, 0, 0, 12);
    for (int threads : {2, 3, 4})
      for (int w : {1, 2}) {
        DataOptions o = options(w, threads == 3 ? 0 : 2, list);
        o.data_threads = threads;
        EXPECT_EQ(read_global(o, w, 0, 0, 12), ref) << list << " threads " << threads << " world " << w;
      }
  }
  // Evaluation (centre crop after rrc) on 3 workers = on 1.
  auto eval_all = [](DataOptions o) {
    std::vector<float> all;
    auto d = open_data(o, 0, 1);
    Batch b;
    while (d.eval->next(b, 7)) all.insert(all.end(), b.images.begin(), b.images.end());
    return all;
  };
  DataOptions e3 = options(1, 2, "rrc6,hflip");
  const auto e1 = eval_all(e3);
  e3.data_threads = 3;
  EXPECT_EQ(eval_all(e3), e1);
  EXPECT_EQ(e1.size(), static_cast<size_t>(kTest * 3 * 6 * 6));
  DataOptions bad = options(1, 2);
  bad.data_threads = 0;
  EXPECT_THROW(open_data(bad, 0, 1), UserError);
}

TEST_F(AugmentReader, EvaluationIsNeverAugmented) {
  auto d = open_data(options(1, 2), 0, 1);
  ASSERT_TRUE(d.eval);
  Batch b;
  int64_t seen = 0;
  while (d.eval->next(b, 7)) {
    EXPECT_EQ(wrong_images(b, *d.dataset, 100000), 0);
    seen += b.count;
  }
  EXPECT_EQ(seen, kTest);
}

TEST_F(AugmentReader, BadListsAreUserErrors) {
  auto msg = [](const DataOptions& o) {
    try {
      open_data(o, 0, 1);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg(options(1, 2, "crop8pad3,rotate")).find("unknown step 'rotate'; valid steps are"), std::string::npos);
  EXPECT_NE(msg(options(1, 2, "crop32pad4")).find("images of this data set are 8x8; use crop8pad4"),
            std::string::npos);
  DataOptions syn = options(1, 2, "hflip");
  syn.synthetic = true;
  EXPECT_NE(msg(syn).find("--synthetic samples are not images"), std::string::npos);
}

TEST_F(AugmentReader, ResizedCropChangesTheShapeAndEvaluationCentreCrops) {
  const char* list = "rrc6,hflip";
  const SampleShape out{3, 6, 6};
  auto d = open_data(options(1, 2, list), 0, 1);
  EXPECT_EQ(d.train->shape().height, 6);
  EXPECT_EQ(d.train->shape().width, 6);
  const auto ref = read_global(options(1, 2, list), 1, 0, 0, 10);
  EXPECT_EQ(static_cast<int64_t>(ref.size()), 10 * kG * out.numel());
  EXPECT_EQ(read_global(options(2, 0, list), 2, 0, 0, 10), ref);
  EXPECT_EQ(read_global(options(4, 3, list), 4, 0, 0, 10), ref);
  // Evaluation: the centre 6×6 of each 8×8 test image (rows/columns 1..6), normalised.
  ASSERT_TRUE(d.eval);
  Batch b;
  int64_t seen = 0, wrong = 0;
  while (d.eval->next(b, 7)) {
    ASSERT_EQ(static_cast<int64_t>(b.images.size()), b.count * out.numel());
    for (int64_t k = 0; k < b.count; ++k)
      for (int c = 0; c < 3; ++c)
        for (int y = 0; y < 6; ++y)
          for (int x = 0; x < 6; ++x) {
            const float v = b.images[((k * 3 + c) * 6 + y) * 6 + x];
            const long got = std::lround((v * d.dataset->std[c] + d.dataset->mean[c]) * 255.0);
            wrong += got != fixture_pixel(100000 + b.sample_ids[k], (c * 8 + y + 1) * 8 + x + 1);
          }
    seen += b.count;
  }
  EXPECT_EQ(seen, kTest);
  EXPECT_EQ(wrong, 0);
}
