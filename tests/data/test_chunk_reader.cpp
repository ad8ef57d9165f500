// test_chunk_reader.cpp — the direct shard reader (chunk_reader.hpp) against HDF5 itself:
//  - fletcher32() equals libhdf5's own H5_checksum_fletcher32 on every length 0..1500
//    (odd ones, the 360-word block edges), on all-0xFF input (the largest sums, where a
//    folding mistake shows) and on megabyte buffers;
//  - every byte range of a fixed-size shard (N×C×H×W, chunks of 16 samples) and of a
//    ragged one (1-D, variable samples, prep's layout) reads as H5Dread reads it, also
//    from four threads at once;
//  - a flipped byte in a chunk: a read touching it is a UserError naming the shard, the
//    chunk and Fletcher32, as HDF5 refuses it; ranges elsewhere still read;
//  - a checksum stored byte-pair-swapped (HDF5 before 1.6.3) is accepted, as HDF5 does;
//  - the shard's /chunk_addresses (prep's list: file offset, stored checksum and index per
//    chunk, in file order) equals HDF5's own lookups; a list gone stale or shifted in file
//    order (entries pointing at the next valid chunks, every row or from row 2 on, or at
//    no chunk: issue 48 item 5) is refused when the shard is opened, naming the row that
//    is not HDF5's (the first or the last) — never read as data, never as damage;
//  - two rows of the list swapped (issue 39: read as good data), and two rows' offsets and
//    checksums swapped with their indices kept, are refused when the shard is opened;
//  - a list of an older prep (no index column) in file order is used (the bytes are
//    HDF5's); one out of order (two rows swapped) or one failing its own checksum is
//    ignored (chunk_list() says why) and the chunks are looked up: the bytes are HDF5's;
//  - a gzip shard gets no direct reader (HDF5's path reads it).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "data/chunk_reader.hpp"
#include "data/fixture.hpp"
#include "data/h5util.hpp"
#include "data/shard_writer.hpp"
#include "util/error.hpp"

extern "C" uint32_t H5_checksum_fletcher32(const void* data, size_t len);  // exported by libhdf5

using namespace cnnscale;
using namespace cnnscale::test;
namespace fs = std::filesystem;

