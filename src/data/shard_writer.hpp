// shard_writer.hpp — writes one shard file: /images N×C×H×W (uint8, or the input's int16 /
// float16 / float32: ShardWriteOptions::dtype) and /labels int32 N (segmentation: label maps
// int32 N×H×W; regression: /targets float32 N×K),
// both chunked with the fletcher32 checksum filter (and gzip when asked), filled by
// sequential append()s. Used by `cnnscale prep` (one process, no other HDF5 user).
// Without gzip, /chunk_addresses uint64 N×3 (per /images chunk: its file offset, its
// stored Fletcher32 and its index, for the direct reader: chunk_reader.hpp), written only
// when the chunks lie in file order, each past the end of the one before (as HDF5 puts them).
// Ragged (prep --store original-max): /images is 1-D uint8 (extendible, chunks of an
// eighth of the largest sample, C·S·S/8 bytes within [16 KiB, 4 MiB], the same filters),
// the samples' C×H×W bytes back to back, with /offsets int64 N+1
// (sample i is bytes [offsets[i], offsets[i+1])) and /shapes int32 N×3 (C, H, W),
// filled by append_ragged() and written (with checksums) by close().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch_source.hpp"
#include "data/h5util.hpp"

namespace cnnscale {

struct ShardWriteOptions {
  int64_t chunk_samples = 64;  // samples per /images chunk
  int gzip_level = 0;          // 0 = no compression
  bool ragged = false;         // variable-size samples (see above)
  bool encoded = false;        // ragged samples stored as JPEG bytes (prep --store jpeg)
  SampleType dtype = SampleType::u8;  // /images' element type (fixed layout only unless u8)
  int targets = 0;             // > 0: /targets float32 N×targets instead of /labels
  bool label_maps = false;     // /labels int32 N×H×W (segmentation: a class per pixel)
};

// A writer that is destroyed without a successful close() (an error on the way: a full
// disk, a bad input image) discards its file: every HDF5 object of it is closed before the
// exception leaves, with its writes pointed at memory first (see discard()), and the
// caller removes the file.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, int64_t samples, SampleShape shape, const ShardWriteOptions& opts);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  // n samples: their values (n × C×H×W of dtype, as bytes) and labels (label maps: n × H×W;
  // or, with targets > 0,
  // `targets`: n × K floats; labels null).
  void append(const uint8_t* images, const int32_t* labels, int64_t n, const float* targets = nullptr);
  // Ragged shards: n samples of shapes[0..n), their bytes back to back in `bytes`;
  // `lengths` (--store jpeg: encoded samples) their byte counts, else shapes' numel().
  void append_ragged(const uint8_t* bytes, const SampleShape* shapes, const int32_t* labels, int64_t n,
                     const int64_t* lengths = nullptr);
  // Checks that exactly `samples` were appended, flushes and closes the file.
  void close();

 private:
  [[noreturn]] void write_failed(const char* doing) const;  // names the file and the OS's reason
  // Closes the datasets and the file of a shard that will not be finished. HDF5 1.10 frees
  // a file whose H5Fclose fails (its flush, on a full disk) but keeps its id, and its exit
  // handler closes that id again: SIGSEGV in H5F__close_cb after the right message (issue
  // 39; fixed in later HDF5, HDFGroup/hdf5#2291). Nothing of a discarded shard is worth
  // writing, so its descriptor (the sec2 driver's) is first pointed at an anonymous memory
  // file: the close's flush goes there and cannot fail for want of space. Takes hdf5_mutex().
  void discard() noexcept;
  void build(const ShardWriteOptions& opts);  // the constructor's HDF5 objects
  bool closed_ = false;
  std::string path_;
  int64_t samples_, written_ = 0;
  SampleShape shape_;
  bool ragged_ = false;
  int gzip_level_ = 0;
  SampleType dtype_ = SampleType::u8;
  int targets_ = 0;
  bool label_maps_ = false;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> shapes_;
  H5Id file_, images_, labels_;
  void write_labels(const int32_t* labels, int64_t n);
  void write_targets(const float* targets, int64_t n);
  void write_chunk_addresses();
};

}  // namespace cnnscale
