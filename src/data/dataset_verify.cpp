// dataset_verify.cpp — verify_dataset(): reads every image chunk of every shard so
// that HDF5 checks each chunk's fletcher32 checksum (`cnnscale prep --verify DIR`); reads
// every byte once more through the shard's /chunk_addresses list where it has one and
// compares it with HDF5's (HDF5's own index binds each list entry to its chunk); and
// checks the layout dataset.json declares against the bytes (sample_layout jpeg: every
// sample a JPEG of its /shapes size whose entropy-coded data decodes without a warning).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "data/chunk_reader.hpp"
#include "data/dataset.hpp"
#include "data/h5util.hpp"
#include "data/image_decode.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace cnnscale {
namespace {

// Bytes [begin, end) of /images, which HDF5 read into `hdf5`, read again through the
// shard's list (prep's, for the direct reader: chunk_reader.hpp): each chunk must be found
// where the list says, carry the checksum the list holds, and hold HDF5's bytes — a list
// left stale by a rewrite of the file, or with rows that point at each other's chunks, is
// named here, not in the middle of a training run.
void compare_through_list(const std::string& path, const DirectChunkReader& r, int64_t begin, int64_t end,
                          const std::vector<uint8_t>& hdf5, std::vector<uint8_t>& piece, std::vector<uint8_t>& chunks) {
  piece.resize(static_cast<size_t>(end - begin));
  r.read(begin, end, piece.data(), chunks);
  if (std::memcmp(piece.data(), hdf5.data(), piece.size()) != 0)
    fail("shard ", path, " has a /chunk_addresses list that does not match its chunks (bytes ", begin, "..", end - 1,
         " of /images read through it differ from HDF5's reading: it was rewritten): ", kChunkListFix);
}

// Sample k of a --store jpeg shard (its bytes at `p`): a JPEG of its /shapes size.
void check_stored_jpeg(const DatasetInfo& info, const SplitInfo& split, const ShardInfo& sh, int64_t k,
                       const uint8_t* p) {
  const size_t g = static_cast<size_t>(sh.first_index + k);
  const int64_t len = split.lengths[g];
  const SampleShape s = split.shapes[g];
  const std::string what = "shard " + sh.path + ": sample " + std::to_string(k) + " (" + split.name + " sample " +
                           std::to_string(sh.first_index + k) + ")";
  if (!is_jpeg(p, static_cast<size_t>(len))) {
    char start[32];
    std::snprintf(start, sizeof start, "0x%02x 0x%02x 0x%02x", p[0], len > 1 ? p[1] : 0, len > 2 ? p[2] : 0);
    fail(what, " is not a JPEG (it starts with ", start, "), but ", info.dir, "/dataset.json says sample_layout jpeg",
         len == s.numel() ? "; it holds as many bytes as its decoded pixels (" + std::to_string(s.channels) + "x" +
                                std::to_string(s.height) + "x" + std::to_string(s.width) +
                                "): the shards hold decoded images (sample_layout \"ragged\") — restore dataset.json "
                                "or re-create the data set with `cnnscale prep`"
                          : std::string("; the shards do not match it — re-create the data set with `cnnscale prep`"));
  }
  check_jpeg(p, static_cast<size_t>(len), what, s.width, s.height);
}

}  // namespace

