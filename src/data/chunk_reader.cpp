// chunk_reader.cpp — see chunk_reader.hpp.
#include "data/chunk_reader.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "data/h5util.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace cnnscale {
namespace {

constexpr size_t kFletcherBlock = 360;  // words per block between foldings (H5checksum.c)
constexpr int kLanes = 8;               // 360 = 45 × 8: a block is whole vectors

// One block of `words` ≤ 360 big-endian 16-bit words at d, whole vectors of kLanes:
// A = Σ w_i and B = Σ (words − i)·w_i, modulo 2^32 like HDF5's uint32 sums. Each lane
// keeps a[l] = Σ_j w(8j+l), b[l] = Σ_j (m − j)·w(8j+l) over m vectors; since
// words − (8j + l) = 8(m − j) − l, B = 8·Σ b[l] − Σ l·a[l].
__attribute__((target_clones("avx512f", "avx2", "default"))) void fletcher_block(const uint8_t* d, size_t words,
                                                                                 uint32_t* A, uint32_t* B) {
  uint32_t a[kLanes] = {0}, b[kLanes] = {0};
  const size_t m = words / kLanes;
  for (size_t j = 0; j < m; ++j) {
    const uint8_t* p = d + 2 * kLanes * j;
    for (int l = 0; l < kLanes; ++l) {
      a[l] += static_cast<uint32_t>(p[2 * l]) << 8 | p[2 * l + 1];
      b[l] += a[l];
    }
  }
  uint32_t sa = 0, sb = 0;
  for (int l = 0; l < kLanes; ++l) {
    sa += a[l];
    sb += kLanes * b[l] - static_cast<uint32_t>(l) * a[l];
  }
  *A = sa;
  *B = sb;
}

inline uint32_t fold(uint32_t s) { return (s & 0xffff) + (s >> 16); }

uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

}  // namespace

