// shard_writer.hpp — writes one shard file: /images uint8 N×C×H×W and /labels int32 N,
// both chunked with the fletcher32 checksum filter (and gzip when asked), filled by
// sequential append()s. Used by `cnnscale prep` (one process, no other HDF5 user).
#pragma once
#include <cstdint>
#include <string>

#include "data/batch_source.hpp"
#include "data/h5util.hpp"

namespace cnnscale {

struct ShardWriteOptions {
  int64_t chunk_samples = 64;  // samples per /images chunk
  int gzip_level = 0;          // 0 = no compression
};

class ShardWriter {
 public:
  ShardWriter(const std::string& path, int64_t samples, SampleShape shape, const ShardWriteOptions& opts);
  void append(const uint8_t* images, const int32_t* labels, int64_t n);
  // Checks that exactly `samples` were appended, flushes and closes the file.
  void close();

 private:
  [[noreturn]] void write_failed(const char* doing) const;  // names the file and the OS's reason
  std::string path_;
  int64_t samples_, written_ = 0;
  SampleShape shape_;
  H5Id file_, images_, labels_;
};

}  // namespace cnnscale
