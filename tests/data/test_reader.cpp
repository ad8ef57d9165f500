// The HDF5 reader in one process: for W in {1,2,3,4} (W sources, one per rank) and
// 1, 3 and 8 shards, the concatenated rank batches are exactly the sampler's global
// batches, with the right images and labels; epochs differ; exactly-once evaluation;
// seek/resume; memory cache; prefetch depths; batch-size and damaged-shard errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "data/fixture.hpp"
#include "data/hdf5_source.hpp"
#include "data/open_source.hpp"
#include "data/reader_check.hpp"
#include "data/sampler.hpp"
#include "data/synthetic_source.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kN = 203, kTest = 37, kG = 12;  // 203 = 16*12 + 11: a tail of 11
const SampleShape kShape{2, 3, 5};

class ReaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("reader");
    write_fixture(root_ + "/fixture.h5", kN, kTest, kShape, 7);
    for (int shards : {1, 3, 8}) prep_fixture(root_ + "/fixture.h5", dir(shards), shards, shards == 1 ? 1 : 3);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string dir(int shards) { return root_ + "/ds" + std::to_string(shards); }
  static std::string root_;
};
std::string ReaderTest::root_;

DataOptions options(const std::string& dir, int64_t batch, bool drop_last = true, int prefetch = 2) {
  DataOptions o;
  o.dir = dir;
  o.batch_per_rank = batch;
  o.seed = 77;
  o.drop_last = drop_last;
  o.prefetch = prefetch;
  return o;
}

// Global batches of `epochs` epochs read by W ranks' sources, concatenated in rank order.
std::vector<std::vector<int64_t>> read_global(const std::string& dir, int w, int epochs, bool drop_last,
                                              int prefetch = 2, const std::string& cache = "none") {
  std::vector<DataSources> src;
  for (int r = 0; r < w; ++r) {
    auto o = options(dir, kG / w, drop_last, prefetch);
    o.cache = cache;
    src.push_back(open_data(o, r, w));
  }
  std::vector<std::vector<int64_t>> out;
  Batch b;
  const int64_t steps = src[0].train->steps_per_epoch();
  for (int e = 0; e < epochs; ++e)
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> global;
      for (int r = 0; r < w; ++r) {
        src[r].train->next(b);
        EXPECT_EQ(b.epoch, e);
        EXPECT_EQ(b.step_in_epoch, s);
        EXPECT_EQ(b.count, kG / w);
        EXPECT_EQ(b.rank_offset, r * (kG / w));
        EXPECT_EQ(wrong_images(b, *src[r].dataset), 0) << "rank " << r << " step " << s;
        for (int64_t k = 0; k < b.count; ++k) EXPECT_EQ(b.labels[k], b.sample_ids[k] % 7);
        global.insert(global.end(), b.sample_ids.begin(), b.sample_ids.end());
      }
      out.push_back(global);
    }
  return out;
}

}  // namespace

TEST_F(ReaderTest, GlobalBatchesIdenticalAcrossWorldSizesAndShardCounts) {
  Sampler ref(kN, kG, true, 77);
  std::vector<std::vector<int64_t>> expect;
  std::vector<int64_t> ids;
  for (int e = 0; e < 2; ++e)
    for (int64_t s = 0; s < ref.steps_per_epoch(); ++s) {
      ref.global_batch_ids(e, s, ids);
      expect.push_back(ids);
    }
  for (int shards : {1, 3, 8})
    for (int w : {1, 2, 3, 4}) {
      auto got = read_global(dir(shards), w, 2, true);
      ASSERT_EQ(got, expect) << shards << " shards, W=" << w;
    }
}

TEST_F(ReaderTest, EachEpochSeesEverySampleOnceMinusTheTailAndEpochsDiffer) {
  auto got = read_global(dir(3), 3, 2, true);
  const size_t steps = kN / kG;
  ASSERT_EQ(got.size(), 2 * steps);
  std::vector<int64_t> e0, e1;
  for (size_t s = 0; s < steps; ++s) {
    e0.insert(e0.end(), got[s].begin(), got[s].end());
    e1.insert(e1.end(), got[steps + s].begin(), got[steps + s].end());
  }
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), e0.size());
  EXPECT_EQ(static_cast<int64_t>(e0.size()), kN - kN % kG);
  EXPECT_NE(e0, e1);
}