uint32_t fletcher32(const uint8_t* data, size_t len) {
  size_t words = len / 2;
  uint32_t sum1 = 0, sum2 = 0;
  while (words) {
    const size_t tlen = std::min(words, kFletcherBlock);
    words -= tlen;
    const size_t vec = tlen - tlen % kLanes;
    uint32_t A = 0, B = 0;
    if (vec) fletcher_block(data, vec, &A, &B);
    sum2 += static_cast<uint32_t>(vec) * sum1 + B;  // sequentially: sum2 += sum1 after each word
    sum1 += A;
    data += 2 * vec;
    for (size_t i = vec; i < tlen; ++i, data += 2) {
      sum1 += static_cast<uint32_t>(data[0]) << 8 | data[1];
      sum2 += sum1;
    }
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  if (len % 2) {
    sum1 += static_cast<uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = fold(sum1);
    sum2 = fold(sum2);
  }
  sum1 = fold(sum1);
  sum2 = fold(sum2);
  return sum2 << 16 | sum1;
}

std::unique_ptr<DirectChunkReader> DirectChunkReader::open(const std::string& path, hid_t images) {
  H5Id dcpl = h5_plist(H5Dget_create_plist(images));
  H5Id type = h5_type(H5Dget_type(images));
  H5Id space = h5_space(H5Dget_space(images));
  // Elements of 1, 2 or 4 bytes, little-endian (as prep writes every sample type): read as
  // bytes, the reader converts them.
  const size_t elem = type.valid() ? H5Tget_size(type) : 0;
  if (!dcpl.valid() || !type.valid() || !space.valid() || H5Pget_layout(dcpl) != H5D_CHUNKED ||
      (elem != 1 && elem != 2 && elem != 4) || (elem > 1 && H5Tget_order(type) != H5T_ORDER_LE))
    return nullptr;
  if (H5Pget_nfilters(dcpl) != 1) return nullptr;  // gzip too (or no checksum): HDF5's path
  unsigned flags = 0, config = 0;
  size_t nelmts = 0;
  char name[64];
  if (H5Pget_filter2(dcpl, 0, &flags, &nelmts, nullptr, sizeof name, name, &config) != H5Z_FILTER_FLETCHER32)
    return nullptr;
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > 5) return nullptr;  // 5: volumes (N×C×D×H×W)
  hsize_t dims[5] = {0}, chunk[5] = {0};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  if (H5Pget_chunk(dcpl, rank, chunk) != rank) return nullptr;
  int64_t row = static_cast<int64_t>(elem);  // bytes per index along the first axis; the chunk must hold whole rows
  for (int i = 1; i < rank; ++i) {
    if (chunk[i] != dims[i]) return nullptr;
    row *= static_cast<int64_t>(dims[i]);
  }
  std::unique_ptr<DirectChunkReader> r(new DirectChunkReader());
  r->path_ = path;
  r->chunk_bytes_ = static_cast<int64_t>(chunk[0]) * row;
  r->chunk_rows_ = static_cast<int64_t>(chunk[0]);
  r->total_bytes_ = static_cast<int64_t>(dims[0]) * row;
  const int64_t n = r->chunk_bytes_ > 0 ? (r->total_bytes_ + r->chunk_bytes_ - 1) / r->chunk_bytes_ : 0;
  r->addr_.resize(static_cast<size_t>(n));
  r->images_ = images;
  // The shard's own list (prep writes it: shard_writer.hpp) saves the lookups below,
  // whose cost grows with the chunk count. Row c: offset, stored checksum, index c (an
  // older prep's rows: offset and checksum). The rows must list the chunks in file order,
  // each past the end of the one before, as prep writes them (issue 39: offsets swapped
  // between rows that kept their indices were read as the other chunk's bytes).
  const int64_t stored = r->chunk_bytes_ + 4;
  H5Id file(H5Iget_file_id(images), H5Fclose);
  if (file.valid() && H5Lexists(file, "/chunk_addresses", H5P_DEFAULT) > 0) {
    H5Id table = h5_dataset(H5Dopen2(file, "/chunk_addresses", H5P_DEFAULT));
    H5Id tspace = h5_space(table.valid() ? H5Dget_space(table) : H5I_INVALID_HID);
    hsize_t td[2] = {0, 0};
    const bool two_d = tspace.valid() && H5Sget_simple_extent_ndims(tspace) == 2 &&
                       H5Sget_simple_extent_dims(tspace, td, nullptr) == 2;
    const size_t cols = two_d && td[0] == static_cast<hsize_t>(n) && (td[1] == 2 || td[1] == 3) ? td[1] : 0;
    std::vector<uint64_t> rows(static_cast<size_t>(3 * n));
    r->list_ = ChunkList::unusable;
    const std::string layout = cols == 0 ? std::string() : h5_layout_problem(table);  // h5util.hpp
    if (cols == 0) {
      r->list_problem_ = "has " + std::to_string(two_d ? td[0] : 0) + " rows of " + std::to_string(two_d ? td[1] : 0) +
                         " values but /images has " + std::to_string(n) + " chunks (rows of 3 values)";
    } else if (!layout.empty()) {
      r->list_problem_ = "cannot be read (" + layout + ")";
    } else if (H5Dread(table, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()) < 0) {
      const std::string cause = h5_error_cause();
      r->list_problem_ =
          (cause.find("checksum") != std::string::npos ? "fails its checksum (" : "cannot be read (") + cause + ")";
    } else {
      const auto at = [&](int64_t c, size_t col) { return rows[static_cast<size_t>(c) * cols + col]; };
      std::string order;  // the first row listed before the end of the chunk above it
      for (int64_t c = 1; c < n && order.empty(); ++c)
        if (at(c, 0) < at(c - 1, 0) || at(c, 0) - at(c - 1, 0) < static_cast<uint64_t>(stored))
          order = "row " + std::to_string(c) + " lists file offset " + std::to_string(at(c, 0)) +
                  ", before the end of row " + std::to_string(c - 1) + "'s chunk at offset " +
                  std::to_string(at(c - 1, 0));
      for (int64_t c = 0; c < n && cols == 3; ++c)
        if (at(c, 2) != static_cast<uint64_t>(c))
          fail("shard ", path, " has a /chunk_addresses list that does not match its chunks (row ", c, " lists chunk ",
               at(c, 2), ": its rows were reordered or rewritten): ", kChunkListFix);
      if (!order.empty() && cols == 3)
        fail("shard ", path, " has a /chunk_addresses list that does not match its chunks (", order,
             ", but prep lists the chunks in file order: its rows were reordered or rewritten): ", kChunkListFix);
      if (!order.empty()) {  // an older prep's list: ignored, as a list that cannot be read
        r->list_problem_ = "is out of file order (" + order +
                           ": an older prep's list, without chunk indices, whose rows were reordered)";
      } else {
        // Rows in order can still all be shifted (issue 48 item 5: row c listing chunk c+1's
        // offset and checksum, the last row a copy of the last chunk appended to the file,
        // read as good data under the previous chunk's labels). HDF5 stores the chunks of a
        // prep'd shard back to back, so the list is anchored to HDF5's own index at its
        // first and last rows and wherever two rows are not back to back (both rows of
        // such a gap): every row between two anchors is then the arithmetic HDF5 agrees
        // with. Two lookups for a list as prep writes it, a few more per gap.
        const auto anchor = [&](int64_t c) {
          hsize_t cat[5] = {static_cast<hsize_t>(c) * chunk[0], 0, 0, 0, 0};
          unsigned mask = 0;
          haddr_t a = HADDR_UNDEF;
          hsize_t size = 0;
          if (H5Dget_chunk_info_by_coord(images, cat, &mask, &a, &size) < 0 || a == HADDR_UNDEF || mask != 0 ||
              static_cast<int64_t>(size) != stored)
            return false;  // not the plain layout: HDF5's path reads (and reports) it
          if (a != at(c, 0))
            fail("shard ", path, " has a /chunk_addresses list that does not match its chunks (row ", c,
                 " says file offset ", at(c, 0), ", HDF5 says ", a,
                 ": the list was edited or damaged): ", kChunkListFix);
          return true;
        };
        bool plain = n == 0 || (anchor(0) && anchor(n - 1));
        for (int64_t c = 1; c < n && plain; ++c)
          if (at(c, 0) - at(c - 1, 0) != static_cast<uint64_t>(stored)) plain = anchor(c - 1) && anchor(c);
        if (!plain) {
          h5_error_cause();  // clears the stack
          return nullptr;
        }
        r->sums_.resize(static_cast<size_t>(n));
        for (int64_t c = 0; c < n; ++c) {
          r->addr_[static_cast<size_t>(c)] = at(c, 0);
          r->sums_[static_cast<size_t>(c)] = static_cast<uint32_t>(at(c, 1));
        }
        r->from_table_ = true;
        r->list_ = ChunkList::used;
      }
    }
    h5_error_cause();  // clears the stack
  }
  for (int64_t c = 0; c < n && !r->from_table_; ++c) {
    hsize_t at[5] = {static_cast<hsize_t>(c) * chunk[0], 0, 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(images, at, &mask, &addr, &size) < 0 || addr == HADDR_UNDEF || mask != 0 ||
        static_cast<int64_t>(size) != r->chunk_bytes_ + 4) {
      h5_error_cause();  // clears the stack
      return nullptr;    // not the plain layout: HDF5 reads (and reports) it
    }
    r->addr_[static_cast<size_t>(c)] = addr;
  }
  // HDF5's own descriptor of the file (its default sec2 driver keeps one open while the
  // file is, and pread() moves no file offset): no second descriptor per shard, since a
  // job of 1 024 shards already holds 1 024. Another driver: a descriptor of our own.
  H5Id fapl(file.valid() ? H5Fget_access_plist(file) : H5I_INVALID_HID, H5Pclose);
  void* handle = nullptr;
  if (fapl.valid() && H5Pget_driver(fapl) == H5FD_SEC2 && H5Fget_vfd_handle(file, fapl, &handle) >= 0 && handle) {
    r->fd_ = *static_cast<int*>(handle);
  } else {
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    r->owns_fd_ = true;
  }
  h5_error_cause();
  if (r->fd_ < 0) return nullptr;
  return r;
}