namespace {

struct Shard {
  H5Id file, images;
  std::vector<uint8_t> bytes;  // all of /images, as H5Dread gives it
};

Shard open_shard(const std::string& path) {
  Shard s;
  std::string cause;
  s.file = h5_open_readonly(path, cause);
  EXPECT_TRUE(s.file.valid()) << cause;
  s.images = h5_dataset(H5Dopen2(s.file, "/images", H5P_DEFAULT));
  H5Id space = h5_space(H5Dget_space(s.images));
  s.bytes.resize(static_cast<size_t>(H5Sget_simple_extent_npoints(space)));
  EXPECT_GE(H5Dread(s.images, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.bytes.data()), 0);
  return s;
}

// The UserError message of reading [begin, end), or "" when it reads.
std::string read_error(const DirectChunkReader& r, int64_t begin, int64_t end) {
  std::vector<uint8_t> out(static_cast<size_t>(end - begin)), buf;
  try {
    r.read(begin, end, out.data(), buf);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> direct_read(const DirectChunkReader& r, int64_t begin, int64_t end) {
  std::vector<uint8_t> out(static_cast<size_t>(end - begin)), buf;
  r.read(begin, end, out.data(), buf);
  return out;
}

// A ragged shard of `n` samples, 3×h×w with h, w in [20, 120]: chunks of 16 KiB (prep's
// smallest: an eighth of the largest sample, 3·128·128 / 8 bytes, is less).
constexpr int64_t kRaggedChunk = 16384;
std::string write_ragged(const std::string& dir, int n, int gzip = 0) {
  std::string path = dir + "/ragged" + std::to_string(gzip) + ".h5";
  ShardWriteOptions o;
  o.ragged = true;
  o.gzip_level = gzip;
  ShardWriter w(path, n, SampleShape{3, 128, 128}, o);
  std::mt19937 rng(5);
  for (int i = 0; i < n; ++i) {
    const SampleShape sh{3, 20 + static_cast<int>(rng() % 101), 20 + static_cast<int>(rng() % 101)};
    std::vector<uint8_t> px(static_cast<size_t>(sh.numel()));
    for (auto& v : px) v = static_cast<uint8_t>(rng());
    const int32_t label = i % 4;
    w.append_ragged(px.data(), &sh, &label, 1);
  }
  w.close();
  return path;
}

class ChunkReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("chunkreader"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

}  // namespace

TEST(Fletcher32, SameAsHdf5sOwnOnEveryLength) {
  std::mt19937 rng(1);
  std::vector<uint8_t> data(1 << 20);
  for (auto& v : data) v = static_cast<uint8_t>(rng());
  for (size_t len = 0; len <= 1500; ++len)
    ASSERT_EQ(fletcher32(data.data() + 1, len), H5_checksum_fletcher32(data.data() + 1, len)) << len;
  for (size_t len : {size_t{65536}, size_t{147456}, size_t{307200 + 1}, data.size()})
    ASSERT_EQ(fletcher32(data.data(), len), H5_checksum_fletcher32(data.data(), len)) << len;
  std::vector<uint8_t> ones(300000, 0xFF);
  for (size_t len : {size_t{719}, size_t{720}, size_t{721}, size_t{1441}, ones.size()})
    ASSERT_EQ(fletcher32(ones.data(), len), H5_checksum_fletcher32(ones.data(), len)) << "0xFF x " << len;
}

TEST_F(ChunkReaderTest, FixedSizeShardReadsAsHdf5ReadsIt) {
  write_fixture(dir_ + "/fx.h5", 100, 10, SampleShape{3, 8, 8}, 4);
  prep_fixture(dir_ + "/fx.h5", dir_ + "/prep", 1, 1, 16);
  const std::string path = dir_ + "/prep/train-00000-of-00001.h5";
  Shard s = open_shard(path);
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->chunk_bytes(), 16 * 3 * 8 * 8);
  const int64_t total = static_cast<int64_t>(s.bytes.size()), numel = 3 * 8 * 8;
  for (int64_t i = 0; i * numel < total; ++i)  // every sample
    ASSERT_EQ(direct_read(*r, i * numel, (i + 1) * numel),
              std::vector<uint8_t>(s.bytes.begin() + i * numel, s.bytes.begin() + (i + 1) * numel))
        << "sample " << i;
  EXPECT_EQ(direct_read(*r, 0, total), s.bytes);
  EXPECT_TRUE(direct_read(*r, 7, 7).empty());
}

TEST_F(ChunkReaderTest, RaggedShardFromFourThreadsAtOnce) {
  const std::string path = write_ragged(dir_, 60);
  Shard s = open_shard(path);
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->chunk_bytes(), kRaggedChunk);
  const int64_t total = static_cast<int64_t>(s.bytes.size());
  ASSERT_GT(total, 4 * r->chunk_bytes());
  std::vector<int> bad(4, 0);
  std::vector<std::thread> ts;
  ts.reserve(4);
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      std::vector<uint8_t> buf;
      for (int i = 0; i < 300; ++i) {
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint32_t>(total));
        const int64_t b = std::min(total, a + static_cast<int64_t>(rng() % 200000));
        std::vector<uint8_t> out(static_cast<size_t>(b - a));
        r->read(a, b, out.data(), buf);
        if (!std::equal(out.begin(), out.end(), s.bytes.begin() + a)) ++bad[static_cast<size_t>(t)];
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST_F(ChunkReaderTest, ADamagedChunkIsRefusedAsHdf5RefusesIt) {
  const std::string path = write_ragged(dir_, 60);
  const int64_t chunk = kRaggedChunk;
  flip_bytes(path, chunk_file_offset(path, "/images", 2) + 100, 1);
  Shard s;
  {
    std::string cause;
    s.file = h5_open_readonly(path, cause);
    s.images = h5_dataset(H5Dopen2(s.file, "/images", H5P_DEFAULT));
  }
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  const std::string m = read_error(*r, 2 * chunk - 10, 2 * chunk + 10);
  EXPECT_NE(m.find("shard " + path + " is damaged: chunk 2 "), std::string::npos) << "a flipped byte: " << m;
  EXPECT_NE(m.find("Fletcher32"), std::string::npos) << m;
  EXPECT_EQ(direct_read(*r, 0, 2 * chunk).size(), static_cast<size_t>(2 * chunk));  // chunks 0 and 1 are fine
  // HDF5 agrees: the same bytes fail its own read.
  h5_quiet();
  H5Id fs_ = h5_space(H5Dget_space(s.images));
  const hsize_t start = static_cast<hsize_t>(2 * chunk), count = 10;
  H5Sselect_hyperslab(fs_, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(1, &count, nullptr));
  uint8_t tmp[10];
  EXPECT_LT(H5Dread(s.images, H5T_NATIVE_UINT8, ms, fs_, H5P_DEFAULT, tmp), 0);
  h5_error_cause();
}

TEST_F(ChunkReaderTest, AChecksumFromBeforeHdf5_1_6_3IsAcceptedAsHdf5AcceptsIt) {
  const std::string path = write_ragged(dir_, 30);
  const int64_t chunk = kRaggedChunk;
  const int64_t at = chunk_file_offset(path, "/images", 1);
  std::vector<uint8_t> c(static_cast<size_t>(chunk + 4));
  {
    std::ifstream in(path, std::ios::binary);
    in.seekg(at);
    in.read(reinterpret_cast<char*>(c.data()), static_cast<std::streamsize>(c.size()));
  }
  const uint32_t sum = H5_checksum_fletcher32(c.data(), static_cast<size_t>(chunk));
  const uint8_t swapped[4] = {static_cast<uint8_t>(sum >> 8), static_cast<uint8_t>(sum),
                              static_cast<uint8_t>(sum >> 24),
                              static_cast<uint8_t>(sum >> 16)};  // little-endian bytes of the pair-swapped value
  ASSERT_NE(std::memcmp(swapped, c.data() + chunk, 4), 0);
  {
    std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(at + chunk);
    io.write(reinterpret_cast<const char*>(swapped), 4);
  }
  {  // a file of HDF5 before 1.6.3 has no list of chunk addresses (prep's, made with the right sum)
    H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    ASSERT_GE(H5Ldelete(f, "/chunk_addresses", H5P_DEFAULT), 0);
  }
  Shard s = open_shard(path);  // HDF5 reads it all (EXPECTs inside)
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(direct_read(*r, chunk - 5, 2 * chunk + 5),
            std::vector<uint8_t>(s.bytes.begin() + chunk - 5, s.bytes.begin() + 2 * chunk + 5));
}

TEST_F(ChunkReaderTest, GzipShardsKeepHdf5sPath) {
  const std::string path = write_ragged(dir_, 10, 1);
  Shard s = open_shard(path);
  EXPECT_EQ(DirectChunkReader::open(path, s.images), nullptr);
}

namespace {
// Rewrites column `col` of a shard's /chunk_addresses (0: the offsets; the rest as it is).
void set_list_offsets(const std::string& path, const std::vector<uint64_t>& offsets, hsize_t col = 0) {
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  H5Id d = h5_dataset(H5Dopen2(f, "/chunk_addresses", H5P_DEFAULT));
  H5Id fs_ = h5_space(H5Dget_space(d));
  const hsize_t start[2] = {0, col}, count[2] = {offsets.size(), 1};
  H5Sselect_hyperslab(fs_, H5S_SELECT_SET, start, nullptr, count, nullptr);
  H5Id ms = h5_space(H5Screate_simple(2, count, nullptr));
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT64, ms, fs_, H5P_DEFAULT, offsets.data()), 0);
}
std::vector<uint64_t> list_of(const std::string& path) {
  Shard s = open_shard(path);
  H5Id d = h5_dataset(H5Dopen2(s.file, "/chunk_addresses", H5P_DEFAULT));
  H5Id sp = h5_space(H5Dget_space(d));
  std::vector<uint64_t> rows(static_cast<size_t>(H5Sget_simple_extent_npoints(sp)));
  EXPECT_GE(H5Dread(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  return rows;
}
}  // namespace

TEST_F(ChunkReaderTest, TheShardsChunkListIsHdf5sAndAStaleOneIsNamed) {
  const std::string path = write_ragged(dir_, 40);
  const std::vector<uint64_t> rows = list_of(path);
  Shard s = open_shard(path);
  const int64_t n = static_cast<int64_t>(rows.size() / 3);
  ASSERT_GT(n, 4);
  EXPECT_EQ(n, (static_cast<int64_t>(s.bytes.size()) + kRaggedChunk - 1) / kRaggedChunk);
  for (int64_t c = 0; c < n; ++c) {  // offsets as HDF5 looks them up; checksums as stored there
    hsize_t at = static_cast<hsize_t>(c * kRaggedChunk), size = 0;
    unsigned mask = 0;
    haddr_t addr = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(s.images, &at, &mask, &addr, &size), 0);
    EXPECT_EQ(rows[static_cast<size_t>(3 * c)], addr) << c;
    EXPECT_EQ(rows[static_cast<size_t>(3 * c + 2)], static_cast<uint64_t>(c));
    std::vector<uint8_t> chunk(static_cast<size_t>(kRaggedChunk), 0);  // the last one ends in fill (0)
    std::copy(s.bytes.begin() + c * kRaggedChunk,
              s.bytes.begin() + std::min<int64_t>((c + 1) * kRaggedChunk, static_cast<int64_t>(s.bytes.size())),
              chunk.begin());
    EXPECT_EQ(rows[static_cast<size_t>(3 * c + 1)], fletcher32(chunk.data(), chunk.size())) << c;
  }
  s = Shard();
  for (int64_t c = 1; c < n; ++c)  // as prep writes them: in file order, back to back
    EXPECT_EQ(rows[static_cast<size_t>(3 * c)], rows[static_cast<size_t>(3 * c - 3)] + kRaggedChunk + 4) << c;
  // The entries of chunks 2.. pointing at the chunk after (valid chunks, the wrong ones; in
  // file order, as a list left behind by a rewrite of the file can be, or as issue 48 item
  // 5 shifted one): the last row is not HDF5's, refused when the shard is opened.
  const auto refused_at_open = [&](int64_t row, uint64_t says, uint64_t hdf5) {
    s = open_shard(path);
    try {
      DirectChunkReader::open(path, s.images);
      ADD_FAILURE() << "a list whose row " << row << " is not HDF5's was taken";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("has a /chunk_addresses list that does not match its chunks (row " +
                                           std::to_string(row) + " says file offset " + std::to_string(says) +
                                           ", HDF5 says " + std::to_string(hdf5) + ": the list was edited or damaged)"),
                std::string::npos)
          << e.what();
    }
    s = Shard();
  };
  const uint64_t last = rows[static_cast<size_t>(3 * (n - 1))];
  std::vector<uint64_t> offsets(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c)
    offsets[static_cast<size_t>(c)] = rows[static_cast<size_t>(3 * c)] + (c >= 2 ? kRaggedChunk + 4 : 0);
  set_list_offsets(path, offsets);
  refused_at_open(n - 1, last + kRaggedChunk + 4, last);
  // Every row shifted by one chunk (the first row too): row 0 is named.
  for (int64_t c = 0; c < n; ++c) offsets[static_cast<size_t>(c)] = rows[static_cast<size_t>(3 * c)] + kRaggedChunk + 4;
  set_list_offsets(path, offsets);
  refused_at_open(0, rows[0] + kRaggedChunk + 4, rows[0]);
  // Pointing at no chunk (a byte past each, from chunk 2 on): the last row is not HDF5's.
  for (int64_t c = 0; c < n; ++c) offsets[static_cast<size_t>(c)] = rows[static_cast<size_t>(3 * c)] + (c >= 2);
  set_list_offsets(path, offsets);
  refused_at_open(n - 1, last + 1, last);
  // The offsets right again: the list is taken and reads as HDF5 reads.
  for (int64_t c = 0; c < n; ++c) offsets[static_cast<size_t>(c)] = rows[static_cast<size_t>(3 * c)];
  set_list_offsets(path, offsets);
  s = open_shard(path);
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->chunk_list(), DirectChunkReader::ChunkList::used);
  EXPECT_EQ(direct_read(*r, 0, static_cast<int64_t>(s.bytes.size())), s.bytes);
  r.reset();
  s = Shard();
  // Row 2 holding chunk 3's checksum (its offset right): the chunk found there is not the
  // one listed, named as the list's fault when it is read, never read as data.
  std::vector<uint64_t> sums(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) sums[static_cast<size_t>(c)] = rows[static_cast<size_t>(3 * c + 1)];
  sums[2] = rows[3 * 3 + 1];
  set_list_offsets(path, sums, 1);
  s = open_shard(path);
  r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_NE(
      read_error(*r, 2 * kRaggedChunk, 2 * kRaggedChunk + 10)
          .find("has a /chunk_addresses list that does not match its chunks (another chunk lies where chunk 2 was"),
      std::string::npos);
  EXPECT_EQ(direct_read(*r, 0, 2 * kRaggedChunk),  // chunks 0 and 1 are listed right
            std::vector<uint8_t>(s.bytes.begin(), s.bytes.begin() + 2 * kRaggedChunk));
}