TEST_F(ReaderTest, NoDropLastFillsTheLastBatchByWrapping) {
  auto got = read_global(dir(8), 4, 1, false);
  ASSERT_EQ(static_cast<int64_t>(got.size()), (kN + kG - 1) / kG);
  std::map<int64_t, int> count;
  for (auto& g : got)
    for (auto id : g) ++count[id];
  EXPECT_EQ(static_cast<int64_t>(count.size()), kN);
  int twice = 0;
  for (auto& [id, c] : count) twice += c == 2;
  EXPECT_EQ(twice, kG - kN % kG);
}

TEST_F(ReaderTest, PrefetchDepthAndMemoryCacheDoNotChangeTheBatches) {
  auto base = read_global(dir(3), 2, 2, true, 2);
  EXPECT_EQ(read_global(dir(3), 2, 2, true, 0), base);
  EXPECT_EQ(read_global(dir(3), 2, 2, true, 5), base);
  EXPECT_EQ(read_global(dir(3), 2, 2, true, 2, "memory"), base);
}

TEST_F(ReaderTest, SeekResumesAtTheSameBatch) {
  auto all = read_global(dir(3), 1, 2, true);
  auto src = open_data(options(dir(3), kG), 0, 1).train;
  Batch b;
  src->next(b);  // start the thread, then jump
  src->seek(1, 5);
  src->next(b);
  EXPECT_EQ(b.sample_ids, all[src->steps_per_epoch() + 5]);
  // Resume on another world size: rank 1 of 3 at epoch 0 step 9.
  auto r1 = open_data(options(dir(8), kG / 3), 1, 3).train;
  r1->seek(0, 9);
  r1->next(b);
  EXPECT_EQ(b.sample_ids, std::vector<int64_t>(all[9].begin() + 4, all[9].begin() + 8));
  EXPECT_THROW(r1->seek(0, r1->steps_per_epoch()), UserError);
  EXPECT_GE(r1->take_wait_seconds(), 0.0);
  EXPECT_EQ(r1->take_wait_seconds(), 0.0);
}

TEST_F(ReaderTest, EvaluationCountsEachTestSampleOnce) {
  for (int shards : {1, 3})
    for (int w : {1, 2, 3, 4}) {
      std::map<int64_t, int> seen;
      int64_t local_total = 0;
      for (int r = 0; r < w; ++r) {
        auto ev = open_data(options(dir(shards), 1), r, w).eval;
        ASSERT_TRUE(ev);
        EXPECT_EQ(ev->samples(), kTest);
        local_total += ev->local_samples();
        auto info = load_dataset(dir(shards));
        for (int pass = 0; pass < 2; ++pass) {  // rewind gives the same share again
          ev->rewind();
          Batch b;
          int64_t got = 0;
          while (ev->next(b, 5)) {
            EXPECT_LE(b.count, 5);
            EXPECT_EQ(wrong_images(b, info, 100000), 0);
            for (int64_t k = 0; k < b.count; ++k) {
              EXPECT_EQ(b.labels[k], (100000 + b.sample_ids[k]) % 7);
              if (pass == 0) ++seen[b.sample_ids[k]];
            }
            got += b.count;
          }
          EXPECT_EQ(got, ev->local_samples());
        }
      }
      EXPECT_EQ(local_total, kTest);
      ASSERT_EQ(static_cast<int64_t>(seen.size()), kTest) << "W=" << w;
      for (auto& [id, c] : seen) EXPECT_EQ(c, 1) << "test sample " << id << " W=" << w;
    }
}

TEST_F(ReaderTest, BatchLargerThanTheRankShareIsAUserError) {
  try {
    open_data(options(dir(1), 60), 0, 4);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--batch-size 60 on 4 rank(s) needs 240"), std::string::npos) << m;
    EXPECT_NE(m.find("use --batch-size 50 or less"), std::string::npos) << m;
  }
}