void verify_dataset(const DatasetInfo& info, const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t total = info.train.samples + info.test.samples;
  // Bytes per sample: int16/float16/float32 samples are read as stored (no conversion), as
  // the readers read them, so that the list's reading of the same bytes can be compared.
  const int64_t sample_bytes = info.sample_bytes();
  int64_t done = 0;
  std::vector<uint8_t> buf, piece, chunks;
  for (const SplitInfo* split : {&info.train, &info.test}) {
    for (const auto& sh : split->shards) {
      Hdf5Lock lock(hdf5_mutex());
      std::string cause;
      H5Id f = h5_open_readonly(sh.path, cause);
      if (!f.valid()) fail("shard ", sh.path, " cannot be opened as HDF5 (", cause, "); copy it again or re-run prep");
      H5Id d = h5_dataset(H5Dopen2(f, "/images", H5P_DEFAULT));
      if (!d.valid()) fail("shard ", sh.path, " has no /images (", h5_error_cause(), "); re-run prep");
      // The list: bound row by row to its chunks when opened (a row listing another chunk,
      // or rows out of file order, are refused there); read through below, beside HDF5's
      // own reads.
      const std::unique_ptr<DirectChunkReader> r = DirectChunkReader::open(sh.path, d);
      const auto list = r ? r->chunk_list() : DirectChunkReader::ChunkList::absent;
      const DirectChunkReader* through = list == DirectChunkReader::ChunkList::used ? r.get() : nullptr;
      H5Id dcpl = h5_plist(H5Dget_create_plist(d));
      H5Id fspace = h5_space(H5Dget_space(d));
      if (info.ragged) {  // 1-D /images: pieces of whole samples of at least a chunk's bytes
        hsize_t cb = 0;
        if (H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, 1, &cb) != 1) cb = 1 << 20;
        const auto at = [&](int64_t k) {  // byte offset of shard sample k (k == samples: the end)
          const size_t g = static_cast<size_t>(sh.first_index + std::min(k, sh.samples - 1));
          return k < sh.samples ? split->offsets[g] : split->offsets[g] + split->lengths[g];
        };
        for (int64_t i = 0, j = 0; i < sh.samples; i = j) {
          for (j = i + 1; j < sh.samples && at(j) - at(i) < static_cast<int64_t>(cb);) ++j;
          hsize_t start = static_cast<hsize_t>(at(i)), n = static_cast<hsize_t>(at(j) - at(i));
          H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &n, nullptr);
          H5Id mspace = h5_space(H5Screate_simple(1, &n, nullptr));
          buf.resize(static_cast<size_t>(n));
          if (n > 0 && H5Dread(d, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
            fail("shard ", sh.path, " is damaged: reading image bytes ", start, "..", start + n - 1, " failed (",
                 h5_error_cause(), "); the data no longer match their checksum — copy the file again or re-run ",
                 "`cnnscale prep`");
          if (through) compare_through_list(sh.path, *through, at(i), at(j), buf, piece, chunks);
          if (info.jpeg)
            for (int64_t k = i; k < j; ++k) check_stored_jpeg(info, *split, sh, k, buf.data() + (at(k) - at(i)));
          done += j - i;
          if (progress) progress(done, total);
        }
      } else {
        hsize_t cdims[5] = {0};
        int64_t step = 256;
        const H5Id stored_type = h5_sample_type(info.dtype);
        const int rank = h5_image_dims(info.shape, 0, cdims);
        if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, rank, cdims) == rank)
          step = static_cast<int64_t>(cdims[0]);
        for (int64_t at = 0; at < sh.samples; at += step) {
          const int64_t n = std::min(step, sh.samples - at);
          hsize_t start[5] = {static_cast<hsize_t>(at), 0, 0, 0, 0};
          hsize_t count[5] = {0};
          h5_image_dims(info.shape, static_cast<hsize_t>(n), count);
          H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
          H5Id mspace = h5_space(H5Screate_simple(rank, count, nullptr));
          buf.resize(static_cast<size_t>(n * sample_bytes));
          if (H5Dread(d, stored_type, mspace, fspace, H5P_DEFAULT, buf.data()) < 0)
            fail("shard ", sh.path, " is damaged: reading images ", at, "..", at + n - 1, " failed (", h5_error_cause(),
                 "); the data no longer match their checksum — copy the file again or re-run `cnnscale prep`");
          if (through)
            compare_through_list(sh.path, *through, at * sample_bytes, (at + n) * sample_bytes, buf, piece, chunks);
          done += n;
          if (progress) progress(done, total);
        }
      }
      // After HDF5's own check of the images: a list that reads ignore (it cannot be read,
      // or it is an older prep's out of file order) is the list's fault.
      if (list == DirectChunkReader::ChunkList::unusable)
        fail("shard ", sh.path, " is damaged: its /chunk_addresses list ", r->chunk_list_problem(),
             "; reads ignore it and look each chunk up (slower to open), so the images are intact: ", kChunkListFix);
    }
  }
}

}  // namespace cnnscale
