// Round trip on the real Fashion-MNIST files: `prep` (8 + 2 shards) gives 60000 train
// and 10000 test samples whose bytes and labels equal an independent IDX decode,
// read back with the HDF5 C API shard by shard; mean/std match the known values; the
// reader's batches carry the right (normalised) images.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <filesystem>
#include <vector>

#include "data/dataset.hpp"
#include "data/fixture.hpp"
#include "data/open_source.hpp"
#include "data/prep.hpp"

using namespace cnnscale;
namespace fs = std::filesystem;

namespace {
const std::string kSrc = "/usr/share/datasets/fashion-mnist";

// Independent IDX decode: whole file through zlib, header skipped by its dimension count.
std::vector<uint8_t> idx_payload(const std::string& path, std::vector<uint32_t>& dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return {};
  std::vector<uint8_t> all;
  std::vector<uint8_t> buf(1 << 20);
  int got;
  while ((got = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) all.insert(all.end(), buf.begin(), buf.begin() + got);
  gzclose(f);
  const int nd = all[3];
  dims.clear();
  for (int i = 0; i < nd; ++i)
    dims.push_back((uint32_t{all[4 + 4 * i]} << 24) | (uint32_t{all[5 + 4 * i]} << 16) | (uint32_t{all[6 + 4 * i]} << 8) |
                   all[7 + 4 * i]);
  return std::vector<uint8_t>(all.begin() + 4 + 4 * nd, all.end());
}

void read_back(const SplitInfo& split, std::vector<uint8_t>& images, std::vector<int32_t>& labels) {
  for (const auto& sh : split.shards) {
    hid_t f = H5Fopen(sh.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0) << sh.path;
    hid_t d = H5Dopen2(f, "/images", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(d);
    // fletcher32 is on for every shard.
    bool has_fletcher = false;
    for (int i = 0; i < H5Pget_nfilters(dcpl); ++i) {
      unsigned flags;
      size_t nelmts = 0;
      char name[64];
      unsigned filter_config;
      if (H5Pget_filter2(dcpl, i, &flags, &nelmts, nullptr, sizeof name, name, &filter_config) == H5Z_FILTER_FLETCHER32)
        has_fletcher = true;
    }
    EXPECT_TRUE(has_fletcher) << sh.path;
    H5Pclose(dcpl);
    const size_t at = images.size();
    images.resize(at + static_cast<size_t>(sh.samples) * 784);
    EXPECT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, images.data() + at), 0);
    H5Dclose(d);
    d = H5Dopen2(f, "/labels", H5P_DEFAULT);
    const size_t lat = labels.size();
    labels.resize(lat + static_cast<size_t>(sh.samples));
    EXPECT_GE(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data() + lat), 0);
    H5Dclose(d);
    H5Fclose(f);
  }
}
}  // namespace

TEST(PrepFashionMnist, RoundTripEqualsTheIdxSource) {
  if (!fs::exists(kSrc + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  const std::string root = test::make_temp_dir("fmnist");
  PrepOptions o;
  o.input = kSrc;
  o.output = root + "/fm";
  o.shards = 8;
  o.test_shards = 2;
  const PrepResult r = run_prep(o);
  EXPECT_EQ(r.train_samples, 60000);
  EXPECT_EQ(r.test_samples, 10000);
  EXPECT_EQ(r.classes, 10);
  EXPECT_FALSE(fs::exists(o.output + ".tmp-" + std::to_string(::getpid())));

  const DatasetInfo info = load_dataset(o.output);
  EXPECT_EQ(info.train.samples, 60000);
  EXPECT_EQ(info.test.samples, 10000);
  EXPECT_EQ(info.train.shards.size(), 8u);
  EXPECT_EQ(info.test.shards.size(), 2u);
  EXPECT_EQ(info.shape.channels, 1);
  EXPECT_EQ(info.shape.height, 28);
  EXPECT_EQ(info.shape.width, 28);
  EXPECT_NEAR(info.mean[0], 0.2860, 5e-4);
  EXPECT_NEAR(info.std[0], 0.3530, 5e-4);

  for (auto [split, prefix] : {std::pair{&info.train, "train"}, std::pair{&info.test, "t10k"}}) {
    std::vector<uint32_t> idims, ldims;
    const auto want_images = idx_payload(kSrc + "/" + prefix + "-images-idx3-ubyte.gz", idims);
    const auto want_labels = idx_payload(kSrc + "/" + prefix + "-labels-idx1-ubyte.gz", ldims);
    ASSERT_EQ(idims.size(), 3u);
    ASSERT_EQ(static_cast<int64_t>(idims[0]), split->samples);
    std::vector<uint8_t> images;
    std::vector<int32_t> labels;
    read_back(*split, images, labels);
    ASSERT_EQ(images.size(), want_images.size()) << prefix;
    EXPECT_TRUE(images == want_images) << prefix << " image bytes differ";
    ASSERT_EQ(labels.size(), want_labels.size());
    int64_t bad = 0;
    for (size_t i = 0; i < labels.size(); ++i) bad += labels[i] != want_labels[i];
    EXPECT_EQ(bad, 0) << prefix << " labels differ";
    EXPECT_EQ(split->labels, labels) << "load_dataset's labels";
  }

  // The reader: two steps of rank 1 of 2 match the IDX bytes, normalised with dataset.json.
  std::vector<uint32_t> dims;
  const auto want = idx_payload(kSrc + "/train-images-idx3-ubyte.gz", dims);
  DataOptions d;
  d.dir = o.output;
  d.batch_per_rank = 32;
  d.seed = 1;
  auto src = open_data(d, 1, 2).train;
  EXPECT_EQ(src->steps_per_epoch(), 60000 / 64);
  Batch b;
  for (int step = 0; step < 2; ++step) {
    src->next(b);
    ASSERT_EQ(b.count, 32);
    for (int64_t k = 0; k < b.count; ++k)
      for (int p = 0; p < 784; ++p) {
        const float expect = static_cast<float>((want[b.sample_ids[k] * 784 + p] / 255.0 - info.mean[0]) / info.std[0]);
        ASSERT_FLOAT_EQ(b.images[k * 784 + p], expect) << "sample " << b.sample_ids[k] << " pixel " << p;
      }
  }
  fs::remove_all(root);
}