bool DirectChunkReader::table_entry_right(int64_t c) const {
  Hdf5Lock lock(hdf5_mutex());
  hsize_t at[5] = {static_cast<hsize_t>(c * chunk_rows_), 0, 0, 0, 0};
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  const bool found = H5Dget_chunk_info_by_coord(images_, at, &mask, &addr, &size) >= 0;
  h5_error_cause();
  return !found || addr == addr_[static_cast<size_t>(c)];
}

DirectChunkReader::~DirectChunkReader() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

void DirectChunkReader::read(int64_t begin, int64_t end, uint8_t* dst, std::vector<uint8_t>& buf, double* io_s,
                             double* checksum_s) const {
  using Clock = std::chrono::steady_clock;
  auto lap = [](Clock::time_point& t, double* acc) {  // the read on the wall clock (waiting for storage counts)
    const auto now = Clock::now();
    if (acc) *acc += std::chrono::duration<double>(now - t).count();
    t = now;
  };
  auto cpu = [] {  // the checksums in the thread's CPU time
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  if (begin < 0 || end > total_bytes_ || begin > end)
    internal_error("direct read of bytes ", begin, "..", end, " of ", path_, " (", total_bytes_, " bytes)");
  const int64_t stored = chunk_bytes_ + 4;
  int64_t c = begin / chunk_bytes_;
  const int64_t last = end > begin ? (end - 1) / chunk_bytes_ : c - 1;
  while (c <= last) {
    int64_t run = 1;  // chunks stored back to back: one pread
    while (c + run <= last && addr_[static_cast<size_t>(c + run)] == addr_[static_cast<size_t>(c)] + run * stored)
      ++run;
    buf.resize(static_cast<size_t>(run * stored));
    const uint64_t off = addr_[static_cast<size_t>(c)];
    auto t = Clock::now();
    size_t got = 0;
    while (got < buf.size()) {
      const ssize_t k = ::pread(fd_, buf.data() + got, buf.size() - got, static_cast<off_t>(off + got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0)
        fail("shard ", path_, " is damaged: reading chunk ", c, " (", run * stored, " bytes at file offset ", off,
             ") failed (", k < 0 ? std::strerror(errno) : "the file ends before it",
             "); the shard is truncated or damaged — copy it again or re-create the data set with `cnnscale prep`");
      got += static_cast<size_t>(k);
    }
    lap(t, io_s);
    const double c0 = checksum_s ? cpu() : 0;
    for (int64_t i = 0; i < run; ++i, ++c) {
      const uint8_t* chunk = buf.data() + i * stored;
      const uint32_t want = load_le32(chunk + chunk_bytes_), sum = fletcher32(chunk, static_cast<size_t>(chunk_bytes_));
      // HDF5 also accepts the checksum of its releases before 1.6.3: each byte pair swapped.
      const uint32_t swapped = (sum & 0x00ff00ffu) << 8 | (sum & 0xff00ff00u) >> 8;
      // Listed addresses: the chunk found there must be chunk c, whose stored checksum the
      // list holds too (a rewritten file can put another valid chunk at that offset).
      if (from_table_ && (want == sum || want == swapped) && want != sums_[static_cast<size_t>(c)])
        fail("shard ", path_,
             " has a /chunk_addresses list that does not match its chunks (another chunk lies "
             "where chunk ",
             c,
             " was; the file was rewritten, e.g. by h5repack): re-create the data set with "
             "`cnnscale prep`, or delete that list (h5py: del f['chunk_addresses']) and cnnscale looks the chunks up "
             "itself");
      if (want != sum && want != swapped && from_table_ && !table_entry_right(c))
        fail("shard ", path_, " has a /chunk_addresses list that does not match its chunks (chunk ", c,
             " is elsewhere; the file was rewritten, e.g. by h5repack): re-create the data set with `cnnscale prep`, "
             "or delete that list (h5py: del f['chunk_addresses']) and cnnscale looks the chunks up itself");
      if (want != sum && want != swapped)
        fail("shard ", path_, " is damaged: chunk ", c, " (bytes ", c * chunk_bytes_, "..", (c + 1) * chunk_bytes_ - 1,
             " of /images) fails its checksum (Fletcher32 checksum error); the shard is "
             "truncated or damaged — copy it again or re-create the data set with `cnnscale prep`");
      const int64_t from = std::max(begin, c * chunk_bytes_), to = std::min(end, (c + 1) * chunk_bytes_);
      std::memcpy(dst + (from - begin), chunk + (from - c * chunk_bytes_), static_cast<size_t>(to - from));
    }
    if (checksum_s) *checksum_s += cpu() - c0;
  }
}

}  // namespace cnnscale