namespace {
// Replaces a shard's /chunk_addresses with `rows` (columns `cols`), as a tool could.
void rewrite_list(const std::string& path, const std::vector<uint64_t>& rows, hsize_t cols) {
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  ASSERT_GE(H5Ldelete(f, "/chunk_addresses", H5P_DEFAULT), 0);
  const hsize_t dims[2] = {rows.size() / cols, cols};
  H5Id sp = h5_space(H5Screate_simple(2, dims, nullptr));
  H5Id pl = h5_plist(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(pl, 2, dims);
  H5Pset_fletcher32(pl);
  H5Id d = h5_dataset(H5Dcreate2(f, "/chunk_addresses", H5T_STD_U64LE, sp, H5P_DEFAULT, pl, H5P_DEFAULT));
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
}
}  // namespace

// Issue 39: rows 1 and 2 swapped whole (offset, checksum and all; the list's own checksum
// right) read chunk 2's bytes as chunk 1's. The index in each row refuses it at open.
TEST_F(ChunkReaderTest, SwappedListRowsAreRefusedNotRead) {
  const std::string path = write_ragged(dir_, 40);
  std::vector<uint64_t> rows = list_of(path);
  ASSERT_GT(rows.size(), 9u);
  std::swap_ranges(rows.begin() + 3, rows.begin() + 6, rows.begin() + 6);
  rewrite_list(path, rows, 3);
  Shard s = open_shard(path);
  try {
    DirectChunkReader::open(path, s.images);
    FAIL() << "a list with rows 1 and 2 swapped was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(" has a /chunk_addresses list that does not match its chunks (row 1 lists "
                                         "chunk 2: its rows were reordered or rewritten)"),
              std::string::npos)
        << e.what();
  }
}

