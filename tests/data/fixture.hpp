// fixture.hpp — small, self-describing HDF5 inputs for the data tests: image i's
// pixel p is fixture_pixel(i, p) (the first two bytes spell i), label i % classes.
#pragma once
#include <cstdint>
#include <string>

#include "data/batch_source.hpp"

namespace cnnscale::test {

inline uint8_t fixture_pixel(int64_t i, int64_t p) {
  if (p == 0) return static_cast<uint8_t>(i & 255);
  if (p == 1) return static_cast<uint8_t>((i >> 8) & 255);
  return static_cast<uint8_t>((i * 7 + p * 13) % 256);
}

// Writes `file` with /x (uint8 n×C×H×W), /y (int64 n), /tx and /ty (test, n_test).
// bad_label_at >= 0 puts label `classes + 3` there (train).
void write_fixture(const std::string& file, int64_t n, int64_t n_test, SampleShape shape, int classes,
                   int64_t bad_label_at = -1);

// Preps the fixture into dir with the given shard counts (run_prep, hdf5 format).
void prep_fixture(const std::string& fixture, const std::string& dir, int shards, int test_shards, int64_t chunk = 16);

// File offset of chunk `chunk` of dataset `dset` in `file` (H5Dget_chunk_info).
int64_t chunk_file_offset(const std::string& file, const std::string& dset, int chunk);

// Overwrites /labels[index] of a shard with `value` (bypassing prep's checks).
void set_shard_label(const std::string& shard, int64_t index, int32_t value);

// Flips (xor 0x5a) `n` bytes of `file` starting at `offset`.
void flip_bytes(const std::string& file, int64_t offset, int n);

// A fresh directory under /tmp (removed by the caller).
std::string make_temp_dir(const std::string& tag);

}  // namespace cnnscale::test
