// test_prep_cifar.cpp — the CIFAR-10/100 binary reader on small files written here in
// the real format (3073/3074-byte records, R, G, B planes): prep's shards hold exactly
// the records' pixels and labels, in file order across data_batch_1..5; dataset.json has
// the class names and the per-channel mean/std of the train split; the folder or its
// parent both work; CIFAR-100 fine and coarse labels; every bad input (python version,
// wrong file size, missing file, label out of range, wrong name count) is a UserError
// naming the file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "data/dataset.hpp"
#include "data/fixture.hpp"
#include "data/prep.hpp"
#include "data/prep_cifar.hpp"
#include "util/error.hpp"
#include "common/user_error.hpp"

using namespace cnnscale;
namespace fs = std::filesystem;

namespace {

const char* kNames10[] = {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};

// Pixel p (0..3071) of global record i: the channel plane is p / 1024.
uint8_t cifar_pixel(int64_t i, int p) {
  const int c = p / 1024;
  return static_cast<uint8_t>((i * 11 + p * 3 + c * 60) % 251);
}

// Writes `n` records numbered first..first+n-1; labels: fine = i % 10 (cifar10) or
// i % 100, coarse = i % 20.
void write_records(const std::string& path, int64_t first, int64_t n, bool cifar100, int64_t bad_label_at = -1) {
  std::ofstream f(path, std::ios::binary);
  for (int64_t i = first; i < first + n; ++i) {
    if (cifar100) {
      f.put(static_cast<char>(i % 20));
      f.put(static_cast<char>(i == bad_label_at ? 100 : i % 100));
    } else {
      f.put(static_cast<char>(i == bad_label_at ? 10 : i % 10));
    }
    for (int p = 0; p < 3072; ++p) f.put(static_cast<char>(cifar_pixel(i, p)));
  }
}

// A CIFAR-10 folder: data_batch_k holds records [100000*0 + ...]: batch k has sizes[k-1]
// records numbered consecutively from 0; the test batch is numbered from 50000.
const int64_t kBatch[5] = {7, 5, 9, 3, 6};  // 30 train records
const int64_t kTest10 = 8;
void write_cifar10(const std::string& dir, bool names = true) {
  fs::create_directories(dir);
  int64_t at = 0;
  for (int k = 0; k < 5; ++k) {
    write_records(dir + "/data_batch_" + std::to_string(k + 1) + ".bin", at, kBatch[k], false);
    at += kBatch[k];
  }
  write_records(dir + "/test_batch.bin", 50000, kTest10, false);
  if (names) {
    std::ofstream m(dir + "/batches.meta.txt");
    for (const char* n : kNames10) m << n << "\n";
    m << "\n\n";  // the real file ends with blank lines
  }
}

std::string error_of(const std::function<void()>& f) { return test::user_error_of(f); }

// All /images and /labels of a split, read with the HDF5 C API.
void read_split(const SplitInfo& split, std::vector<uint8_t>& images, std::vector<int32_t>& labels) {
  for (const auto& sh : split.shards) {
    hid_t f = H5Fopen(sh.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, "/images", H5P_DEFAULT);
    const size_t at = images.size();
    images.resize(at + static_cast<size_t>(sh.samples) * 3072);
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

class PrepCifar : public ::testing::Test {
 protected:
  void SetUp() override { root_ = test::make_temp_dir("cifar"); }
  void TearDown() override { fs::remove_all(root_); }
  PrepResult prep(const std::string& format, const std::string& input, const std::string& out,
                  const std::string& labels = "") {
    PrepOptions o;
    o.format = format;
    o.input = input;
    o.output = out;
    o.cifar100_labels = labels;
    o.shards = 4;
    o.test_shards = 2;
    o.chunk = 4;
    return run_prep(o);
  }
  std::string root_;
};

}  // namespace

TEST_F(PrepCifar, Cifar10ShardsHoldTheRecordsInFileOrder) {
  const std::string dir = root_ + "/cifar-10-batches-bin";
  write_cifar10(dir);
  for (const std::string& input : {dir, root_}) {  // the folder, or its parent
    const std::string out = root_ + "/ds";
    fs::remove_all(out);
    const PrepResult r = prep("cifar10", input, out);
    EXPECT_EQ(r.train_samples, 30);
    EXPECT_EQ(r.test_samples, kTest10);
    EXPECT_EQ(r.classes, 10);
    const DatasetInfo info = load_dataset(out);
    EXPECT_EQ(info.shape.channels, 3);
    EXPECT_EQ(info.shape.height, 32);
    EXPECT_EQ(info.shape.width, 32);
    EXPECT_EQ(info.classes, 10);
    ASSERT_EQ(info.class_names.size(), 10u);
    for (int c = 0; c < 10; ++c) EXPECT_EQ(info.class_names[c], kNames10[c]);
    std::vector<uint8_t> img;
    std::vector<int32_t> lab;
    read_split(info.train, img, lab);
    ASSERT_EQ(lab.size(), 30u);
    for (int64_t i = 0; i < 30; ++i) {
      ASSERT_EQ(lab[i], i % 10) << i;
      for (int p = 0; p < 3072; ++p) ASSERT_EQ(img[i * 3072 + p], cifar_pixel(i, p)) << "record " << i << " byte " << p;
    }
    img.clear();
    lab.clear();
    read_split(info.test, img, lab);
    ASSERT_EQ(lab.size(), static_cast<size_t>(kTest10));
    for (int64_t i = 0; i < kTest10; ++i) {
      ASSERT_EQ(lab[i], (50000 + i) % 10);
      for (int p = 0; p < 3072; ++p) ASSERT_EQ(img[i * 3072 + p], cifar_pixel(50000 + i, p));
    }
    // Per-channel mean/std of the train split in [0,1] units (population std), computed here.
    ASSERT_EQ(info.mean.size(), 3u);
    ASSERT_EQ(info.std.size(), 3u);
    for (int c = 0; c < 3; ++c) {
      double s = 0, s2 = 0;
      for (int64_t i = 0; i < 30; ++i)
        for (int p = c * 1024; p < (c + 1) * 1024; ++p) {
          const double v = cifar_pixel(i, p) / 255.0;
          s += v;
          s2 += v * v;
        }
      const double m = s / (30 * 1024), sd = std::sqrt(s2 / (30 * 1024) - m * m);
      EXPECT_NEAR(info.mean[c], m, 1e-9) << "channel " << c;
      EXPECT_NEAR(info.std[c], sd, 1e-9) << "channel " << c;
    }
    EXPECT_NE(info.mean[0], info.mean[2]);  // really per channel
  }
  // Without batches.meta.txt the classes stay unnamed.
  fs::remove(dir + "/batches.meta.txt");
  prep("cifar10", dir, root_ + "/unnamed");
  EXPECT_TRUE(load_dataset(root_ + "/unnamed").class_names.empty());
  std::ifstream j(root_ + "/unnamed/dataset.json");
  EXPECT_FALSE(nlohmann::json::parse(j).contains("class_names"));
}

TEST_F(PrepCifar, Cifar100FineAndCoarseLabels) {
  const std::string dir = root_ + "/cifar-100-binary";
  fs::create_directories(dir);
  write_records(dir + "/train.bin", 0, 23, true);
  write_records(dir + "/test.bin", 1000, 5, true);
  {
    std::ofstream fine(dir + "/fine_label_names.txt"), coarse(dir + "/coarse_label_names.txt");
    for (int c = 0; c < 100; ++c) fine << "fine" << c << "\n";
    for (int c = 0; c < 20; ++c) coarse << "coarse" << c << "\n";
  }
  for (const std::string labels : {"", "fine", "coarse"}) {
    const std::string out = root_ + "/ds-" + labels;
    prep("cifar100", root_, out, labels);
    const DatasetInfo info = load_dataset(out);
    const bool coarse = labels == "coarse";
    EXPECT_EQ(info.classes, coarse ? 20 : 100);
    ASSERT_EQ(info.class_names.size(), coarse ? 20u : 100u);
    EXPECT_EQ(info.class_names[7], (coarse ? "coarse7" : "fine7"));
    std::vector<uint8_t> img;
    std::vector<int32_t> lab;
    read_split(info.train, img, lab);
    ASSERT_EQ(lab.size(), 23u);
    for (int64_t i = 0; i < 23; ++i) {
      ASSERT_EQ(lab[i], coarse ? i % 20 : i % 100);
      for (int p = 0; p < 3072; ++p) ASSERT_EQ(img[i * 3072 + p], cifar_pixel(i, p));
    }
  }
}

TEST_F(PrepCifar, BadInputsNameTheFileAndTheFix) {
  const std::string dir = root_ + "/cifar-10-batches-bin";
  write_cifar10(dir);
  // Wrong size: one record cut short.
  fs::resize_file(dir + "/data_batch_3.bin", 9 * 3073 - 100);
  std::string e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find(dir + "/data_batch_3.bin is 27557 bytes, not a whole number of 3073-byte CIFAR-10 records (1 "
                         "label byte + 3072 pixel bytes)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("cifar-10-binary.tar.gz"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(root_ + "/x"));
  // A CIFAR-100 file under a CIFAR-10 name: the hint names the other format.
  write_records(dir + "/data_batch_3.bin", 0, 5, true);  // 5 × 3074 bytes: not a multiple of 3073
  e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find("fits 3074-byte records: is it CIFAR-100? use --format cifar100"), std::string::npos) << e;
  write_cifar10(dir);
  // Missing file.
  fs::remove(dir + "/test_batch.bin");
  e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find("CIFAR-10 file " + dir + "/test_batch.bin is missing"), std::string::npos) << e;
  write_cifar10(dir);
  // Label out of range.
  write_records(dir + "/data_batch_2.bin", 7, 5, false, 9);
  e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find(dir + "/data_batch_2.bin: record 2 has label 10 but CIFAR-10 labels are 0..9"), std::string::npos)
      << e;
  write_cifar10(dir);
  // Wrong number of class names.
  {
    std::ofstream m(dir + "/batches.meta.txt");
    m << "cat\ndog\n";
  }
  e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find(dir + "/batches.meta.txt lists 2 class names but CIFAR-10 has 10 classes"), std::string::npos) << e;
  // A class name that is not UTF-8 (dataset.json holds UTF-8 only): refused before any
  // decoding, naming it (issue 26 item 8: the JSON writer failed at the end, exit 3).
  {
    std::ofstream m(dir + "/batches.meta.txt");
    for (int c = 0; c < 10; ++c) m << (c == 3 ? std::string("c\xFF\xFEt") : "class" + std::to_string(c)) << "\n";
  }
  e = error_of([&] { prep("cifar10", dir, root_ + "/x"); });
  EXPECT_NE(e.find("the class name 'c\\xFF\\xFEt' of "), std::string::npos) << e;
  EXPECT_NE(e.find("is not UTF-8 text (byte 1)"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(root_ + "/x")) << "a refused prep writes nothing";
  write_cifar10(dir);
  // The python (pickle) version, as the folder or its parent.
  const std::string py = root_ + "/py/cifar-10-batches-py";
  fs::create_directories(py);
  std::ofstream(py + "/data_batch_1") << "pickle";
  std::ofstream(py + "/batches.meta") << "pickle";
  for (const std::string& input : {py, root_ + "/py"}) {
    e = error_of([&] { prep("cifar10", input, root_ + "/x"); });
    EXPECT_NE(e.find("holds the python (pickle) version of CIFAR-10; cnnscale prep reads the binary version: download "
                     "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"),
              std::string::npos)
        << e;
  }
  // Nothing CIFAR at all.
  fs::create_directories(root_ + "/empty");
  e = error_of([&] { prep("cifar10", root_ + "/empty", root_ + "/x"); });
  EXPECT_NE(e.find("holds neither data_batch_1.bin nor cifar-10-batches-bin/data_batch_1.bin"), std::string::npos) << e;
  // --cifar100-labels only with cifar100, and only fine|coarse.
  e = error_of([&] { prep("cifar10", dir, root_ + "/x", "coarse"); });
  EXPECT_NE(e.find("--cifar100-labels belongs to --format cifar100"), std::string::npos) << e;
  const std::string d100 = root_ + "/c100";
  fs::create_directories(d100);
  write_records(d100 + "/train.bin", 0, 3, true);
  write_records(d100 + "/test.bin", 0, 3, true, 1);
  e = error_of([&] { prep("cifar100", d100, root_ + "/x", "middle"); });
  EXPECT_NE(e.find("--cifar100-labels middle is not supported; use fine"), std::string::npos) << e;
  e = error_of([&] { prep("cifar100", d100, root_ + "/x"); });
  EXPECT_NE(e.find(d100 + "/test.bin: record 1 has label 100 but CIFAR-100 fine labels are 0..99"), std::string::npos)
      << e;
}
