// chunk_reader.hpp — a shard's /images bytes read straight from the file by any reader
// thread, in parallel, with HDF5 only for the metadata (issue 27 item 3).
//
// Why: HDF5 (Debian's build) is not thread-safe, so every read ran under one process-wide
// lock, and its Fletcher32 check, a scalar loop, ran inside it: 27 % of a reader core on
// `data-bench --augment rrc224,hflip` (perf), and a second --data-threads thread added
// 41 % instead of 100 %. The data set's layout makes a direct read simple: /images is
// chunked, each stored chunk is the chunk's bytes and then its 4-byte Fletcher32
// checksum (H5Zfletcher32.c), nothing else unless gzip was asked for.
//
// open() (under hdf5_mutex()) takes a dataset whose only filter is fletcher32 and whose
// elements are 1, 2 or 4 little-endian bytes (every sample type prep writes; read as
// bytes), reads every chunk's file address from the shard's /chunk_addresses
// (prep writes it) or, in shards without a usable one, looks each up
// (H5Dget_chunk_info_by_coord: its cost grows with the chunk count), and reads through
// HDF5's own descriptor of the file (the sec2 driver's; the file stays open as long as the
// caller's dataset). Each row of the list is bound to its chunk: prep lists the chunks in
// file order (HDF5 gives a file written once, sequentially, its chunks in write order:
// every shard of every --store kind and input format checked, chunks of 68 B to 1.5 MiB,
// up to 5 000 a shard; the writer checks it before it writes the list), so a list whose
// rows are not each past the end of the chunk before is refused at open, however it was
// reordered (issue 39: two rows swapped, the list's own checksum made right, read as good
// data; then the offsets swapped with the rows' indices kept), as is a row whose index is
// not its own. Rows in order can still all be shifted (issue 48 item 5: row c holding chunk
// c+1's offset and checksum, the last row a copy of the last chunk appended to the file), so
// the list is also anchored to HDF5's own index (H5Dget_chunk_info_by_coord): its first and
// last rows, and both rows around any place where two rows are not back to back (prep's
// chunks are, so a list as prep writes it costs two lookups), must give HDF5's offsets —
// between anchors, back-to-back rows are then HDF5's chunks; a row that disagrees is refused
// at open ("row R says file offset X, HDF5 says Y"). And the chunk found at a listed offset
// must carry the checksum the list holds for it: a list that a rewrite of the file
// (h5repack) made stale is named as such, never read as data or as damage; a checksum failure with a listed address is checked
// against HDF5's lookup first. A list of an older prep (two columns, no index) in file
// order is used the same way; one out of order, or one that cannot be read (its own
// Fletcher32 fails), is ignored: the chunks are looked up, and chunk_list() says why for
// `prep --verify` and the reader's warning. Then
// read() is pread() of the chunks a byte range touches (one call per run of chunks stored
// back to back), each chunk's checksum verified as HDF5 verifies it (the stored value, or
// the byte-pair-swapped one of files from HDF5 before 1.6.3), by a vectorised Fletcher32
// that computes HDF5's exact value. Any other layout (gzip, a chunk with a filter skipped,
// an unallocated chunk) gets no reader: the caller keeps HDF5's path.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cnnscale {

// HDF5's H5_checksum_fletcher32 (big-endian 16-bit words, sums folded every 360 words),
// the same value, vectorised.
uint32_t fletcher32(const uint8_t* data, size_t len);

// The fix every message about a bad /chunk_addresses list ends with (reads and verify).
inline constexpr const char* kChunkListFix =
    "re-create the data set with `cnnscale prep`, or delete that list (h5py: del f['chunk_addresses']) and cnnscale "
    "looks the chunks up itself";

class DirectChunkReader {
 public:
  // `images`: an open dataset of shard `path` (1-D bytes, or N×C×H×W bytes chunked along N
  // only), kept open by the caller while this reader lives (this reader reads through its
  // file's descriptor). Caller holds hdf5_mutex().
  // nullptr when the layout is not the plain one above.
  static std::unique_ptr<DirectChunkReader> open(const std::string& path, hid_t images);
  ~DirectChunkReader();
  DirectChunkReader(const DirectChunkReader&) = delete;
  DirectChunkReader& operator=(const DirectChunkReader&) = delete;

  // Bytes [begin, end) of the dataset in row-major order into dst. Thread-safe, no lock.
  // `buf` is the caller's (per thread) staging buffer. A failed read or checksum is a
  // UserError: "shard PATH is damaged: …".
  // With `io_s` / `checksum_s`, adds the seconds spent in pread and in the checksums.
  void read(int64_t begin, int64_t end, uint8_t* dst, std::vector<uint8_t>& buf, double* io_s = nullptr,
            double* checksum_s = nullptr) const;
  // Bytes per chunk (the amplification of a sample read: whole chunks are read).
  int64_t chunk_bytes() const { return chunk_bytes_; }

  // The shard's /chunk_addresses: absent, used, or unusable (ignored; chunk_list_problem()
  // says why, e.g. "fails its checksum (…)", or "is out of file order (…)" for an older
  // prep's list).
  enum class ChunkList { absent, used, unusable };
  ChunkList chunk_list() const { return list_; }
  const std::string& chunk_list_problem() const { return list_problem_; }

 private:
  DirectChunkReader() = default;
  // After a checksum failure with addresses from the shard's list: does HDF5 put chunk c
  // where the list says (so the chunk is damaged), or elsewhere (the list is stale)?
  bool table_entry_right(int64_t c) const;
  std::string path_;
  int fd_ = -1;  // HDF5's own (sec2 driver), or ours when owns_fd_
  bool owns_fd_ = false;
  hid_t images_ = -1;  // not owned: the caller's dataset outlives this reader
  bool from_table_ = false;
  ChunkList list_ = ChunkList::absent;
  std::string list_problem_;
  int64_t chunk_bytes_ = 0, chunk_rows_ = 0, total_bytes_ = 0;
  std::vector<uint64_t> addr_;  // per chunk: file offset of its stored bytes (chunk_bytes_ + 4 of them)
  std::vector<uint32_t> sums_;  // per chunk, from the shard's list: its stored checksum
};

}  // namespace cnnscale