// Issue 39, review: the offsets and checksums of rows 1 and 2 swapped, each row keeping
// its index, read chunk 2's bytes as chunk 1's. Prep lists the chunks in file order, so
// row 2 now lists a chunk before row 1's: refused at open.
TEST_F(ChunkReaderTest, OffsetsSwappedBetweenRowsAreRefusedNotRead) {
  const std::string path = write_ragged(dir_, 40);
  std::vector<uint64_t> rows = list_of(path);
  ASSERT_GT(rows.size(), 9u);
  const uint64_t first = rows[3];
  std::swap_ranges(rows.begin() + 3, rows.begin() + 5, rows.begin() + 6);
  rewrite_list(path, rows, 3);
  Shard s = open_shard(path);
  try {
    DirectChunkReader::open(path, s.images);
    FAIL() << "a list with the offsets of rows 1 and 2 swapped was taken";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(" has a /chunk_addresses list that does not match its chunks (row 2 lists "
                                         "file offset " +
                                         std::to_string(first) + ", before the end of row 1's chunk at offset " +
                                         std::to_string(rows[3]) +
                                         ", but prep lists the chunks in file order: its rows were reordered or "
                                         "rewritten)"),
              std::string::npos)
        << e.what();
  }
}

// A list of an older prep (offset and checksum only) in file order is used; with two rows
// swapped it is out of order and ignored, as is a list whose own chunk fails its
// Fletcher32: the chunks looked up (HDF5's bytes), and chunk_list() says why, for prep
// --verify and the reader's warning.
TEST_F(ChunkReaderTest, AnOlderListInOrderIsUsedOtherwiseIgnored) {
  const std::string path = write_ragged(dir_, 40);
  const std::vector<uint64_t> rows = list_of(path);
  const size_t n = rows.size() / 3;
  std::vector<uint64_t> older;
  for (size_t c = 0; c < n; ++c) older.insert(older.end(), {rows[3 * c], rows[3 * c + 1]});
  rewrite_list(path, older, 2);
  {
    Shard s = open_shard(path);
    auto r = DirectChunkReader::open(path, s.images);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->chunk_list(), DirectChunkReader::ChunkList::used);
    EXPECT_EQ(direct_read(*r, 0, static_cast<int64_t>(s.bytes.size())), s.bytes);
  }
  std::swap_ranges(older.begin() + 2, older.begin() + 4, older.begin() + 4);
  rewrite_list(path, older, 2);
  {
    Shard s = open_shard(path);
    auto r = DirectChunkReader::open(path, s.images);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->chunk_list(), DirectChunkReader::ChunkList::unusable);
    EXPECT_NE(r->chunk_list_problem().find("is out of file order (row 2 lists file offset " + std::to_string(rows[3]) +
                                           ", before the end of row 1's chunk"),
              std::string::npos)
        << r->chunk_list_problem();
    EXPECT_EQ(direct_read(*r, 0, static_cast<int64_t>(s.bytes.size())), s.bytes);
  }
  rewrite_list(path, rows, 3);
  {  // one byte of the list's chunk flipped in the file
    const int64_t at = chunk_file_offset(path, "/chunk_addresses", 0);
    std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
    io.seekg(at + 9);
    char b = 0;
    io.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);
    io.seekp(at + 9);
    io.write(&b, 1);
  }
  Shard s = open_shard(path);
  auto r = DirectChunkReader::open(path, s.images);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->chunk_list(), DirectChunkReader::ChunkList::unusable);
  EXPECT_NE(r->chunk_list_problem().find("fails its checksum"), std::string::npos) << r->chunk_list_problem();
  EXPECT_EQ(direct_read(*r, 0, static_cast<int64_t>(s.bytes.size())), s.bytes);
}