TEST_F(ReaderTest, DamagedChunkFoundByTheReaderThreadNamesTheShard) {
  const std::string bad = root_ + "/flipped";
  fs::remove_all(bad);
  fs::copy(dir(1), bad);
  // Flip bytes inside the 5th image chunk of the (only) train shard.
  const std::string shard = bad + "/train-00000-of-00001.h5";
  flip_bytes(shard, chunk_file_offset(shard, "/images", 4) + 10, 3);
  auto src = open_data(options(bad, kG), 0, 1).train;  // opening reads only labels
  Batch b;
  try {
    for (int i = 0; i < 3 * src->steps_per_epoch(); ++i) src->next(b);
    FAIL() << "a damaged chunk went unnoticed";
  } catch (const UserError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(shard), std::string::npos) << m;
    EXPECT_NE(m.find("damaged"), std::string::npos) << m;
  }
}

// The pixels are the documented function (splitmix64 stream from the sample's key, +1
// where p mod classes == label), and a batch made by several --data-threads is the
// batch made by one, byte for byte.
TEST(SyntheticSource, SameBytesForAnyDataThreadsAndTheDocumentedFormula) {
  const SampleShape shape{3, 17, 19};
  const int classes = 7;
  std::vector<float> img(static_cast<size_t>(shape.numel()));
  int32_t label = -1;
  synthetic_sample(5, 0, 1234, shape, classes, img.data(), &label);
  const uint64_t key = mix64(5 ^ mix64(1234u * 2 + 0 + 1));
  EXPECT_EQ(label, static_cast<int32_t>(key % classes));
  uint64_t state = key;
  size_t wrong = 0;
  for (int64_t p = 0; p < shape.numel(); ++p) {
    const float u = static_cast<float>(splitmix64_next(state) >> 40) * (1.0f / 16777216.0f);
    wrong += img[static_cast<size_t>(p)] != 2.0f * u - 1.0f + (p % classes == label ? 1.0f : 0.0f);
  }
  EXPECT_EQ(wrong, 0u);

  DataOptions o;
  o.synthetic = true;
  o.synthetic_samples = 64;
  o.synthetic_test_samples = 0;
  o.synthetic_shape = {3, 64, 64};
  o.batch_per_rank = 10;  // parts of 3 and 4 samples with 3 threads
  o.seed = 11;
  std::vector<std::vector<float>> batches[2];
  for (int k = 0; k < 2; ++k) {
    auto ok = o;
    ok.data_threads = k == 0 ? 1 : 3;
    auto src = open_data(ok, 0, 1).train;
    Batch b;
    for (int s = 0; s < 8; ++s) {
      src->next(b);
      batches[k].push_back(b.images);
    }
  }
  EXPECT_TRUE(batches[0] == batches[1]);
}

TEST(SyntheticSource, IdenticalGlobalBatchesAcrossWorldSizes) {
  DataOptions o;
  o.synthetic = true;
  o.synthetic_samples = 100;
  o.synthetic_test_samples = 10;
  o.synthetic_shape = {1, 4, 4};
  o.seed = 3;
  std::vector<std::vector<float>> ref;
  for (int w : {1, 2, 4}) {
    std::vector<std::unique_ptr<BatchSource>> src;
    for (int r = 0; r < w; ++r) {
      auto ow = o;
      ow.batch_per_rank = 8 / w;
      src.push_back(open_data(ow, r, w).train);
    }
    std::vector<std::vector<float>> got;
    Batch b;
    for (int64_t s = 0; s < src[0]->steps_per_epoch() + 2; ++s) {
      std::vector<float> images, labels;
      for (auto& x : src) {
        x->next(b);
        images.insert(images.end(), b.images.begin(), b.images.end());
        for (auto l : b.labels) labels.push_back(static_cast<float>(l));
      }
      got.push_back(images);
      got.push_back(labels);
    }
    if (ref.empty()) ref = got;
    else EXPECT_TRUE(got == ref) << "W=" << w;
  }
  auto ev = open_data(o, 0, 1).eval;
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->local_samples(), 10);
}
