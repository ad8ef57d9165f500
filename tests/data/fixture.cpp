// fixture.cpp — see fixture.hpp.
#include "data/fixture.hpp"

#include <hdf5.h>
#include <stdlib.h>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "data/prep.hpp"

namespace cnnscale::test {

namespace {
void write_pair(hid_t f, const char* xname, const char* yname, int64_t n, int64_t offset, SampleShape shape,
                int classes, int64_t bad_label_at) {
  const int64_t numel = shape.numel();
  std::vector<uint8_t> img(static_cast<size_t>(n * numel));
  std::vector<int64_t> lab(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < numel; ++p) img[i * numel + p] = fixture_pixel(offset + i, p);
    lab[i] = (offset + i) % classes;
  }
  if (bad_label_at >= 0 && bad_label_at < n) lab[bad_label_at] = classes + 3;
  hsize_t d[4] = {static_cast<hsize_t>(n), static_cast<hsize_t>(shape.channels), static_cast<hsize_t>(shape.height),
                  static_cast<hsize_t>(shape.width)};
  hid_t s = H5Screate_simple(4, d, nullptr);
  hid_t ds = H5Dcreate2(f, xname, H5T_STD_U8LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (n > 0) H5Dwrite(ds, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, img.data());
  H5Dclose(ds);
  H5Sclose(s);
  s = H5Screate_simple(1, d, nullptr);
  ds = H5Dcreate2(f, yname, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (n > 0) H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab.data());
  H5Dclose(ds);
  H5Sclose(s);
}
}  // namespace

void write_fixture(const std::string& file, int64_t n, int64_t n_test, SampleShape shape, int classes,
                   int64_t bad_label_at) {
  hid_t f = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error("cannot create " + file);
  write_pair(f, "/x", "/y", n, 0, shape, classes, bad_label_at);
  // Test images are numbered from 100000 so they differ from train images.
  write_pair(f, "/tx", "/ty", n_test, 100000, shape, classes, -1);
  H5Fclose(f);
}

void prep_fixture(const std::string& fixture, const std::string& dir, int shards, int test_shards, int64_t chunk) {
  PrepOptions o;
  o.format = "hdf5";
  o.input = fixture;
  o.output = dir;
  o.images = "/x";
  o.labels = "/y";
  o.test_images = "/tx";
  o.test_labels = "/ty";
  o.shards = shards;
  o.test_shards = test_shards;
  o.chunk = chunk;
  o.force = true;
  run_prep(o);
}

int64_t chunk_file_offset(const std::string& file, const std::string& dset, int chunk) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error("cannot open " + file);
  hid_t d = H5Dopen2(f, dset.c_str(), H5P_DEFAULT);
  hid_t sp = H5Dget_space(d);
  hsize_t coords[4];
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  const herr_t rc = H5Dget_chunk_info(d, sp, static_cast<hsize_t>(chunk), coords, &mask, &addr, &size);
  H5Sclose(sp);
  H5Dclose(d);
  H5Fclose(f);
  if (rc < 0) throw std::runtime_error("no chunk info for " + file + dset);
  return static_cast<int64_t>(addr);
}

void set_shard_label(const std::string& shard, int64_t index, int32_t value) {
  hid_t f = H5Fopen(shard.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error("cannot open " + shard);
  hid_t d = H5Dopen2(f, "/labels", H5P_DEFAULT);
  hid_t fs = H5Dget_space(d);
  hsize_t start[1] = {static_cast<hsize_t>(index)}, count[1] = {1};
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t ms = H5Screate_simple(1, count, nullptr);
  H5Dwrite(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, &value);
  H5Sclose(ms);
  H5Sclose(fs);
  H5Dclose(d);
  H5Fclose(f);
}

void flip_bytes(const std::string& file, int64_t offset, int n) {
  FILE* f = std::fopen(file.c_str(), "r+b");
  if (!f) throw std::runtime_error("cannot open " + file);
  for (int i = 0; i < n; ++i) {
    std::fseek(f, static_cast<long>(offset + i), SEEK_SET);
    const int c = std::fgetc(f);
    std::fseek(f, static_cast<long>(offset + i), SEEK_SET);
    std::fputc(c ^ 0x5a, f);
  }
  std::fclose(f);
}

std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = "/tmp/cnnscale-" + tag + ".XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed");
  return buf.data();
}

}  // namespace cnnscale::test
